#!/usr/bin/env bash
# Runs ON the GPU machine from the repository root with a bundle holding
# gemma-serve, gemma-cli and gemma-loadgen: serves the 31B shape (random
# weights, CUDA backend, paged KV sized by --gpu-memory-utilization) over gRPC
# and measures it with gemma-loadgen at $IN input / $OUT_LEN output tokens
# (default 1024 / 1024), ignore_eos, at several concurrencies; each level runs
# $WAVES x concurrency requests (default 2; the highest level $WAVES_TOP,
# default 3; concurrency 1: 2 requests) so TTFT is measured past the first,
# synchronized wave. SAMPLED=1 adds a run at the
# highest level with temperature 0.8 (device sampling); WEIGHTS=fp8 serves
# FP8 weights, KV=fp8 an FP8 KV cache (--kv-cache-dtype); PROTOCOL=openai
# drives the OpenAI-compatible HTTP API (streaming /v1/completions on
# --http-port) instead of gRPC. Logs and JSON go to $OUT; a short table comes last.
#   BUNDLE=.device/bundle scripts/gpu_serve_31b.sh [concurrency...]
set -uo pipefail
b=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export GEMMA_AUTOTUNE_CACHE="$out/autotune.txt"
levels=(${@:-1 8 32 64})
in_len=${IN:-1024}
out_len=${OUT_LEN:-1024}
waves=${WAVES:-2}
waves_top=${WAVES_TOP:-3}
port=50152
http_port=8152
protocol=${PROTOCOL:-grpc}
slots=${SLOTS:-64}
"$b/bin/gemma-serve" --model tests/data/gemma4-31b --random-weights \
  --tokenizer models/gemma4-fortunes/tokenizer.model --backend cuda --port $port --http-port $http_port \
  --max-concurrent-sequences $slots --max-context $((in_len + out_len + 64)) --max-tokens-per-step 2048 \
  --gpu-memory-utilization ${GPU_MEM:-0.92} --weights ${WEIGHTS:-bf16} \
  --kv-cache-dtype ${KV:-auto} > "$out/serve31b.log" 2>&1 &
server=$!
for _ in $(seq 1 600); do "$b/bin/gemma-cli" --addr 127.0.0.1:$port health > /dev/null 2>&1 && break; sleep 0.5; done
"$b/bin/gemma-cli" --addr 127.0.0.1:$port generate --ids 2,100,200,300 --greedy --max-tokens 8 --ignore-eos > /dev/null 2>&1
"$b/bin/gemma-cli" --addr 127.0.0.1:$port info > "$out/info.txt" 2>&1
rows=()
runs=()
for c in ${levels[@]}; do runs+=("$c:0"); done
[ "${SAMPLED:-0}" = 1 ] && runs+=("${levels[-1]}:0.8")
for run in "${runs[@]}"; do
  c=${run%%:*}
  temp=${run##*:}
  w=$waves; [ "$c" = "${levels[-1]}" ] && w=$waves_top
  n=$(( c == 1 ? 2 : w * c ))
  tag="c$c"; [ "$temp" != 0 ] && tag="c${c}_t$temp"
  [ "$protocol" != grpc ] && tag="${protocol}_$tag"
  "$b/bin/gemma-loadgen" --protocol "$protocol" --addr 127.0.0.1:$port --http-addr 127.0.0.1:$http_port --concurrency "$c" --num-requests "$n" --warmup-requests 0 \
    --input-len $in_len --output-len $out_len --ignore-eos --temperature "$temp" \
    --json "$out/loadgen_$tag.json" > "$out/loadgen_$tag.txt" 2>&1
  rc=$?
  rows+=("$(python3 - "$out/loadgen_$tag.json" "$tag" "$rc" <<'PY'
import json, sys
path, c, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    j = json.load(open(path))
except Exception as e:
    print(f"{c:>8} rc={rc} no json ({e})"); sys.exit()
def get(*keys):
    v = j
    for k in keys:
        v = v.get(k, {}) if isinstance(v, dict) else {}
    return v if v != {} else float('nan')
print(f"{c:>8} rc={rc} ok={get('completed')} out_tok/s={get('output_token_throughput'):.1f} "
      f"TTFT p50={get('ttft_ms','p50'):.0f}ms TPOT p50={get('tpot_ms','p50'):.2f}ms "
      f"ITL p99={get('itl_ms','p99'):.2f}ms E2E p50={get('e2e_ms','p50'):.0f}ms")
PY
)")
done
kill -TERM $server; wait $server; server_rc=$?
echo "==== $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader); server exit $server_rc"
grep -E "ready|graphs|KV|error" "$out/serve31b.log" | head -6
grep kv_ "$out/info.txt" | tr '\n' ' '; echo
for r in "${rows[@]}"; do echo "$r"; done
