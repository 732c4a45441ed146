#!/usr/bin/env bash
# Collects binaries plus the non-system shared libraries they need into one
# folder to carry to the GPU machine (Ubuntu 24.04, CUDA 13.0, driver 580).
# Skipped: glibc, libstdc++/libgcc (newer there), the driver and the CUDA
# toolkit libraries (present there). Usage:
#   scripts/device_bundle.sh OUT_DIR BINARY...
#   scripts/device_bundle.sh .device/bundle $(scripts/gpu.sh binaries SUBCOMMAND)
# Also copies the runner (scripts/gpu.sh and scripts/gpu/), so a bundle runs
# on its own too. Keep OUT_DIR under 64 MiB and git-ignored (.git/info/exclude
# lists /.device/).
set -euo pipefail
out=${1:?usage: device_bundle.sh OUT_DIR BINARY...}
shift
mkdir -p "$out/bin" "$out/lib"
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcublasLt|libnvJitLink|libnvrtc)'
for bin in "$@"; do
  cp -f "$bin" "$out/bin/"
  ldd "$bin" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    if [[ "$name" =~ $skip ]]; then continue; fi
    cp -fL "$path" "$out/lib/$name"
  done
done
cp -f "$(dirname "$0")/gpu.sh" "$out/"
mkdir -p "$out/gpu"
cp -f "$(dirname "$0")"/gpu/*.sh "$out/gpu/"
du -sh "$out"
