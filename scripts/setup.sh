#!/usr/bin/env bash
# Installs every build/test dependency from Debian 12's packages (when run as
# root with apt-get) and builds the project into build/.
# Usage: scripts/setup.sh [--no-install] [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --jobs) jobs="$2"; shift ;;
    *) echo "setup.sh: unknown flag '$1'" >&2; exit 2 ;;
  esac
  shift
done

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libsentencepiece-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-grpcio python3-grpc-tools python3-protobuf python3-prometheus-client
  clang libclang-rt-14-dev openssl
  zlib1g-dev  # tokenizer tests and gemma-tokenizer-bench read gzipped tokenizer.json
  python3-jinja2  # chat-template tests render their reference with Debian's /usr/bin/python3
  libboost-dev  # the OpenAI-compatible front (Boost.Beast/Asio)
  python3-yaml python3-jsonschema  # tests/docker/k8s_manifests_test.py validates docker/k8s
)

if [ "$install" = 1 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# nvcc lives outside PATH on the usual CUDA install.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

# The official openai SDK for tests/server/http/openai_sdk_test.cjs (not
# committed). Before configuring: the test is registered when it is there.
if command -v npm >/dev/null && [ ! -d build/npm/node_modules/openai ]; then
  npm install --silent --prefix build/npm openai || echo "setup: npm install openai failed; the SDK test is skipped"
fi
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths inside the checkout are hashed relative to it, so a clone in another
# folder (CI's) reuses what an earlier build compiled.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
cmake --preset release >/dev/null
cmake --build build -j "$jobs"
echo "setup: built into build/ (binaries in build/bin)"
