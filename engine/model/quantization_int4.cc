#include "engine/model/quantization_int4.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/weights.h"

namespace gemma::quant {

double Int4Matrix::Value(int64_t r, int64_t c) const {
  const int code = codes[static_cast<size_t>(r * cols + c)];
  const uint16_t s = scales[static_cast<size_t>(r * groups_per_row() + c / group)];
  return static_cast<double>(code - 8) * static_cast<double>(HalfToFloat(s));
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7FFFFFFF;
  if (abs >= 0x7F800000) return sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0);  // inf / NaN
  const int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent > 15) return sign | 0x7C00;
  uint32_t mantissa = (abs & 0x7FFFFF) | 0x800000;  // 24 bits with the implicit one
  int shift;                                         // bits dropped from the 24-bit mantissa
  uint32_t base;                                     // exponent field of the result
  if (exponent >= -14) {
    shift = 13;
    base = static_cast<uint32_t>(exponent + 15) << 10;
    mantissa &= 0x7FFFFF;  // normal: the implicit one is carried by the exponent field
  } else {
    if (exponent < -25) return sign;  // below half the smallest subnormal
    shift = -exponent - 1;            // subnormal: value = m * 2^-24
    base = 0;
  }
  uint32_t result = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (result & 1))) ++result;  // ties to even; a carry bumps the exponent
  return static_cast<uint16_t>(sign | (base + result));
}

void QuantizeQ4_0Block(const float* x, uint8_t* codes, uint16_t* scale) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQ4BlockSize; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *scale = FloatToHalf(d);
  for (int j = 0; j < kQ4BlockSize; ++j) {
    const float scaled = x[j] * id;
    const float shifted = scaled + 8.5f;
    const int q = static_cast<int>(shifted);  // truncation; shifted >= 0.5
    codes[j] = static_cast<uint8_t>(q < 15 ? q : 15);
  }
}

absl::StatusOr<Int4Matrix> QuantizeQ4_0(std::span<const float> w, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || cols % kQ4BlockSize != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Q4_0: need rows >= 1 and cols a positive multiple of 32, got [", rows, ", ", cols, "]"));
  }
  if (static_cast<int64_t>(w.size()) != rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat("Q4_0: ", w.size(), " values for a [", rows, ", ", cols, "] matrix"));
  }
  Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group = kQ4BlockSize;
  m.codes.resize(w.size());
  m.scales.resize(static_cast<size_t>(rows * (cols / kQ4BlockSize)));
  for (size_t b = 0; b < m.scales.size(); ++b) {
    const float* x = w.data() + b * kQ4BlockSize;
    for (int j = 0; j < kQ4BlockSize; ++j) {
      if (!std::isfinite(x[j])) {
        return absl::InvalidArgumentError(absl::StrCat("Q4_0: non-finite weight ", x[j], " at row ",
                                                       b / (cols / kQ4BlockSize), ", column ",
                                                       (b % (cols / kQ4BlockSize)) * kQ4BlockSize + j));
      }
    }
    QuantizeQ4_0Block(x, m.codes.data() + b * kQ4BlockSize, &m.scales[b]);
  }
  return m;
}

std::vector<float> SnapToQ4_0Grid(std::span<const float> w, int64_t rows, int64_t cols) {
  auto m = QuantizeQ4_0(w, rows, cols);
  if (!m.ok()) return {};
  std::vector<float> out(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(r * cols + c)] = static_cast<float>(m->Value(r, c));
  }
  return out;
}

std::vector<float> SnapToQ4_0GridBf16(std::span<const float> w, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || cols % kQ4BlockSize != 0 || static_cast<int64_t>(w.size()) != rows * cols) return {};
  std::vector<float> out(w.size());
  for (size_t b = 0; b < w.size() / kQ4BlockSize; ++b) {
    const float* x = w.data() + b * kQ4BlockSize;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQ4BlockSize; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    int exp = 0;
    const double frac = std::frexp(static_cast<double>(max) / -8.0, &exp);  // |frac| in [0.5, 1)
    const double d = std::ldexp(std::nearbyint(std::ldexp(frac, 5)), exp - 5);  // 5 significant bits
    for (int j = 0; j < kQ4BlockSize; ++j) {
      double q = d != 0.0 ? std::nearbyint(x[j] / d) : 0.0;
      q = std::clamp(q, -8.0, 7.0);
      out[b * kQ4BlockSize + j] = static_cast<float>(q * d);
    }
  }
  return out;
}

absl::Status CheckFp16Scales(std::span<const float> scales, int64_t groups_per_row) {
  for (size_t i = 0; i < scales.size(); ++i) {
    if (std::isfinite(scales[i]) && HalfToFloat(FloatToHalf(scales[i])) == scales[i]) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "weight_scale[", i / groups_per_row, ", ", i % groups_per_row, "] = ", scales[i],
        std::isfinite(scales[i]) ? " is not an fp16 value (the int4 kernels keep the checkpoint's scales "
                                   "exactly, in fp16)"
                                 : " is not finite"));
  }
  return absl::OkStatus();
}

namespace {

// UnpackPackQuantized's and PackQuantizedForDevice's checks of the shapes,
// the group and the scales (`num_words` packed int32 words).
absl::Status CheckPackQuantized(int64_t num_words, std::span<const float> scales, int64_t rows, int64_t cols,
                                int group) {
  if (group != 32 && group != 128) {
    return absl::InvalidArgumentError(absl::StrCat("pack-quantized: group_size ", group, " (supported: 32, 128)"));
  }
  if (rows <= 0 || cols <= 0 || cols % 32 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pack-quantized: weight_shape [", rows, ", ", cols, "] needs columns a multiple of 32"));
  }
  const int64_t words = (cols + 7) / 8;
  const int64_t groups = (cols + group - 1) / group;
  if (num_words != rows * words) {
    return absl::InvalidArgumentError(absl::StrCat("pack-quantized: weight_packed has ", num_words,
                                                   " words, expected [", rows, ", ", words, "]"));
  }
  if (static_cast<int64_t>(scales.size()) != rows * groups) {
    return absl::InvalidArgumentError(absl::StrCat("pack-quantized: weight_scale has ", scales.size(),
                                                   " values, expected [", rows, ", ", groups, "]"));
  }
  if (absl::Status s = CheckFp16Scales(scales, groups); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("pack-quantized: ", s.message()));
  }
  return absl::OkStatus();
}

// The low nibbles of x's four bytes (x & 0x0F0F0F0F), in order, as 16 bits.
uint32_t CompactNibbles(uint32_t x) {
  x = (x | (x >> 4)) & 0x00FF00FFu;
  return (x | (x >> 8)) & 0x0000FFFFu;
}

}  // namespace

absl::StatusOr<Int4Matrix> UnpackPackQuantized(std::span<const int32_t> packed, std::span<const float> scales,
                                               int64_t rows, int64_t cols, int group) {
  if (absl::Status s = CheckPackQuantized(static_cast<int64_t>(packed.size()), scales, rows, cols, group); !s.ok())
    return s;
  const int64_t words = (cols + 7) / 8;
  Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  m.codes.resize(static_cast<size_t>(rows * cols));
  m.scales.resize(scales.size());
  for (size_t i = 0; i < scales.size(); ++i) m.scales[i] = FloatToHalf(scales[i]);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t word = static_cast<uint32_t>(packed[static_cast<size_t>(r * words + c / 8)]);
      m.codes[static_cast<size_t>(r * cols + c)] = static_cast<uint8_t>((word >> (4 * (c % 8))) & 0xF);
    }
  }
  return m;
}

Int4Matrix ToQ4_0Blocks(Int4Matrix m) {
  if (m.group == kQ4BlockSize) return m;
  const int64_t from = m.groups_per_row();
  const int per = m.group / kQ4BlockSize;
  std::vector<uint16_t> scales(static_cast<size_t>(m.rows * ((m.cols + kQ4BlockSize - 1) / kQ4BlockSize)));
  const int64_t to = static_cast<int64_t>(scales.size()) / m.rows;
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t b = 0; b < to; ++b) {
      scales[static_cast<size_t>(r * to + b)] = m.scales[static_cast<size_t>(r * from + b / per)];
    }
  }
  m.scales = std::move(scales);
  m.group = kQ4BlockSize;
  return m;
}

std::vector<int32_t> PackQuantizedWords(const Int4Matrix& m) {
  const int64_t words = (m.cols + 7) / 8;
  std::vector<int32_t> out(static_cast<size_t>(m.rows * words), 0);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      const uint32_t u = m.codes[static_cast<size_t>(r * m.cols + c)];
      uint32_t& word = reinterpret_cast<uint32_t&>(out[static_cast<size_t>(r * words + c / 8)]);
      word |= u << (4 * (c % 8));
    }
  }
  return out;
}

W4DeviceMatrix PackForDevice(const Int4Matrix& m) {
  W4DeviceMatrix d;
  d.rows = m.rows;
  d.cols = m.cols;
  d.kpad = (m.cols + kW4SuperK - 1) / kW4SuperK * kW4SuperK;
  d.group = m.group;
  const int64_t row_bytes = d.kpad / 2;
  const int64_t dev_groups = d.kpad / m.group;
  d.packed.assign(static_cast<size_t>(m.rows * row_bytes), 0);
  d.scales.assign(static_cast<size_t>(m.rows * dev_groups), 0);
  for (int64_t r = 0; r < m.rows; ++r) {
    uint8_t* row = d.packed.data() + r * row_bytes;
    for (int64_t g = 0; g < d.kpad / 32; ++g) {
      for (int t = 0; t < 4; ++t) {
        uint32_t word = 0;
        for (int e = 0; e < 8; ++e) {
          const int64_t c = 32 * g + 8 * t + e;
          const uint32_t u = c < m.cols ? m.codes[static_cast<size_t>(r * m.cols + c)] : 8;
          word |= u << (4 * W4NibbleOf(e));
        }
        std::memcpy(row + W4WordOffset(g, t), &word, 4);  // little-endian, as the device reads it
      }
    }
    for (int64_t g = 0; g < dev_groups; ++g) {
      if (g < m.groups_per_row()) d.scales[static_cast<size_t>(r * dev_groups + g)] = m.scales[static_cast<size_t>(r * m.groups_per_row() + g)];
    }
  }
  return d;
}

absl::StatusOr<W4DeviceMatrix> PackQuantizedForDevice(std::span<const uint8_t> packed_words,
                                                      std::span<const float> scales, int64_t rows, int64_t cols,
                                                      int group, int threads) {
  if (packed_words.size() % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pack-quantized: weight_packed has ", packed_words.size(), " bytes, not whole int32 words"));
  }
  if (absl::Status s = CheckPackQuantized(static_cast<int64_t>(packed_words.size() / 4), scales, rows, cols, group);
      !s.ok())
    return s;
  W4DeviceMatrix d;
  d.rows = rows;
  d.cols = cols;
  d.kpad = (cols + kW4SuperK - 1) / kW4SuperK * kW4SuperK;
  d.group = kQ4BlockSize;
  const int64_t row_bytes = d.kpad / 2, dev_groups = d.kpad / kQ4BlockSize;
  const int64_t words = cols / 8, blocks = cols / kQ4BlockSize, groups = (cols + group - 1) / group;
  const int per = group / kQ4BlockSize;
  d.packed.resize(static_cast<size_t>(rows * row_bytes));
  d.scales.assign(static_cast<size_t>(rows * dev_groups), 0);
  auto convert = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* row = d.packed.data() + r * row_bytes;
      const uint8_t* in = packed_words.data() + r * words * 4;
      for (int64_t w = 0; w < words; ++w) {
        uint32_t word;
        std::memcpy(&word, in + 4 * w, 4);
        // Nibble e (column 8 w + e) to nibble W4NibbleOf(e): the even ones,
        // in order, to the low half, the odd ones to the high half.
        const uint32_t out = CompactNibbles(word & 0x0F0F0F0Fu) | (CompactNibbles((word >> 4) & 0x0F0F0F0Fu) << 16);
        std::memcpy(row + W4WordOffset(w / 4, static_cast<int>(w % 4)), &out, 4);
      }
      const uint32_t eights = 0x88888888u;  // padding columns: code 8 (zero) under scale 0
      for (int64_t g = blocks; g < dev_groups; ++g)
        for (int t = 0; t < 4; ++t) std::memcpy(row + W4WordOffset(g, t), &eights, 4);
      for (int64_t b = 0; b < blocks; ++b)
        d.scales[static_cast<size_t>(r * dev_groups + b)] = FloatToHalf(scales[static_cast<size_t>(r * groups + b / per)]);
    }
  };
  const int64_t hw = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  const int n = static_cast<int>(std::clamp<int64_t>(hw, 1, std::max<int64_t>(1, rows / 64)));
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(convert, rows * i / n, rows * (i + 1) / n);
  convert(0, rows / n);
  for (std::thread& t : pool) t.join();
  return d;
}

}  // namespace gemma::quant
