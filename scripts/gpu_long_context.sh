#!/usr/bin/env bash
# Runs ON the GPU machine from the repository root with a bundle holding
# gemma-serve, gemma-cli and gemma-loadgen: time to first token of one long
# prompt through the server (31B shape, random weights), as a new user sends
# it: concurrency 1, 64 output tokens, random ids. For each weights:kv pair of
# $CONFIGS (default "bf16:auto fp8:fp8") a server is started with
# --max-context $MAX_CONTEXT (default 131328) and every length of $LENGTHS
# (default "16000 32000 64000 100000 120000") is sent once. Logs to $OUT; a
# table comes last.
#   BUNDLE=.device/bundle CONFIGS="bf16:auto" LENGTHS="120000" scripts/gpu_long_context.sh
set -uo pipefail
b=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export GEMMA_AUTOTUNE_CACHE="$out/autotune.txt"
configs=(${CONFIGS:-bf16:auto fp8:fp8})
lengths=(${LENGTHS:-16000 32000 64000 100000 120000})
max_context=${MAX_CONTEXT:-131328}
port=50153
rows=()
for cfg in "${configs[@]}"; do
  weights=${cfg%%:*}
  kv=${cfg##*:}
  log="$out/serve_${weights}_${kv}.log"
  start=$(date +%s.%N)
  "$b/bin/gemma-serve" --model tests/data/gemma4-31b --random-weights \
    --tokenizer models/gemma4-fortunes/tokenizer.model --backend cuda --port $port \
    --http-port -1 --metrics-port -1 \
    --max-concurrent-sequences ${SLOTS:-64} --max-context "$max_context" --max-tokens-per-step 2048 \
    --gpu-memory-utilization ${GPU_MEM:-0.92} --weights "$weights" --kv-cache-dtype "$kv" > "$log" 2>&1 &
  server=$!
  ready=no
  for _ in $(seq 1 600); do
    "$b/bin/gemma-cli" --addr 127.0.0.1:$port health > /dev/null 2>&1 && { ready=yes; break; }
    kill -0 $server 2> /dev/null || break
    sleep 0.5
  done
  startup=$(python3 -c "import time;print(f'{time.time()-$start:.0f}')")
  if [ $ready != yes ]; then
    rows+=("$(printf '%-10s %-6s server did not start (%s s): %s' "$weights" "$kv" "$startup" "$(tail -2 "$log" | tr '\n' ' ')")")
    kill -9 $server 2> /dev/null; wait $server 2> /dev/null; continue
  fi
  "$b/bin/gemma-cli" --addr 127.0.0.1:$port info > "$out/info_${weights}_${kv}.txt" 2>&1
  cap=$(grep -E "kv_token_capacity" "$out/info_${weights}_${kv}.txt" | tr -s ' ' | cut -d' ' -f2-)
  for len in "${lengths[@]}"; do
    json="$out/ttft_${weights}_${kv}_${len}.json"
    timeout ${REQUEST_TIMEOUT:-200} "$b/bin/gemma-loadgen" --addr 127.0.0.1:$port --concurrency 1 \
      --num-requests 1 --warmup-requests 0 --input-len "$len" --output-len 64 --ignore-eos \
      --timeout-s ${REQUEST_TIMEOUT:-200} --json "$json" > "$out/ttft_${weights}_${kv}_${len}.txt" 2>&1
    rc=$?
    rows+=("$(python3 - "$json" "$weights" "$kv" "$len" "$rc" "$startup" "$cap" <<'PY'
import json, sys
path, w, kv, n, rc, startup, cap = sys.argv[1:8]
try:
    j = json.load(open(path))
    ttft = j.get("ttft_ms", {}).get("p50", float("nan")) / 1000
    ok = j.get("completed")
    print(f"{w:<6} {kv:<5} {int(n):>7} TTFT {ttft:7.2f} s  completed={ok} rc={rc}  (start-up {startup} s, KV {cap} tokens)")
except Exception as e:
    print(f"{w:<6} {kv:<5} {int(n):>7} no result rc={rc} ({e})")
PY
)")
  done
  kill -TERM $server; wait $server
done
echo "==== long-context TTFT through gemma-serve ($(nvidia-smi --query-gpu=name --format=csv,noheader))"
for r in "${rows[@]}"; do echo "$r"; done
