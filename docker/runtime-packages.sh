#!/bin/sh
# Prints, one a line, the Debian/Ubuntu packages that own the shared libraries
# the given executables load (from ldd), so that the runtime stage installs
# exactly what the build stage linked against, on Debian 12 or Ubuntu 24.04
# alike. The NVIDIA driver's libraries (libcuda, libnvidia-*) are skipped: the
# NVIDIA container toolkit mounts them into the container at run time. CUDA
# libraries that no package owns (a toolkit installed from a runfile) are left
# to the runtime base image (nvidia/cuda:*-runtime brings cudart and cuBLAS).
# Fails, naming the library, when a library is missing or owned by no package.
# Usage: runtime-packages.sh EXECUTABLE...
set -eu

# dpkg -S knows a file under the path its package lists; with merged /usr that
# may be /lib/... or /usr/lib/..., and the soname link or the file it names.
owner() {
  for path in "$1" "$(readlink -f "$1")"; do
    case "$path" in
      /usr/lib/*) alt="/lib/${path#/usr/lib/}" ;;
      /lib/*) alt="/usr${path}" ;;
      *) alt="$path" ;;
    esac
    for candidate in "$path" "$alt"; do
      found=$(dpkg -S "$candidate" 2>/dev/null | grep -v '^diversion' | head -n 1 | cut -d: -f1)
      if [ -n "$found" ]; then
        echo "$found"
        return 0
      fi
    done
  done
  return 1
}

list=$(mktemp)
trap 'rm -f "$list"' EXIT
ldd "$@" | awk '$2 == "=>" { print $1, $3 }' | sort -u > "$list"
packages=""
while read -r soname path; do
  case "$soname" in
    libcuda.so*|libnvidia-*) continue ;;
  esac
  if [ "$path" = "not" ]; then
    echo "runtime-packages: $soname is not found" >&2
    exit 1
  fi
  if ! package=$(owner "$path"); then
    case "$(readlink -f "$path")" in
      /usr/local/cuda*)
        echo "runtime-packages: $path (CUDA toolkit, no package): the runtime base must bring it" >&2
        continue ;;
    esac
    echo "runtime-packages: $path belongs to no package" >&2
    exit 1
  fi
  packages="$packages $package"
done < "$list"
# shellcheck disable=SC2086 # one package a word
printf '%s\n' $packages | sort -u
