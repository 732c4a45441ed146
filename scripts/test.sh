#!/usr/bin/env bash
# Sets up (dependencies + build) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
cd build
ctest --output-on-failure -j 2 --timeout 900
