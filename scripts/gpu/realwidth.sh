# Subcommand realwidth of scripts/gpu.sh (sourced after common.sh): the
# Gemma 4 31B at its real width, end to end. Bundle: gpu_realwidth_test,
# gemma-generate, gemma-serve, gemma-cli.
#   1. scripts/realwidth/make_checkpoint.py: a RW_LAYERS-layer (default 6:
#      five sliding + one global) random checkpoint of the 31B's widths in
#      $RW_DIR (default /tmp/realwidth), and transformers' fp32 reference for
#      3 prompts (100, 1100, 3000 tokens) + 16 greedy steps.
#   2. gpu_realwidth_test: CUDA backend logits vs the reference (bf16, fp8,
#      and bf16 with the served embedding scale).
#   3. gemma-generate (bf16, fp8) and gemma-serve + gemma-cli generate: greedy
#      ids vs the reference; gemma-serve's time to health SERVING, split as
#      its start-up log reports it.
#   RW_LAYERS / RW_TYPES (e.g. "G" or "S,G") choose the layers, RW_SKIP_GTEST=1
#   skips step 2 and RW_SKIP_SERVE=1 step 3.
#   4. (RW_BIG_LAYERS > 0 and less than RW_BIG_BEFORE_S, default 260 s, gone)
#      a RW_BIG_LAYERS-layer checkpoint of the same widths (36: 38 GB, 48:
#      50 GB): the disk's sequential read rate and gemma-serve's time to
#      SERVING, bf16 and fp8 (each started before RW_BIG_SERVE_BEFORE_S,
#      default 480 s).
# Logs go to $OUT (at most 8 files; rows.txt grows as steps finish); a short
# table comes last.

row() {  # also written at once, so a run cut short still reports
  rows+=("$(printf '%-36s %s' "$1" "$2")")
  echo "${rows[-1]}" >> "$out/rows.txt"
}
elapsed() { echo $(( $(date +%s) - t0 )); }
now() { date +%s.%N; }
note() { echo "== [$(elapsed) s] $*"; }

# Starts gemma-serve with the given flags, waits for health SERVING; sets
# server, ready_at (epoch) and start_at. $1: log file, rest: extra flags.
start_server() {
  local log=$1
  shift
  start_at=$(now)
  "$bundle/bin/gemma-serve" --backend cuda --port $port --log-level info "$@" > "$log" 2>&1 &
  server=$!
  ready_at=""
  wait_serving $port 1500 0.2 "$server" && ready_at=$(now)
}
stop_server() {
  [ -n "$server" ] || return 0
  kill -TERM "$server" 2> /dev/null
  wait "$server" 2> /dev/null
  server=""
}
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }

cmd_realwidth() {
  rm -f "$out/rows.txt"
  export GEMMA_AUTOTUNE_CACHE=/tmp/rw-autotune.txt
  export PYTHONUNBUFFERED=1
  rw=${RW_DIR:-/tmp/realwidth}
  big=/tmp/realwidth-big
  tool="python3 scripts/realwidth/golden_tool.py"
  port=50171
  t0=$(date +%s)
  server="" start_at="" ready_at=""
  rows=()

  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/summary.txt" 2>&1
  df -h /tmp >> "$out/summary.txt" 2>&1

  # ---- 1. checkpoint + transformers reference --------------------------------
  {
    note "make_checkpoint: ${RW_LAYERS:-6} layers"
    timeout 420 python3 scripts/realwidth/make_checkpoint.py --out "$rw" --layers "${RW_LAYERS:-6}" \
      ${RW_TYPES:+--layer-types "$RW_TYPES"}
    echo "rc=$?"
  } > "$out/reference.log" 2>&1
  ref_rc=$(grep -oE '^rc=[0-9]+' "$out/reference.log" | tail -1)
  row "checkpoint + fp32 reference" "$ref_rc $(grep -oE 'golden.safetensors [0-9.]+ GB' "$out/reference.log") ($(elapsed) s)"
  while read -r line; do row "  reference $(echo "$line" | cut -d' ' -f1-2)" "$(echo "$line" | cut -d' ' -f3-)"; done \
    < <(grep -oE 'prompt [0-9]: [0-9]+ tokens.*min margin [0-9.]+' "$out/reference.log" | sed 's/, [0-9]* prefill rows, greedy \[[^]]*\]//')

  if [ -f "$rw/golden.json" ]; then
    # ---- 2. the gtest -----------------------------------------------------------
    if [ "${RW_SKIP_GTEST:-0}" != 1 ]; then
      GEMMA_REALWIDTH_DIR="$rw" timeout 420 "$bundle/bin/gpu_realwidth_test" --gtest_brief=0 > "$out/gtest.log" 2>&1
      row "gpu_realwidth_test" "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/gtest.log" | tr '\n' ' ') ($(elapsed) s)"
      while read -r line; do row "  $(echo "$line" | cut -d: -f1 | sed 's/^realwidth //')" "$(echo "$line" | cut -d: -f2-)"; done \
        < <(grep -E '^realwidth ' "$out/gtest.log")
    fi

    # ---- 3. gemma-generate, gemma-serve ----------------------------------------
    n=$($tool count "$rw")
    [ "${RW_SKIP_SERVE:-0}" = 1 ] && n=0
    {
      for w in bf16 fp8; do
        [ "$n" -gt 0 ] || break
        prompts=$(seq 0 $((n - 1)))
        [ $w = fp8 ] && prompts=$((n - 1))  # fp8: the long prompt only
        for i in $prompts; do
          got=$(timeout 300 "$bundle/bin/gemma-generate" --backend cuda --model "$rw" --weights $w --max-context 4096 \
            --prompt-ids "$($tool ids "$rw" "$i")" --max-tokens 16 --greedy --print-ids 2> /tmp/rw-gen.err)
          echo "gemma-generate $w prompt $i: $got"
          tail -3 /tmp/rw-gen.err
          floor=0.1
          [ $w = fp8 ] && floor=1.0
          row "gemma-generate $w prompt $i" "$($tool compare "$rw" "$i" "$got" $floor)"
        done
      done
    } > "$out/generate.log" 2>&1
    [ "$n" -gt 0 ] && start_server "$out/serve.log" --model "$rw" --max-context 4096 --max-concurrent-sequences 4
    if [ "$n" -gt 0 ] && [ -z "$ready_at" ] && grep -qi tokenizer "$out/serve.log"; then
      mv "$out/serve.log" "$out/serve-first.log"
      start_server "$out/serve.log" --model "$rw" --max-context 4096 --max-concurrent-sequences 4 \
        --tokenizer models/gemma4-fortunes
    fi
    if [ "$n" -eq 0 ]; then
      :
    elif [ -n "$ready_at" ]; then
      row "gemma-serve time to SERVING" "$(secs "$start_at" "$ready_at") s (bf16, checkpoint in page cache)"
      for i in $(seq 0 $((n - 1))); do
        got=$(timeout 120 "$bundle/bin/gemma-cli" --addr 127.0.0.1:$port --timeout-s 100 generate --greedy \
          --max-tokens 16 --ignore-eos --print-ids --ids $($tool ids "$rw" "$i" ' ') 2>> "$out/generate.log" |
          grep '^ids:' | cut -d: -f2-)
        echo "server Generate prompt $i: $got" >> "$out/generate.log"
        row "server Generate prompt $i" "$($tool compare "$rw" "$i" "$got" 0.1)"
      done
      stop_server
      { echo "start-up of gemma-serve (6 layers, bf16):"; $tool startup "$out/serve.log" "$start_at" "$ready_at"; } \
        >> "$out/summary.txt"
    else
      row "gemma-serve" "did not reach SERVING: $(grep -iE 'error|fail' "$out/serve.log" | head -2 | tr '\n' ' ')"
      stop_server
    fi
  fi

  # ---- 4. the big checkpoint: read rate and time to SERVING --------------------
  big_layers=${RW_BIG_LAYERS:-0}
  if [ "$big_layers" -gt 0 ] && [ "$(elapsed)" -lt "${RW_BIG_BEFORE_S:-260}" ]; then
    rm -rf "$rw"
    {
      note "make_checkpoint: $big_layers layers, no reference"
      timeout 300 python3 scripts/realwidth/make_checkpoint.py --out "$big" --layers "$big_layers" --no-reference \
        --build-bf16 --max-shard-size 5GB
      echo "rc=$?"
      du -sh "$big"
      df -h /tmp
      sync
      dropped=no
      echo 3 > /proc/sys/vm/drop_caches 2> /dev/null && dropped=yes
      shard=$(ls -S "$big"/*.safetensors | head -1)
      note "dd $shard (page cache dropped: $dropped)"
      dd if="$shard" of=/dev/null bs=16M 2>&1 | tail -1
      note "dd again (cached)"
      dd if="$shard" of=/dev/null bs=16M 2>&1 | tail -1
      echo 3 > /proc/sys/vm/drop_caches 2> /dev/null
    } > "$out/big.log" 2>&1
    row "big checkpoint ($big_layers layers)" "$(grep -oE '^rc=[0-9]+' "$out/big.log") $(du -sh "$big" | cut -f1) ($(elapsed) s)"
    row "  disk read (dd, one shard)" "$(grep -E 'copied' "$out/big.log" | sed -E 's/.*copied, //' | tr '\n' ';') cache drop: $(grep -oE 'dropped: (yes|no)' "$out/big.log")"
    if [ -f "$big/config.json" ]; then
      for w in bf16 fp8; do
        [ "$(elapsed)" -lt "${RW_BIG_SERVE_BEFORE_S:-480}" ] || break
        echo 3 > /proc/sys/vm/drop_caches 2> /dev/null
        start_server /tmp/rw-big-serve.log --model "$big" --weights $w --max-context 8192 \
          --max-concurrent-sequences 8
        { echo "start-up of gemma-serve ($big_layers layers, $w):"
          $tool startup /tmp/rw-big-serve.log "$start_at" $ready_at
          [ -n "$ready_at" ] || echo "  (no SERVING)"; } >> "$out/summary.txt"
        cat /tmp/rw-big-serve.log >> "$out/big.log"
        row "  gemma-serve $w to SERVING" "$([ -n "$ready_at" ] && secs "$start_at" "$ready_at" || echo FAILED) s"
        stop_server
      done
    fi
  fi

  grep -E '^(  |== |prompt|[0-9] )' "$out/gtest.log" 2> /dev/null | head -60
  cat "$out/summary.txt"
  echo "==== real width, $(elapsed) s in all"
  for r in "${rows[@]}"; do echo "$r"; done
}
