#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root: the attention tests, then
# attention-bench --configs (every compiled prefill configuration, D=512 global
# and D=256 sliding, at 8K/32K/128K, and a D=512 2048-token chunk at depth
# 126976 as gemma-bench runs it). About 1.5-2 minutes. Logs go to $OUT (or
# ./gpu-out); a short table comes last.
#   BUNDLE=.device/bundle scripts/gpu_attn.sh [token counts, e.g. 8192,32768,131072]
# Bundle: scripts/device_bundle.sh .device/bundle build/bin/{attention_test,attention-bench}
set -uo pipefail
bundle=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export GEMMA_AUTOTUNE_CACHE="$out/autotune.txt"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
timeout 120 "$bundle/bin/attention_test" --gtest_brief=1 > "$out/attention_test.log" 2>&1
test_rc=$?
timeout 150 "$bundle/bin/attention-bench" --configs "${1:-8192,32768,131072}" > "$out/attention_bench.log" 2>&1
bench_rc=$?
echo "==== GPU: $(tail -1 "$out/gpu.txt")"
echo "==== attention_test rc=$test_rc  $(grep -E '^\[  (PASSED|FAILED)' "$out/attention_test.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|config |rel_error|Which is' "$out/attention_test.log" | head -20
echo "==== attention-bench --configs rc=$bench_rc (vs default: >1 is faster; D256: default and best only)"
awk 'NR == 1 || /^global/ { print; next }
     /^sliding/ { key = $4; if (!(key in best) || $7 + 0 > bestv[key]) { best[key] = $0; bestv[key] = $7 + 0 }
                  if ($0 ~ /1\.000x$/ && !(key in dflt)) dflt[key] = $0; order[key] = NR }
     !/^(global|sliding)/ && NR > 1 { print }
     END { for (k in order) { print dflt[k]; if (best[k] != dflt[k]) print best[k] } }' "$out/attention_bench.log"
