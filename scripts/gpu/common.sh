# Sourced by scripts/gpu.sh before a subcommand: the set-up every GPU run
# shares and the helpers the subcommands use. Runs ON the GPU machine, from
# the repository root.
#   BUNDLE  binaries in $BUNDLE/bin, their libraries in $BUNDLE/lib
#           (scripts/device_bundle.sh); default .device/bundle
#   OUT     logs and JSON; default gpu-out
bundle=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export GEMMA_TEST_DATA="$PWD/tests/data" GEMMA_MODELS_DIR="$PWD/models"

# The 31B shape with random weights, as gemma-bench and gemma-serve load it.
config_31b=tests/data/gemma4-31b
# The real Gemma 3 tokenizer: its 262 144 ids are the 31B's vocabulary, so
# every id random weights emit detokenizes to text as a real checkpoint's
# would (a small tokenizer decodes most of them as nothing, and the
# detokenizer's look-back over such runs then costs ~30 us a token).
tokenizer_31b=$out/gemma3.tokenizer.json
if [ ! -s "$tokenizer_31b" ]; then
  gzip -dc tests/data/tokenizers/gemma3.tokenizer.json.gz > "$tokenizer_31b.part" && mv "$tokenizer_31b.part" "$tokenizer_31b"
fi

# A fresh autotune cache in $out (the run tunes and keeps its choices there);
# subcommands that do not call it use the caller's (or the default) cache.
autotune_in_out() { export GEMMA_AUTOTUNE_CACHE="$out/${1:-autotune.txt}"; }

gpu_info() {  # writes $out/gpu.txt: name, memory, clocks
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
}
gpu_name() { tail -1 "$out/gpu.txt"; }

# `run NAME TIMEOUT_S COMMAND...` runs one step with its output in
# $out/NAME.log and appends "NAME rc=N Ts" to $out/status.txt (emptied by
# steps_begin).
steps_begin() { : > "$out/status.txt"; }
run() {  # name timeout_s command...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - start))s" >> "$out/status.txt"
}

# gtest's one-line verdicts of a log, on one line.
gtest_verdict() { grep -E '^\[  (PASSED|FAILED)' "$1" | tr '\n' ' '; }

# `wait_serving PORT TRIES INTERVAL_S [PID]`: polls gemma-cli health until
# the server answers SERVING (returns 0), PID exits or TRIES run out.
wait_serving() {
  local port=$1 tries=$2 interval=$3 pid=${4:-}
  for _ in $(seq 1 "$tries"); do
    "$bundle/bin/gemma-cli" --addr 127.0.0.1:"$port" --timeout-s 2 health > /dev/null 2>&1 && return 0
    [[ -n "$pid" ]] && ! kill -0 "$pid" 2> /dev/null && return 1
    sleep "$interval"
  done
  return 1
}
