# Subcommands all, test, bench and integration of scripts/gpu.sh (sourced
# after common.sh).

# Every GPU test binary of the bundle; one summary row each.
cmd_test() {
  autotune_in_out
  gpu_info
  local summary=() t name rc
  for t in "$bundle"/bin/${GPU_TESTS:-gpu_*_test}; do  # GPU_TESTS: a glob to run fewer
    [ -x "$t" ] || continue
    name=$(basename "$t")
    timeout 300 "$t" --gtest_brief=1 > "$out/$name.log" 2>&1
    rc=$?
    summary+=("$(printf '%-22s rc=%d  %s' "$name" $rc "$(gtest_verdict "$out/$name.log")")")
  done
  echo "==== GPU: $(gpu_name)"
  for s in "${summary[@]}"; do echo "$s"; done
  for t in "$out"/gpu_*_test.log; do grep -E '^\[  FAILED|Failure|error' "$t" | head -8; done
}

# gemma-bench on the 31B shape with random weights; extra flags go to it.
cmd_bench() {
  autotune_in_out
  local bench_rc=skipped
  if [ -x "$bundle/bin/gemma-bench" ]; then
    timeout "${BENCH_TIMEOUT:-420}" "$bundle/bin/gemma-bench" --config "$config_31b" --random-weights \
      --json "$out/bench.json" "$@" > "$out/bench.log" 2>&1
    bench_rc=$?
  fi
  echo "==== gemma-bench rc=$bench_rc"
  [ -f "$out/bench.log" ] && grep -vE '^\[20' "$out/bench.log" | tail -25
}

cmd_all() {
  cmd_test
  if [ "${SKIP_BENCH:-0}" != 1 ]; then
    cmd_bench "$@"
  else
    echo "==== gemma-bench rc=skipped"
  fi
}

# The product path on the CUDA backend with the demo model.
cmd_integration() {
  autotune_in_out
  local model=models/gemma4-fortunes port=50151 rows=()
  row() { rows+=("$(printf '%-34s %s' "$1" "$2")"); }

  (cmd_test) > "$out/tests.txt" 2>&1
  while read -r line; do row "$(echo "$line" | awk '{print $1}')" "$(echo "$line" | cut -d' ' -f2-)"; done \
    < <(grep -E '^gpu_.*rc=' "$out/tests.txt")
  timeout 300 "$bundle/bin/attention_test" --gtest_brief=1 > "$out/attention_test.log" 2>&1
  row attention_test "rc=$? $(gtest_verdict "$out/attention_test.log")"

  local golden strict
  golden=$(python3 -c "import json;print(' '.join(map(str,json.load(open('$model/golden.json'))['prompts'][0]['greedy'][:40])))")
  # bf16 may flip a step whose golden margin is below 0.1 (fixtures/README.md):
  # ids must match up to the first such step; report how far they match.
  strict=$(python3 -c "import json;m=json.load(open('$model/golden.json'))['prompts'][0]['margins'][:40];print(next((i for i,x in enumerate(m) if x<0.1),len(m)))")
  compare() {  # compare "ids" -> "N/40 equal (need S)" or DIFFER
    python3 - "$1" "$golden" "$strict" <<'PY'
import sys
got, want, strict = sys.argv[1].split(), sys.argv[2].split(), int(sys.argv[3])
n = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
print(f"{n}/{len(want)} ids equal, {strict} required: {'ok' if n >= strict else 'DIFFER'}")
PY
  }
  local gen ids server client client_rc server_rc
  gen=$("$bundle/bin/gemma-generate" --backend cuda --model $model --prompt "The quick brown fox" --max-tokens 40 \
    --greedy --print-ids 2> "$out/generate.err")
  row "gemma-generate cuda vs golden" "$(compare "$gen")"

  "$bundle/bin/gemma-serve" --model $model --backend cuda --port $port --max-concurrent-sequences 16 \
    > "$out/serve.log" 2>&1 &
  server=$!
  wait_serving $port 150 0.2 $server
  "$bundle/bin/gemma-cli" --addr 127.0.0.1:$port info > "$out/info.txt" 2>&1
  row "server info backend" "$(grep -i backend "$out/info.txt" | head -1)"
  ids=$("$bundle/bin/gemma-cli" --addr 127.0.0.1:$port generate "The quick brown fox" --greedy --max-tokens 40 \
    --ignore-eos --print-ids 2>&1 | grep '^ids:' | cut -d' ' -f2-)
  row "server greedy vs golden" "$(compare "$ids")"
  "$bundle/bin/gemma-loadgen" --addr 127.0.0.1:$port --concurrency 16 --num-requests 128 --input-len 128 \
    --output-len 128 --ignore-eos --json "$out/loadgen.json" > "$out/loadgen.txt" 2>&1
  row "loadgen c16 x128 (128/128)" \
    "rc=$? $(grep -E 'Successful|Output token throughput' "$out/loadgen.txt" | tr -s ' ' | tr '\n' ';')"
  "$bundle/bin/gemma-cli" --addr 127.0.0.1:$port generate "Love is" --max-tokens 400 --ignore-eos > /dev/null 2>&1 &
  client=$!
  sleep 0.3
  kill -TERM $server
  wait $client; client_rc=$?
  wait $server; server_rc=$?
  row "drain (SIGTERM mid-stream)" "client rc=$client_rc server rc=$server_rc"

  echo "==== $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader)"
  for r in "${rows[@]}"; do echo "$r"; done
}
