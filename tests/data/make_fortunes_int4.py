#!/usr/bin/env python3
"""Writes the int4 fixtures of the fortunes model (models/gemma4-fortunes).

Standard library only (no numpy or safetensors needed): safetensors is an
8-byte little-endian header length, a JSON header, then raw tensor bytes.

  gemma4-fortunes-q4_0/        the fortunes checkpoint with every linear layer
                               (q/k/v/o, gate/up/down) snapped to GGML's Q4_0
                               grid, stored bf16: blocks of 32 input columns,
                               d = m / -8 with m the block's value of largest
                               magnitude, rounded to 5 significant bits so that
                               every (u - 8) * d is a bf16 value; codes
                               round(x / d) clamped to -8..7. GGML's quantizer
                               recovers d and the codes exactly (the same rule
                               as quant::SnapToQ4_0GridBf16 in C++).
  gemma4-fortunes-w4a16-g32/   the same weights as a compressed-tensors
                               pack-quantized W4A16 checkpoint, group 32:
                               weight_packed / weight_scale / weight_shape, the
                               scale of each group being the Q4_0 block's d
                               (sign included: GGML's d is negative where the
                               largest-magnitude value is positive), so it
                               dequantizes to exactly the q4_0 fixture.
  gemma4-fortunes-w4a16-g128/  the original fortunes weights quantized as
                               llm-compressor's W4A16 does (symmetric, group
                               128): scale = bf16(amax / 7.5), q = round-half-
                               even(x / scale) clamped to -8..7.

The embedding (the tied LM head, in quantization_config.ignore), norms and
layer scalars are copied unchanged. Usage:
  python3 tests/data/make_fortunes_int4.py models/gemma4-fortunes tests/data
"""

import array
import json
import math
import os
import shutil
import struct
import sys

LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
BLOCK = 32


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[b:e])
    return out


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def bf16_to_floats(raw):
    wide = bytearray(2 * len(raw))
    wide[2::4] = raw[0::2]
    wide[3::4] = raw[1::2]
    return array.array("f", bytes(wide))


def floats_to_bf16_exact(values):
    wide = array.array("f", values).tobytes()
    if any(wide[0::4]) or any(wide[1::4]):
        raise ValueError("a value is not a bf16 value")
    out = bytearray(len(wide) // 2)
    out[0::2] = wide[2::4]
    out[1::2] = wide[3::4]
    return bytes(out)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16_round(x):
    """x (a float32 value) rounded to nearest-even bf16."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def is_fp16(x):
    try:
        return struct.unpack("<e", struct.pack("<e", x))[0] == x
    except OverflowError:
        return False


def snap_q4_0(w, rows, cols):
    """Q4_0 grid of bf16 values: returns (values, codes u = q + 8, scales d)."""
    values, codes, scales = [0.0] * len(w), bytearray(len(w)), []
    for b in range(len(w) // BLOCK):
        x = w[b * BLOCK:(b + 1) * BLOCK]
        amax, m = 0.0, 0.0
        for v in x:
            if amax < abs(v):
                amax, m = abs(v), v
        if m == 0.0:
            d = -0.0  # GGML: 0 / -8
        else:
            frac, e = math.frexp(m / -8.0)
            d = math.ldexp(float(round(math.ldexp(frac, 5))), e - 5)
        for j, v in enumerate(x):
            q = 0 if d == 0.0 else min(7, max(-8, round(v / d)))
            values[b * BLOCK + j] = q * d
            codes[b * BLOCK + j] = q + 8
        if not is_fp16(d):
            raise ValueError(f"block {b}: scale {d} is not an fp16 value")
        scales.append(d)
    return values, codes, scales


def quantize_group(w, rows, cols, group):
    """llm-compressor's symmetric int4 rule: scale = bf16(amax / 7.5) per group."""
    groups = (cols + group - 1) // group
    codes, scales = bytearray(len(w)), []
    for r in range(rows):
        for g in range(groups):
            lo, hi = r * cols + g * group, r * cols + min(cols, (g + 1) * group)
            amax = max(abs(v) for v in w[lo:hi])
            s = bf16_round(f32(amax / 7.5))
            if s == 0.0:
                s = bf16_round(f32(2.0 ** -23))  # torch.finfo(float32).eps, the clamp llm-compressor applies
            if not is_fp16(s):
                raise ValueError(f"row {r} group {g}: scale {s} is not an fp16 value")
            scales.append(s)
            for i in range(lo, hi):
                codes[i] = min(7, max(-8, round(w[i] / s))) + 8
    return codes, scales


def pack_words(codes, rows, cols):
    """compressed-tensors pack_to_int32: element c of a row at bits 4 (c % 8) of word c / 8."""
    words_per_row = (cols + 7) // 8
    words = array.array("i", [0] * (rows * words_per_row))
    for r in range(rows):
        for wi in range(words_per_row):
            word = 0
            for e in range(8):
                c = wi * 8 + e
                if c < cols:
                    word |= codes[r * cols + c] << (4 * e)
            words[r * words_per_row + wi] = word - (1 << 32) if word >= 1 << 31 else word
    return words.tobytes()


def packed_tensors(module, codes, scales, rows, cols, group):
    return {
        module + ".weight_packed": ("I32", [rows, (cols + 7) // 8], pack_words(codes, rows, cols)),
        module + ".weight_scale": ("BF16", [rows, (cols + group - 1) // group], floats_to_bf16_exact(scales)),
        module + ".weight_shape": ("I64", [2], struct.pack("<2q", rows, cols)),
    }


def quantization_config(group):
    return {
        "config_groups": {
            "group_0": {
                "input_activations": None,
                "output_activations": None,
                "targets": ["Linear"],
                "weights": {
                    "actorder": None, "block_structure": None, "dynamic": False, "group_size": group,
                    "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "strategy": "group",
                    "symmetric": True, "type": "int",
                },
            }
        },
        "format": "pack-quantized",
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
    }


def write_dir(src, dst, tensors, qconfig):
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    if qconfig is not None:
        config["quantization_config"] = qconfig
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(src, "tokenizer.model"), os.path.join(dst, "tokenizer.model"))
    write_safetensors(os.path.join(dst, "model.safetensors"), tensors)


def main():
    src, out = sys.argv[1], sys.argv[2]
    tensors = read_safetensors(os.path.join(src, "model.safetensors"))
    on_grid, g32, g128 = {}, {}, {}
    for name, (dtype, shape, raw) in tensors.items():
        module = name[: -len(".weight")]
        if not (name.endswith(".weight") and module.rsplit(".", 1)[-1] in LINEARS):
            for d in (on_grid, g32, g128):
                d[name] = (dtype, shape, raw)
            continue
        assert dtype == "BF16" and len(shape) == 2 and shape[1] % 128 == 0, name
        rows, cols = shape
        w = bf16_to_floats(raw)
        values, codes, scales = snap_q4_0(w, rows, cols)
        on_grid[name] = ("BF16", shape, floats_to_bf16_exact(values))
        g32.update(packed_tensors(module, codes, scales, rows, cols, 32))
        codes128, scales128 = quantize_group(w, rows, cols, 128)
        g128.update(packed_tensors(module, codes128, scales128, rows, cols, 128))
        print(name, rows, cols, file=sys.stderr)
    write_dir(src, os.path.join(out, "gemma4-fortunes-q4_0"), on_grid, None)
    write_dir(src, os.path.join(out, "gemma4-fortunes-w4a16-g32"), g32, quantization_config(32))
    write_dir(src, os.path.join(out, "gemma4-fortunes-w4a16-g128"), g128, quantization_config(128))


if __name__ == "__main__":
    main()
