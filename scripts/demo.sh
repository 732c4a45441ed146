#!/usr/bin/env bash
# Sets up (dependencies + build), starts gemma-serve on the embedded demo
# model (CUDA when a GPU is present, else CPU), streams a generation through
# gemma-cli, then stops the server gracefully (SIGTERM drains).
# Usage: scripts/demo.sh [prompt]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"The quick brown fox"}
port=${GEMMA_DEMO_PORT:-50051}

scripts/setup.sh

log=build/gemma-serve-demo.log
build/bin/gemma-serve --port "$port" --backend auto > "$log" 2>&1 &
server=$!
echo "demo: gemma-serve starting on 127.0.0.1:$port (log: $log)"
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT

for _ in $(seq 1 100); do
  build/bin/gemma-cli --addr "127.0.0.1:$port" health >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "demo: gemma-serve exited early:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.2
done
build/bin/gemma-cli --addr "127.0.0.1:$port" info
echo "--- streaming: $prompt"
build/bin/gemma-cli --addr "127.0.0.1:$port" generate "$prompt" --max-tokens 48 --temperature 0.8 --seed 1 --verbose
