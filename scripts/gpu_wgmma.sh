#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with a bundle made by
# scripts/device_bundle.sh: the wgmma FP8 linear (kernels/gemv/wgmma_fp8.h)
# for decode batches of 9..128 tokens, in under ~10 minutes (split it across calls if a call is capped):
#   1. compute-sanitizer memcheck + racecheck on the exact one-hot patterns (if
#      the tool is there), then the one-hot patterns alone: they name the first
#      wrong (row, token) of a descriptor / swizzle / fragment mistake
#   2. every WgmmaFp8Test (variants x splits x m at the 31B shapes, the LM head,
#      odd shapes; graph replays; PDL), and the GEMV tests sharing the helpers
#   3. gemv-fp8-bench, wgmma rows only (m = 16, 32, 64, weights rotated past
#      L2), on the six 31B linears and the fp8 LM head; every candidate of
#      5376 x 8192 (the o_proj, 42 row tiles: the split-K case)
# Build first (here, not there):
#   ninja -C build gpu_fp8_kernels_test gemv-fp8-bench
#   scripts/device_bundle.sh .device/bundle build/bin/gpu_fp8_kernels_test build/bin/gemv-fp8-bench
#   BUNDLE=.device/bundle scripts/gpu_wgmma.sh
set -uo pipefail
bundle=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1

run() {  # name timeout_s command...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - start))s" >> "$out/status.txt"
}
: > "$out/status.txt"
test_bin="$bundle/bin/gpu_fp8_kernels_test"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [[ -n "$sanitizer" ]]; then
  run sanitizer_memcheck 120 "$sanitizer" --tool memcheck "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*'
  run sanitizer_racecheck 120 "$sanitizer" --tool racecheck "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*'
fi
run wgmma_onehot 60 "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*:WgmmaFp8Test.Rejects*'
run wgmma_tests 480 "$test_bin" --gtest_brief=1 --gtest_filter='WgmmaFp8Test.*:GemvFp8Test.*'
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
