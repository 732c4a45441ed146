#!/usr/bin/env bash
# Builds the gemma-serve image with podman on this machine (no Docker engine,
# no image registry) and tests it from outside the container:
#   1. a Debian 12 base made with debootstrap (cached), imported by podman import;
#   2. podman build --isolation chroot of docker/Dockerfile FROM that base, CPU
#      backend only (GEMMA_ENABLE_CUDA=OFF);
#   3. the server started from the image with its own ENTRYPOINT and CMD
#      (podman run, runc), in a network namespace of this script's own so that
#      the image's fixed port 50051 meets no other server on the machine;
#   4. the host's build/bin/gemma-cli, run in that namespace, checks health (and
#      the image's HEALTHCHECK), info, a greedy generation against the demo
#      model's golden ids, then `podman stop` (the image's STOPSIGNAL, SIGTERM)
#      with a stream in flight: the stream completes and the server exits 0.
# Too slow for CI: it compiles the server inside the image. Run as root.
#
# Usage: docker/build_and_test.sh [--worktree] [--skip-build] [--rebuild-base]
#   --worktree      build from the working tree (default: a clean export of HEAD)
#   --skip-build    test the image built last time
#   --rebuild-base  run debootstrap again even when its tarball is cached
# Environment: GEMMA_CONTAINER_CACHE (/var/tmp/gemma-serve-container),
#   DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR, PODMAN_RUNTIME (runc), BUILD_JOBS (2)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${GEMMA_CONTAINER_CACHE:-/var/tmp/gemma-serve-container}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# crun 1.8 refuses this machine's hybrid cgroup hierarchy; runc takes it.
runtime=${PODMAN_RUNTIME:-runc}
jobs=${BUILD_JOBS:-2}
base_image=localhost/gemma-serve-base:bookworm
image=localhost/gemma-serve:cpu-test
name=gemma-serve-test-$$
netns=gemma-serve-test-$$
cli=$repo/build/bin/gemma-cli

from_worktree=0
skip_build=0
rebuild_base=0
while [ $# -gt 0 ]; do
  case "$1" in
    --worktree) from_worktree=1 ;;
    --skip-build) skip_build=1 ;;
    --rebuild-base) rebuild_base=1 ;;
    *) echo "build_and_test.sh: unknown flag '$1'" >&2; exit 2 ;;
  esac
  shift
done

start_s=$(date +%s)
step() { echo "== [$(( $(date +%s) - start_s ))s] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (debootstrap, podman import/build/run, ip netns)"
mkdir -p "$cache"
logs=$(mktemp -d /tmp/gemma-serve-container-test.XXXXXX)
context=""

cleanup() {
  podman rm -f -v "$name" >/dev/null 2>&1 || true
  ip netns del "$netns" >/dev/null 2>&1 || true
  [ -z "$context" ] || rm -rf "$context"
}
trap cleanup EXIT

# --- tools -------------------------------------------------------------------
missing=()
for p in podman buildah debootstrap runc iproute2 git python3; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- 1. the Debian 12 base -------------------------------------------------------
base_tar=$cache/debian-bookworm-minbase.tar
if [ "$rebuild_base" = 1 ] || [ ! -f "$base_tar" ]; then
  step "debootstrap bookworm (minbase) from $mirror"
  rootfs=$cache/rootfs
  rm -rf "$rootfs"
  nice -n 10 debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$logs/debootstrap.log" 2>&1 ||
    { tail -20 "$logs/debootstrap.log"; fail "debootstrap"; }
  cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security_mirror bookworm-security main
EOF
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" .
  mv "$base_tar.tmp" "$base_tar"
  rm -rf "$rootfs"
  podman rmi -f "$base_image" >/dev/null 2>&1 || true
fi
if ! podman image exists "$base_image"; then
  step "podman import $base_tar as $base_image"
  podman import --quiet --change 'CMD ["/bin/bash"]' "$base_tar" "$base_image" >/dev/null
fi

# --- 2. the image --------------------------------------------------------------
if [ "$skip_build" = 0 ]; then
  if [ "$from_worktree" = 1 ]; then
    context=""
    build_dir=$repo
  else
    context=$(mktemp -d /tmp/gemma-serve-context.XXXXXX)
    git -C "$repo" archive --format=tar HEAD | tar -x -C "$context"
    build_dir=$context
    step "context: HEAD $(git -C "$repo" rev-parse --short HEAD)"
  fi
  step "podman build --isolation chroot (CPU backend, -j$jobs); log in $logs/build.log"
  build_start_s=$(date +%s)
  if ! nice -n 10 podman build --isolation chroot --format docker \
      -f "$build_dir/docker/Dockerfile" \
      --build-arg BUILD_BASE="$base_image" --build-arg RUNTIME_BASE="$base_image" \
      --build-arg GEMMA_ENABLE_CUDA=OFF --build-arg BUILD_JOBS="$jobs" \
      -t "$image" "$build_dir" > "$logs/build.log" 2>&1; then
    tail -40 "$logs/build.log"
    fail "podman build"
  fi
  grep -E '^runtime packages:' "$logs/build.log" || true
  step "image built in $(( $(date +%s) - build_start_s ))s"
fi
podman image exists "$image" || fail "no image $image (run without --skip-build)"
step "image: $(podman image inspect --format '{{.Id}} {{.Size}}' "$image" | cut -c1-12,65-) bytes"

# The image's contract: non-root user, exec-form entrypoint, SIGTERM, port,
# model volume, healthcheck through gemma-cli.
podman image inspect "$image" > "$logs/inspect.json"
python3 - "$logs/inspect.json" <<'EOF' || fail "image configuration"
import json, sys
image = json.load(open(sys.argv[1]))[0]
config = image["Config"]
health = image.get("Healthcheck") or config.get("Healthcheck") or {}
checks = {
    "user gemma": config.get("User") == "gemma",
    "exec-form entrypoint": config.get("Entrypoint") == ["/opt/gemma-serve/bin/gemma-serve"],
    "STOPSIGNAL SIGTERM": config.get("StopSignal") == "SIGTERM",
    "EXPOSE 50051": "50051/tcp" in (config.get("ExposedPorts") or {}),
    "VOLUME /models": "/models" in (config.get("Volumes") or {}),
    "HEALTHCHECK gemma-cli health": "gemma-cli" in " ".join(health.get("Test", []))
                                    and "health" in health.get("Test", []),
}
for what, ok in checks.items():
    print(f"   {'ok  ' if ok else 'BAD '} {what}")
sys.exit(0 if all(checks.values()) else 1)
EOF

# --- 3. the server in the image -------------------------------------------------
if [ ! -x "$cli" ]; then
  step "building build/bin/gemma-cli on the host"
  (cd "$repo" && { [ -f build/build.ninja ] || cmake --preset release >/dev/null; } &&
    nice cmake --build build --target gemma-cli -j "$jobs" >/dev/null)
fi
ip netns add "$netns"
ip -n "$netns" link set lo up
in_ns() { ip netns exec "$netns" "$@"; }
gemma_cli() { in_ns "$cli" --addr 127.0.0.1:50051 --timeout-s 120 "$@"; }

step "podman run $image (its ENTRYPOINT and CMD) in network namespace $netns"
# This machine's root lacks CAP_SYS_RESOURCE: ask for limits it already has,
# not podman's raised defaults. With no systemd here podman cannot time the
# HEALTHCHECK (it says so in podman.err): it is run below by hand.
podman_run=(podman --runtime "$runtime" run --network "ns:/run/netns/$netns"
  --ulimit "nofile=$(ulimit -n):$(ulimit -n)" --ulimit nproc=4096:4096)
"${podman_run[@]}" -d --name "$name" "$image" > /dev/null 2>> "$logs/podman.err" ||
  { cat "$logs/podman.err"; fail "podman run"; }

serving=0
for _ in $(seq 1 120); do
  if [ "$(podman inspect --format '{{.State.Running}}' "$name")" != true ]; then
    podman logs "$name" >&2 || true
    fail "the container stopped before serving"
  fi
  if gemma_cli health > "$logs/health.out" 2>&1; then serving=1; break; fi
  sleep 1
done
[ "$serving" = 1 ] || { podman logs "$name" >&2; fail "no SERVING within 120 s"; }
step "serving"

# --- 4. checks from outside ---------------------------------------------------------
echo "   gemma-cli health: $(cat "$logs/health.out")"
grep -qx SERVING "$logs/health.out" || fail "health is not SERVING"

podman --runtime "$runtime" healthcheck run "$name" > "$logs/healthcheck.out" 2>&1 ||
  { cat "$logs/healthcheck.out"; fail "the image's HEALTHCHECK failed"; }
echo "   podman healthcheck run (the image's HEALTHCHECK): exit 0 $(cat "$logs/healthcheck.out")"

uid=$(podman exec "$name" id -u)
pid1=$(podman exec "$name" cat /proc/1/cmdline | tr '\0' ' ')
echo "   uid $uid, PID 1: $pid1"
[ "$uid" = 10001 ] || fail "the server runs as uid $uid, not the image's user"
case "$pid1" in /opt/gemma-serve/bin/gemma-serve*) ;; *) fail "PID 1 is not gemma-serve" ;; esac

gemma_cli info > "$logs/info.out"
grep -E 'model_name|backend|vocab_size|context_length' "$logs/info.out" | sed 's/^/   info: /'
grep -q 'model_name: "gemma4-fortunes"' "$logs/info.out" || fail "info: not the demo model"
grep -q 'backend: "cpu"' "$logs/info.out" || fail "info: not the cpu backend"

# Greedy continuation of the golden prompt: the first 16 ids of the float64
# reference (golden.json), through the image's tokenizer, engine and server.
golden=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["prompts"][0]; print(p["text"]); print(" ".join(map(str, p["greedy"][:16])))' \
  "$repo/models/gemma4-fortunes/golden.json")
prompt=$(echo "$golden" | sed -n 1p)
want_ids=$(echo "$golden" | sed -n 2p)
gemma_cli generate "$prompt" --greedy --max-tokens 16 --print-ids --verbose \
  > "$logs/generate.out" 2> "$logs/generate.err" || { cat "$logs/generate.err"; fail "generate"; }
got_ids=$(sed -n 's/^ids: //p' "$logs/generate.out")
echo "   generate \"$prompt\" --greedy --max-tokens 16:"
sed -e '/^ids:/d' -e 's/^/     | /' "$logs/generate.out"
echo "   ids:    $got_ids"
echo "   golden: $want_ids"
sed 's/^/   /' "$logs/generate.err"
[ "$got_ids" = "$want_ids" ] || fail "greedy ids differ from the golden reference"

# The compose file's loadtest profile: gemma-loadgen from the same image, in a
# second container, against the server (a small bounded load).
if podman exec "$name" test -x /opt/gemma-serve/bin/gemma-loadgen; then
  "${podman_run[@]}" --rm --entrypoint /opt/gemma-serve/bin/gemma-loadgen "$image" \
    --addr=127.0.0.1:50051 --concurrency=4 --num-requests=16 --input-len=32 --output-len=32 \
    --ignore-eos > "$logs/loadgen.out" 2>> "$logs/podman.err" ||
    { cat "$logs/loadgen.out" "$logs/podman.err"; fail "gemma-loadgen"; }
  grep -E '^(Successful|Failed) requests|^Output token throughput|^TTFT|^TPOT' "$logs/loadgen.out" |
    sed 's/^/   loadgen: /'
  grep -Eq '^Successful requests: +16$' "$logs/loadgen.out" || fail "loadgen: not 16 successes"
  grep -Eq '^Failed requests: +0$' "$logs/loadgen.out" || fail "loadgen: failed requests"
else
  echo "   (no gemma-loadgen in this image: the loadtest profile's check is skipped)"
fi

# Drain: a stream in flight when `podman stop` sends the image's STOPSIGNAL must
# run to its end, and the server must exit 0.
drain_tokens=1000
gemma_cli generate "Love is" --ignore-eos --max-tokens "$drain_tokens" --seed 7 --verbose \
  > "$logs/drain.out" 2> "$logs/drain.err" &
stream_pid=$!
for _ in $(seq 1 100); do
  [ -s "$logs/drain.out" ] && break
  sleep 0.1
done
[ -s "$logs/drain.out" ] || fail "the drain stream produced no output"
step "podman stop (STOPSIGNAL) with a $drain_tokens-token stream in flight"
stop_start_s=$(date +%s)
podman stop --time 90 "$name" > /dev/null 2>> "$logs/podman.err" ||
  { cat "$logs/podman.err"; fail "podman stop"; }
stream_rc=0
wait "$stream_pid" || stream_rc=$?
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
podman logs "$name" > "$logs/server.log" 2>&1 || true
step "stopped in $(( $(date +%s) - stop_start_s ))s, exit code $exit_code"
grep -E 'listening|received signal|drain|stopped' "$logs/server.log" | sed 's/^/   server: /'
sed 's/^/   stream: /' "$logs/drain.err"
[ "$stream_rc" = 0 ] || fail "the in-flight stream failed (rc $stream_rc)"
grep -q "completion $drain_tokens tokens" "$logs/drain.err" || fail "the in-flight stream was cut short"
grep -q 'received signal 15' "$logs/server.log" || fail "the server did not get SIGTERM"
[ "$exit_code" = 0 ] || fail "gemma-serve exited $exit_code after SIGTERM"

step "PASS (logs in $logs)"
