#!/usr/bin/env bash
# Soak test: mixed load against a real gemma-serve on loopback for a while,
# then checks answers, RSS and the KV pool (scripts/soak.py does the work).
# Usage: scripts/soak.sh [--minutes N | --seconds N] [--build-dir DIR] [--workers N]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=300
build_dir=build
workers=6
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) seconds=$(( $2 * 60 )); shift ;;
    --seconds) seconds="$2"; shift ;;
    --build-dir) build_dir="$2"; shift ;;
    --workers) workers="$2"; shift ;;
    *) echo "soak.sh: unknown flag '$1' (--minutes N | --seconds N | --build-dir DIR | --workers N)" >&2; exit 2 ;;
  esac
  shift
done
if [ ! -x "$build_dir/bin/gemma-serve" ]; then
  echo "soak.sh: $build_dir/bin/gemma-serve not found (build first, or pass --build-dir)" >&2
  exit 2
fi
# Debian's python3 has python3-grpcio, whatever python3 PATH finds first.
exec /usr/bin/python3 scripts/soak.py --serve "$build_dir/bin/gemma-serve" \
  --duration-s "$seconds" --workers "$workers"
