#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with the bundle made by
# scripts/device_bundle.sh: every GPU test, then gemma-bench on the 31B shape
# with random weights. Logs go to $OUT (or ./gpu-out); a short table comes last.
#   BUNDLE=.device/bundle scripts/gpu_run.sh [extra gemma-bench flags]
set -uo pipefail
bundle=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export GEMMA_TEST_DATA="$PWD/tests/data" GEMMA_MODELS_DIR="$PWD/models"
export GEMMA_AUTOTUNE_CACHE="$out/autotune.txt"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
summary=()
for t in "$bundle"/bin/${GPU_TESTS:-gpu_*_test}; do  # GPU_TESTS: a glob to run fewer
  [ -x "$t" ] || continue
  name=$(basename "$t")
  timeout 300 "$t" --gtest_brief=1 > "$out/$name.log" 2>&1
  rc=$?
  summary+=("$(printf '%-22s rc=%d  %s' "$name" $rc "$(grep -E '^\[  (PASSED|FAILED)' "$out/$name.log" | tr '\n' ' ')")")
done
bench_rc=skipped
if [ -x "$bundle/bin/gemma-bench" ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
  timeout "${BENCH_TIMEOUT:-420}" "$bundle/bin/gemma-bench" --config tests/data/gemma4-31b --random-weights \
    --json "$out/bench.json" "$@" > "$out/bench.log" 2>&1
  bench_rc=$?
fi
echo "==== GPU: $(tail -1 "$out/gpu.txt")"
for s in "${summary[@]}"; do echo "$s"; done
for t in "$out"/gpu_*_test.log; do grep -E '^\[  FAILED|Failure|error' "$t" | head -8; done
echo "==== gemma-bench rc=$bench_rc"
[ -f "$out/bench.log" ] && grep -vE '^\[20' "$out/bench.log" | tail -25
