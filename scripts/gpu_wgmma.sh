#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with a bundle made by
# scripts/device_bundle.sh: the wgmma FP8 linear (kernels/gemv/wgmma_fp8.h)
# for decode batches of 1..64 tokens, in two stages of under ~10 minutes
# each (one device call each; the second only once every test of the first
# passed: integration only on a kernel that is right).
# Stage `kernel` (the default):
#   1. compute-sanitizer memcheck + racecheck on the exact one-hot patterns (if
#      the tool is there), then the one-hot patterns alone: they name the first
#      wrong (row, token) of a descriptor / swizzle / fragment mistake
#   2. every WgmmaFp8Test (variants x grids (K splits, stream-K) x m at the
#      31B shapes, the LM head, odd shapes; graph replays; PDL), and the GEMV
#      tests sharing the helpers
#   3. gemv-fp8-bench, wgmma rows only (m = 16, 32, 64, weights rotated past
#      L2, a PDL stand-in kernel after each launch): best K split and best
#      stream-K grid on the six 31B linears and the fp8 LM head; every
#      candidate of 5376 x 8192 (the o_proj, 42 row tiles)
# Stage `engine`: the engine's use of it (engine/cuda/wgmma_path.h, fp8
# decode batches 1..64 against the GEMV and cuBLASLt):
#   1. LinearFp8Test.* (LinearRunner: wgmma after autotuning, forced, cached,
#      switched off; the cuBLASLt paths as before)
#   2. gemma-bench 31B fp8 batched decode, batches 4, 16 and 64 at contexts 64
#      and 2048: the measured choice (its start-up log lists wgmma vs
#      the GEMV / cuBLASLt per shape and bucket), GEMMA_FP8_WGMMA=0 (GEMV and
#      cuBLASLt only), and
#      GEMMA_FP8_WGMMA=force (wgmma wherever tuned: the kernel end to end)
#   Serving at concurrency 64 (a call each, ~10 minutes):
#     WEIGHTS=fp8 scripts/gpu_serve_31b.sh 64                     fp8, measured choice
#     WEIGHTS=fp8 GEMMA_FP8_WGMMA=0 scripts/gpu_serve_31b.sh 64   fp8, GEMV / cuBLASLt only
#     scripts/gpu_serve_31b.sh 64                                 bf16 weights, for reference
# Build first (here, not there):
#   ninja -C build gpu_fp8_kernels_test gemv-fp8-bench gpu_fp8_quality_test gemma-bench
#   scripts/device_bundle.sh .device/bundle build/bin/{gpu_fp8_kernels_test,gemv-fp8-bench,gpu_fp8_quality_test,gemma-bench}
# (44 MB), then
#   BUNDLE=.device/bundle scripts/gpu_wgmma.sh            # stage kernel
#   BUNDLE=.device/bundle scripts/gpu_wgmma.sh engine     # stage engine
set -uo pipefail
bundle=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1

source "$(dirname "$0")/gpu_steps.sh"

if [[ "${1:-kernel}" == engine ]]; then
  export GEMMA_TEST_DATA="$PWD/tests/data" GEMMA_MODELS_DIR="$PWD/models"
  # One cache for the three bench runs: the GEMVs and wgmma choices are
  # timed once (first run), the later runs take them.
  export GEMMA_AUTOTUNE_CACHE="$out/autotune_wgmma_engine.txt"
  run linear_fp8_test 150 "$bundle/bin/gpu_fp8_quality_test" --gtest_filter='LinearFp8Test.*'
  bench=("$bundle/bin/gemma-bench" --config tests/data/gemma4-31b --random-weights --weights fp8 --batches 4,16,64
         --contexts 64,2048 --decode-tokens 16)
  run bench_wgmma 150 "${bench[@]}"
  GEMMA_FP8_WGMMA=0 run bench_cublaslt 120 "${bench[@]}"
  GEMMA_FP8_WGMMA=force run bench_wgmma_force 120 "${bench[@]}"
  echo "==== GPU: $(tail -1 "$out/gpu.txt")"
  cat "$out/status.txt"
  grep -E '^\[  (PASSED|FAILED)|Failure|Expected|Which is|error|measured:' "$out/linear_fp8_test.log" | head -24
  echo "==== wgmma vs GEMV / cuBLASLt per shape and bucket (start-up of the first bench run)"
  grep -hE 'cuda: fp8 [0-9]+ x [0-9]+ \(|wgmma' "$out/bench_wgmma.log" | sed -E 's/^\[[^]]*\] //' | head -20
  echo "==== gemma-bench 31B fp8 batched decode: measured | GEMMA_FP8_WGMMA=0 | force"
  for f in bench_wgmma bench_cublaslt bench_wgmma_force; do
    grep -hE 'bench: batch|error|Error' "$out/$f.log" | sed -E "s/^\[[^]]*\] /$f: /"
  done
  exit 0
fi

test_bin="$bundle/bin/gpu_fp8_kernels_test"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
run wgmma_onehot 60 "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*:WgmmaFp8Test.Rejects*'
if [[ -n "$sanitizer" ]]; then
  run sanitizer_memcheck 100 "$sanitizer" --tool memcheck "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*'
  [[ -n "${RACECHECK:-}" ]] &&
    run sanitizer_racecheck 100 "$sanitizer" --tool racecheck "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*'
fi
run wgmma_tests 300 "$test_bin" --gtest_brief=1 --gtest_filter='WgmmaFp8Test.*:GemvFp8Test.*'
GEMMA_BENCH_WGMMA_ONLY=1 run wgmma_bench 240 "$bundle/bin/gemv-fp8-bench"
GEMMA_BENCH_WGMMA_ONLY=1 run wgmma_bench_lm_head 120 "$bundle/bin/gemv-fp8-bench" 262144 5376
GEMMA_BENCH_WGMMA_ONLY=1 GEMMA_BENCH_WGMMA_ALL=1 run wgmma_bench_all 120 "$bundle/bin/gemv-fp8-bench" 5376 8192

echo "==== GPU: $(tail -1 "$out/gpu.txt")"
cat "$out/status.txt"
for t in sanitizer_memcheck sanitizer_racecheck; do
  [[ -f "$out/$t.log" ]] && grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race' "$out/$t.log" | head -6
done
for t in wgmma_onehot wgmma_tests; do
  grep -E '^\[  (PASSED|FAILED)|Failure|first wrong|first bad|Expected|Which is|error' "$out/$t.log" | head -16
done
echo "==== wgmma FP8 linear (weight bytes / time; best variant x split each; targets ~4 TB/s)"
grep -hE '^wgmma-fp8' "$out/wgmma_bench.log" "$out/wgmma_bench_lm_head.log" | sed -E 's/ +/ /g'
