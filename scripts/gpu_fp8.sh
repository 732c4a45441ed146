#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with a bundle made by
# scripts/device_bundle.sh (binaries in $BUNDLE/bin, libraries in $BUNDLE/lib):
# the FP8 weight path (issue 8) in under ~4 minutes:
#   1. gpu_fp8_kernels_test   quantizer, fp8 GEMV (every tiling, E4M3 and a16 input, 31B
#                             shapes), epilogue, norm / gelu gate emitting fp8 rows (the
#                             wgmma FP8 linear's tests and bench rows: scripts/gpu_wgmma.sh)
#   2. gpu_fp8_quality_test   fp8 logits vs the fortunes float64 golden; 31B random fp8 vs
#                             bf16; LinearRunner paths (pre-quantized x, tuned a16)
#   3. gemv-fp8-bench         decode GEMV TB/s, bf16 vs fp8 (E4M3 / a16), 31B shapes, batch
#                             1/2/4/8, and the batch-1 fp8 GEMV sum of one token
#   4. gemma-bench --weights fp8 (31B, random weights): decode @512 (also with the bf16 LM
#      head, --lm-head bf16, for comparison), prefill @8K
# Logs go to $OUT (default gpu-out); a short table comes last.
#   BUNDLE=.device/bundle scripts/gpu_fp8.sh
set -uo pipefail
bundle=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export GEMMA_TEST_DATA="$PWD/tests/data" GEMMA_MODELS_DIR="$PWD/models"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1

source "$(dirname "$0")/gpu_steps.sh"
run gpu_fp8_kernels_test 120 "$bundle/bin/gpu_fp8_kernels_test" --gtest_brief=1 --gtest_filter=-WgmmaFp8Test.*
run gpu_fp8_quality_test 120 "$bundle/bin/gpu_fp8_quality_test" --gtest_brief=1
GEMMA_BENCH_NO_WGMMA=1 run gemv-fp8-bench 60 "$bundle/bin/gemv-fp8-bench"
# One depth, 8K prompt: prefill tok/s at 8K and decode tok/s at depth 8K; the
# second run gives decode at depth 512 (prefill 512).
run bench_fp8_512 60 "$bundle/bin/gemma-bench" --config tests/data/gemma4-31b --random-weights --weights fp8 \
  --skip-gemv --depths 512 --json "$out/bench_fp8_512.json"
run bench_fp8_512_bf16_head 60 "$bundle/bin/gemma-bench" --config tests/data/gemma4-31b \
  --random-weights --weights fp8 --lm-head bf16 --skip-gemv --depths 512 --json "$out/bench_fp8_512_bf16_head.json"
run bench_fp8_8k 70 "$bundle/bin/gemma-bench" --config tests/data/gemma4-31b --random-weights --weights fp8 \
  --skip-gemv --depths 8192 --json "$out/bench_fp8_8k.json"
# If cuBLASLt's outer-vector fp8 scales misbehave, the epilogue path instead.
if ! grep -q 'bench: depth' "$out/bench_fp8_8k.log"; then
  GEMMA_FP8_OUTER_VEC=0 run bench_fp8_8k_epilogue 70 "$bundle/bin/gemma-bench" --config tests/data/gemma4-31b \
    --random-weights --weights fp8 --skip-gemv --depths 8192 --json "$out/bench_fp8_8k_epilogue.json"
fi

echo "==== GPU: $(tail -1 "$out/gpu.txt")"
cat "$out/status.txt"
for t in gpu_fp8_kernels_test gpu_fp8_quality_test; do
  grep -E '^\[  (PASSED|FAILED)|Failure|Expected|Which is|error' "$out/$t.log" | head -12
done
echo "==== quality"
grep -hE 'fp8-quality|linear-fp8' "$out/gpu_fp8_quality_test.log"
echo "==== decode GEMV (weight bytes / time, best tiling each)"
grep -hE '^gemv-fp8 .* b(1|8) |decode token' "$out/gemv-fp8-bench.log" | sed -E 's/ +/ /g'  # b2, b4: see the log
echo "==== autotuned fp8 GEMVs at batch 1 (gemma-bench 512)"
grep -hE '^  fp8 GEMV' "$out/bench_fp8_512.log"
echo "==== gemma-bench 31B fp8 (targets: decode@512 >= 100 tok/s, prefill@8K >= 11.5K tok/s)"
for f in "$out"/bench_fp8_*.log; do
  grep -hE 'bench: depth|outer-vector|error|Error' "$f" | sed -E "s/^\[[^]]*\] /$(basename "$f" .log): /"
done
