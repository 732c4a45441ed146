// gemma-int4-repack-bench: host time to bring one pack-quantized (W4A16)
// matrix into the W4A16 kernels' device layout, the way the loader does
// (PackQuantizedForDevice, straight from the packed words) against the
// byte-per-code path (unpack, Q4_0 blocks, PackForDevice). CPU only; random
// codes, fp16-exact scales.
//
//   gemma-int4-repack-bench [--rows N] [--cols K] [--group 32|128] [--threads T] [--repeats R]
#include "CLI/CLI.hpp"

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/model/quantization_int4.h"
#include "engine/model/weights.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gemma::quant;
  int64_t rows = 21504, cols = 5376;  // the 31B's gate (or up) projection
  int group = 128, threads = 0, repeats = 3;
  CLI::App app{"host repack time of one pack-quantized matrix"};
  app.add_option("--rows", rows, "output rows")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--cols", cols, "input columns (a multiple of 32)")->check(CLI::Range(int64_t{32}, int64_t{1} << 20));
  app.add_option("--group", group, "quantization group size (32 or 128)")->check(CLI::IsMember({32, 128}));
  app.add_option("--threads", threads, "threads of the direct path (0: one per hardware thread)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--repeats", repeats, "timed repetitions")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (cols % 32 != 0) {
    std::fprintf(stderr, "--cols %lld: must be a multiple of 32\n", static_cast<long long>(cols));
    return 2;
  }
  std::mt19937 rng(1);
  std::vector<int32_t> words(static_cast<size_t>(rows * cols / 8));
  for (int32_t& w : words) w = static_cast<int32_t>(rng());
  std::vector<float> scales(static_cast<size_t>(rows * ((cols + group - 1) / group)));
  for (float& s : scales) s = gemma::HalfToFloat(FloatToHalf(0.001f * static_cast<float>(1 + rng() % 100)));
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(words.data()), words.size() * 4);
  std::printf("%lld x %lld, group %d (%.1f M codes)\n", static_cast<long long>(rows), static_cast<long long>(cols),
              group, static_cast<double>(rows * cols) / 1e6);
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto unpacked = UnpackPackQuantized(words, scales, rows, cols, group);
    if (!unpacked.ok()) {
      std::fprintf(stderr, "%s\n", unpacked.status().ToString().c_str());
      return 1;
    }
    const W4DeviceMatrix want = PackForDevice(ToQ4_0Blocks(*std::move(unpacked)));
    const auto t1 = std::chrono::steady_clock::now();
    auto got = PackQuantizedForDevice(bytes, scales, rows, cols, group, threads);
    const auto t2 = std::chrono::steady_clock::now();
    if (!got.ok() || got->packed != want.packed || got->scales != want.scales) {
      std::fprintf(stderr, "the two paths differ\n");
      return 1;
    }
    std::printf("byte-per-code path %.3f s, direct %.3f s (%.1fx)\n", Seconds(t0, t1), Seconds(t1, t2),
                Seconds(t0, t1) / Seconds(t1, t2));
  }
  return 0;
}
