# Subcommands serve and long-context of scripts/gpu.sh (sourced after
# common.sh): gemma-serve on the 31B shape (random weights, CUDA backend,
# paged KV sized by --gpu-memory-utilization), measured by gemma-loadgen.

# `serve [concurrency...]`: $IN input / $OUT_LEN output tokens (default
# 1024 / 1024), ignore_eos, at each concurrency (default 1 8 32 64); each
# level runs $WAVES x concurrency requests (default 2; the highest level
# $WAVES_TOP, default 3; concurrency 1: 2 requests) so TTFT is measured past
# the first, synchronized wave. SAMPLED=1 adds a run at the highest level
# with temperature 0.8 (device sampling); WEIGHTS=fp8 serves FP8 weights,
# KV=fp8 an FP8 KV cache (--kv-cache-dtype); PROTOCOL=openai drives the
# OpenAI-compatible HTTP API (streaming /v1/completions on --http-port)
# instead of gRPC; SLOTS (default 64), GPU_MEM (default 0.92) and
# STEP_TOKENS (--max-tokens-per-step, default 2048; auto: the server's default) size the server; TP=2
# or 4 serves with --tensor-parallel-size (one GPU per rank).
cmd_serve() {
  autotune_in_out
  local levels=(${@:-1 8 32 64})
  local in_len=${IN:-1024} out_len=${OUT_LEN:-1024} waves=${WAVES:-2} waves_top=${WAVES_TOP:-3}
  local port=50152 http_port=8152 protocol=${PROTOCOL:-grpc}
  local step_tokens=${STEP_TOKENS:-2048}
  [ "$step_tokens" = auto ] && step_tokens=0  # the server's own default (DefaultMaxTokensPerStep)
  "$bundle/bin/gemma-serve" --model "$config_31b" --random-weights \
    --tokenizer "$tokenizer_31b" --backend cuda --port $port --http-port $http_port \
    --max-concurrent-sequences ${SLOTS:-64} --max-context $((in_len + out_len + 64)) \
    --max-tokens-per-step $step_tokens \
    --gpu-memory-utilization ${GPU_MEM:-0.92} --weights ${WEIGHTS:-bf16} ${TP:+--tensor-parallel-size $TP} \
    --kv-cache-dtype ${KV:-auto} > "$out/serve31b.log" 2>&1 &
  local server=$!
  wait_serving $port 600 0.5 $server
  "$bundle/bin/gemma-cli" --addr 127.0.0.1:$port generate --ids 2,100,200,300 --greedy --max-tokens 8 --ignore-eos \
    > /dev/null 2>&1
  "$bundle/bin/gemma-cli" --addr 127.0.0.1:$port info > "$out/info.txt" 2>&1
  local rows=() runs=() c temp w n tag rc
  for c in "${levels[@]}"; do runs+=("$c:0"); done
  [ "${SAMPLED:-0}" = 1 ] && runs+=("${levels[-1]}:0.8")
  for r in "${runs[@]}"; do
    c=${r%%:*}
    temp=${r##*:}
    w=$waves; [ "$c" = "${levels[-1]}" ] && w=$waves_top
    n=$(( c == 1 ? 2 : w * c ))
    tag="c$c"; [ "$temp" != 0 ] && tag="c${c}_t$temp"
    [ "$protocol" != grpc ] && tag="${protocol}_$tag"
    "$bundle/bin/gemma-loadgen" --protocol "$protocol" --addr 127.0.0.1:$port --http-addr 127.0.0.1:$http_port \
      --concurrency "$c" --num-requests "$n" --warmup-requests 0 \
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
  kill -TERM $server; wait $server; local server_rc=$?
  echo "==== $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader); server exit $server_rc"
  grep -E "ready|graphs|KV|error|step time|max tokens per step" "$out/serve31b.log" | head -9
  grep kv_ "$out/info.txt" | tr '\n' ' '; echo
  for r in "${rows[@]}"; do echo "$r"; done
}

# `long-context`: time to first token of one long prompt, as a new user sends
# it: concurrency 1, 64 output tokens, random ids. For each weights:kv pair
# of $CONFIGS (default "bf16:auto fp8:fp8") a server is started with
# --max-context $MAX_CONTEXT (default 131328) and every length of $LENGTHS
# (default "16000 32000 64000 100000 120000") is sent once, each within
# $REQUEST_TIMEOUT seconds (default 200), seeded by its length: prompts that
# share a prefix would be served from the prefix cache.
cmd_long_context() {
  autotune_in_out
  local configs=(${CONFIGS:-bf16:auto fp8:fp8})
  local lengths=(${LENGTHS:-16000 32000 64000 100000 120000})
  local max_context=${MAX_CONTEXT:-131328} port=50153 rows=()
  local cfg weights kv log start server startup cap len json rc
  for cfg in "${configs[@]}"; do
    weights=${cfg%%:*}
    kv=${cfg##*:}
    log="$out/serve_${weights}_${kv}.log"
    start=$(date +%s.%N)
    "$bundle/bin/gemma-serve" --model "$config_31b" --random-weights \
      --tokenizer "$tokenizer_31b" --backend cuda --port $port \
      --http-port -1 --metrics-port -1 \
      --max-concurrent-sequences ${SLOTS:-64} --max-context "$max_context" --max-tokens-per-step 2048 \
      --gpu-memory-utilization ${GPU_MEM:-0.92} --weights "$weights" --kv-cache-dtype "$kv" > "$log" 2>&1 &
    server=$!
    if ! wait_serving $port 600 0.5 $server; then
      startup=$(python3 -c "import time;print(f'{time.time()-$start:.0f}')")
      rows+=("$(printf '%-10s %-6s server did not start (%s s): %s' "$weights" "$kv" "$startup" \
        "$(tail -2 "$log" | tr '\n' ' ')")")
      kill -9 $server 2> /dev/null; wait $server 2> /dev/null; continue
    fi
    startup=$(python3 -c "import time;print(f'{time.time()-$start:.0f}')")
    "$bundle/bin/gemma-cli" --addr 127.0.0.1:$port info > "$out/info_${weights}_${kv}.txt" 2>&1
    cap=$(grep -E "kv_token_capacity" "$out/info_${weights}_${kv}.txt" | tr -s ' ' | cut -d' ' -f2-)
    for len in "${lengths[@]}"; do
      json="$out/ttft_${weights}_${kv}_${len}.json"
      timeout ${REQUEST_TIMEOUT:-200} "$bundle/bin/gemma-loadgen" --addr 127.0.0.1:$port --concurrency 1 \
        --num-requests 1 --warmup-requests 0 --input-len "$len" --output-len 64 --ignore-eos --seed "$len" \
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
}
