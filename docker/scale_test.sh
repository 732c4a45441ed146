#!/usr/bin/env bash
# Three gemma-serve replicas behind HAProxy (docker/haproxy.cfg), tested from
# outside: load spreads, a killed replica's streams fail cleanly while new
# calls go to the others, a restarted replica rejoins, and a drained replica
# (HAProxy DRAIN, then SIGTERM) drops no call.
#
# What runs: the host's CPU binaries (build/bin: gemma-serve, gemma-loadgen)
# and Debian's haproxy, all inside one network namespace that this script
# creates, so the replicas keep gemma-serve's fixed ports (50051 gRPC, 8000
# HTTP, 9090 metrics) on their own loopback addresses (127.0.1.1-3) and meet no
# other server on the machine. It does not build the image: the container
# itself is tested by docker/build_and_test.sh; this tests the balancing, the
# health checks and the drain, which are the same for a process and a
# container. HAProxy's fourth server (r3, 127.0.1.4) has no replica and stays
# DOWN, as a GPU whose replica is still loading would.
# Too slow for CI (about three minutes). Run as root (ip netns).
#
# Usage: docker/scale_test.sh
# Environment: GEMMA_BIN_DIR (build/bin), GEMMA_SCALE_THREADS (1 per replica)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${GEMMA_BIN_DIR:-$repo/build/bin}
threads=${GEMMA_SCALE_THREADS:-1}
model=$repo/models/gemma4-fortunes
ns=gemma-scale-$$
lb=127.0.0.1
replicas=(127.0.1.1 127.0.1.2 127.0.1.3)
grace_s=10

start_s=$(date +%s)
now_s() { date +%s.%N; }
since() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$1" "$(now_s)"; }
step() { echo "== [$(( $(date +%s) - start_s ))s] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (ip netns)"
for b in gemma-serve gemma-loadgen; do [ -x "$bin/$b" ] || fail "no $bin/$b (build it first)"; done
for p in haproxy curl python3 iproute2; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="${missing:-} $p"
done
if [ -n "${missing:-}" ]; then
  step "installing$missing"
  apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi

logs=$(mktemp -d /tmp/gemma-scale-test.XXXXXX)
pids=()
haproxy_pid=""
cleanup() {
  for pid in "${pids[@]}" $haproxy_pid; do
    [ -z "$pid" ] || { kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true
  done
  ip netns del "$ns" >/dev/null 2>&1 || true
}
trap cleanup EXIT

ip netns add "$ns"
ip -n "$ns" link set lo up
in_ns() { ip netns exec "$ns" "$@"; }

# --- replicas and the balancer --------------------------------------------------
start_replica() {  # index
  local i=$1
  ip netns exec "$ns" "$bin/gemma-serve" --model "$model" --backend cpu --threads "$threads" \
    --host "${replicas[$i]}" --port 50051 --http-port 8000 --metrics-port 9090 \
    --max-concurrent-sequences 8 --grace-period-s "$grace_s" >> "$logs/r$i.log" 2>&1 &
  pids[$i]=$!
}
health_code() {  # address -> HTTP status of /health (000: no answer)
  in_ns curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$1:8000/health" || true
}
wait_health() {  # index
  for _ in $(seq 1 120); do
    [ "$(health_code "${replicas[$1]}")" = 200 ] && return 0
    kill -0 "${pids[$1]}" 2>/dev/null || { tail -20 "$logs/r$1.log"; fail "r$1 exited"; }
    sleep 0.5
  done
  tail -20 "$logs/r$1.log"; fail "r$1 not healthy within 60 s"
}
admin() {  # HAProxy runtime API command
  in_ns python3 - "$logs/haproxy.sock" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n"); out = b""
while chunk := s.recv(65536): out += chunk
sys.stdout.write(out.decode())
EOF
}
lb_status() {  # backend server -> UP | DOWN | DRAIN | MAINT ... (HAProxy's CSV stats page)
  in_ns curl -s --max-time 2 "http://$lb:8404/stats;csv" |
    awk -F, -v b="$1" -v s="$2" '$1==b && $2==s {print $18}'
}
wait_lb_status() {  # server status timeout_s
  local deadline=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -le "$deadline" ]; do
    if [ "$(lb_status gemma_grpc "$1")" = "$2" ] && [ "$(lb_status gemma_http "$1")" = "$2" ]; then
      return 0
    fi
    sleep 0.05
  done
  fail "HAProxy: $1 is $(lb_status gemma_grpc "$1") (gRPC) / $(lb_status gemma_http "$1") (HTTP), not $2 within $3 s"
}

step "starting ${#replicas[@]} replicas (CPU backend, $threads thread(s) each) in namespace $ns"
for i in "${!replicas[@]}"; do start_replica "$i"; done
for i in "${!replicas[@]}"; do wait_health "$i"; done
ip netns exec "$ns" env HAPROXY_ADMIN_SOCKET="$logs/haproxy.sock" GEMMA_LB_ADDR="$lb" \
  GEMMA_REPLICA_0="${replicas[0]}" GEMMA_REPLICA_1="${replicas[1]}" \
  GEMMA_REPLICA_2="${replicas[2]}" GEMMA_REPLICA_3=127.0.1.4 \
  haproxy -db -f "$repo/docker/haproxy.cfg" > "$logs/haproxy.log" 2>&1 &
haproxy_pid=$!
for _ in $(seq 1 50); do [ -S "$logs/haproxy.sock" ] && break; sleep 0.1; done
for r in r0 r1 r2; do wait_lb_status "$r" UP 10; done
step "HAProxy $(haproxy -v | head -1 | cut -d' ' -f3): r0 r1 r2 UP, r3 $(lb_status gemma_grpc r3) (no replica)"

# --- figures per replica ---------------------------------------------------------
metric() {  # index name -> value (summed over labels; -1: no answer)
  { in_ns curl -sf --max-time 3 "http://${replicas[$1]}:9090/metrics" || echo "down"; } |
    awk -v n="$2" '$1=="down" {d=1} $1==n || index($1, n "{")==1 {s+=$2}
                   END {if (d) print -1; else printf "%d\n", s}'
}
snapshot() {  # -> "steps0 reqs0 steps1 reqs1 ..." (-1 -1: the replica is down)
  local out=()
  for i in "${!replicas[@]}"; do
    out+=("$(metric "$i" gemma_engine_steps_total)" "$(metric "$i" gemma_request_success_total)")
  done
  echo "${out[@]}"
}
spread() {  # label before after min_share_of_requests [skip_index]
  local -a a=($2) b=($3)
  local total=0
  for i in "${!replicas[@]}"; do
    [ "${a[2*i]}" -ge 0 ] && [ "${b[2*i]}" -ge 0 ] && total=$(( total + b[2*i+1] - a[2*i+1] ))
  done
  printf '   %-24s' "$1:"
  for i in "${!replicas[@]}"; do
    if [ "${a[2*i]}" -lt 0 ] || [ "${b[2*i]}" -lt 0 ]; then
      printf ' r%d  (killed or down)   |' "$i"
    else
      printf ' r%d %3d req %5d steps |' "$i" $(( b[2*i+1] - a[2*i+1] )) $(( b[2*i] - a[2*i] ))
    fi
  done
  echo " total $total req"
  for i in "${!replicas[@]}"; do
    [ "$i" = "${5:-}" ] && continue
    local n=$(( b[2*i+1] - a[2*i+1] ))
    [ $(( n * 100 )) -ge $(( total * $4 )) ] || fail "$1: r$i served $n of $total requests (< $4%)"
  done
}
loadgen() {  # name args... -> runs gemma-loadgen through the balancer, bounded
  local name=$1; shift
  in_ns timeout 180 "$bin/gemma-loadgen" --addr "$lb:50051" --num-channels 2 --input-len 32 \
    --ignore-eos --timeout-s 60 --json "$logs/$name.json" "$@" > "$logs/$name.out" 2> "$logs/$name.err" || true
  [ -s "$logs/$name.json" ] || { cat "$logs/$name.err"; fail "$name: gemma-loadgen wrote no result"; }
}
result() {  # name field
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); v=r[sys.argv[2]]; print(v if not isinstance(v,dict) else " ".join(f"{k}={n}" for k,n in v.items()) or "-")' \
    "$logs/$1.json" "$2"
}
report() {  # name
  python3 - "$logs/$1.json" "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
codes = " ".join(f"{k}={n}" for k, n in r["failures_by_code"].items()) or "-"
print(f"   loadgen {sys.argv[2]}: {r['completed']} ok, {r['failed']} failed ({codes}), "
      f"{r['duration_s']:.1f} s, {r['output_token_throughput']:.0f} tok/s, "
      f"TTFT p50 {r['ttft_ms']['p50']:.0f} ms")
EOF
}

# --- 1. gRPC spreads ---------------------------------------------------------------
step "1. gemma-loadgen over gRPC through HAProxy (2 HTTP/2 connections, 8 streams in flight)"
before=$(snapshot)
loadgen grpc --concurrency 8 --num-requests 96 --output-len 32
after=$(snapshot)
report grpc
[ "$(result grpc failed)" = 0 ] || fail "gRPC load: failed requests"
spread "gRPC, 96 requests" "$before" "$after" 20

# --- 2. the OpenAI HTTP API spreads ---------------------------------------------------
step "2. 48 POST /v1/completions with curl through HAProxy, 6 at a time"
before=$(snapshot)
seq 1 48 | in_ns xargs -P 6 -I{} curl -s -o /dev/null -w '%{http_code}\n' --max-time 60 \
  -H 'Content-Type: application/json' \
  -d '{"prompt": "Love is", "max_tokens": 24, "temperature": 0.8, "seed": {}, "ignore_eos": true}' \
  "http://$lb:8000/v1/completions" > "$logs/http.codes" || true
after=$(snapshot)
echo "   HTTP status codes: $(sort "$logs/http.codes" | uniq -c | awk '{printf "%s x%s ", $2, $1}')"
[ "$(grep -c '^200$' "$logs/http.codes")" = 48 ] || fail "HTTP: not 48 answers of 200"
spread "HTTP, 48 requests" "$before" "$after" 15

# --- 3. a replica killed mid-run --------------------------------------------------------
step "3. kill -9 r1 while 9 streams of 256 tokens are in flight"
before=$(snapshot)
loadgen_start_s=$(date +%s)
loadgen kill --concurrency 9 --num-requests 45 --output-len 256 &
loadgen_pid=$!
sleep 3
running=$(metric 1 gemma_num_requests_running)
killed_at=$(now_s)
{ kill -9 "${pids[1]}" && wait "${pids[1]}"; } 2>/dev/null || true
wait_lb_status r1 DOWN 10
step "   r1 ($running streams running) killed; DOWN in HAProxy $(since "$killed_at")s later (checks every 1 s, fall 1)"
wait "$loadgen_pid" || true
step "   the run ended $(( $(date +%s) - loadgen_start_s ))s after it started (bound: 180 s)"
report kill
failed=$(result kill failed)
[ "$failed" -ge 1 ] || echo "   (no stream was on r1 when it died)"
[ "$failed" -le 9 ] || fail "more failures ($failed) than streams that can have been in flight on r1"
# A stream cut by the replica's death ends through HAProxy without gRPC
# trailers (UNKNOWN), or as UNAVAILABLE / INTERNAL: an error, never a hang.
case "$(result kill failures_by_code)" in ""|-|UNKNOWN=*|UNAVAILABLE=*|INTERNAL=*) ;;
  *) fail "unexpected failure codes: $(result kill failures_by_code)" ;; esac
after=$(snapshot)
spread "during the kill" "$before" "$after" 0 1

step "   new calls while r1 is down"
before=$(snapshot)
loadgen after_kill --concurrency 8 --num-requests 48 --output-len 32
after=$(snapshot)
report after_kill
[ "$(result after_kill failed)" = 0 ] || fail "requests failed with r1 down"
spread "r1 down, 48 requests" "$before" "$after" 20 1

# --- 4. restart: it rejoins ----------------------------------------------------------------
step "4. r1 restarted"
restart_at=$(now_s)
start_replica 1
wait_health 1
healthy_at=$(now_s)
wait_lb_status r1 UP 10
step "   r1 /health 200 $(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$restart_at" "$healthy_at")s after its start; UP in HAProxy $(since "$healthy_at")s after that (rise 2)"
before=$(snapshot)
loadgen rejoin --concurrency 8 --num-requests 96 --output-len 32
after=$(snapshot)
report rejoin
[ "$(result rejoin failed)" = 0 ] || fail "requests failed after r1 rejoined"
spread "r1 back, 96 requests" "$before" "$after" 15

# --- 5. rolling restart of r2: DRAIN, then SIGTERM -------------------------------------------
step "5. rolling restart of r2 under load: HAProxy DRAIN, then SIGTERM (grace ${grace_s} s)"
loadgen drain --concurrency 9 --num-requests 45 --output-len 256 &
loadgen_pid=$!
sleep 3
admin "set server gemma_grpc/r2 state drain; set server gemma_http/r2 state drain" > /dev/null
running=$(metric 2 gemma_num_requests_running)
term_at=$(now_s)
kill -TERM "${pids[2]}"
rc=0
for _ in $(seq 1 $(( (grace_s + 10) * 5 ))); do kill -0 "${pids[2]}" 2>/dev/null || break; sleep 0.2; done
kill -0 "${pids[2]}" 2>/dev/null && fail "r2 still running $(( grace_s + 10 )) s after SIGTERM"
wait "${pids[2]}" || rc=$?
step "   r2 drained with $running streams running: exited $rc, $(since "$term_at")s after SIGTERM"
grep -E 'draining' "$logs/r2.log" | sed 's/^.*\] /     r2: /' 
[ "$rc" = 0 ] || fail "r2 exited $rc after SIGTERM"
wait "$loadgen_pid" || true
report drain
[ "$(result drain failed)" = 0 ] || fail "the rolling restart dropped calls"
start_replica 2
wait_health 2
admin "set server gemma_grpc/r2 state ready" > /dev/null
admin "set server gemma_http/r2 state ready" > /dev/null
wait_lb_status r2 UP 10
step "   r2 back UP"

# --- 6. the same without DRAIN: SIGTERM alone (figures only) ---------------------------------
step "6. SIGTERM r0 under load without DRAIN first (the 503 /health takes it out)"
loadgen term --concurrency 9 --num-requests 45 --output-len 256 &
loadgen_pid=$!
sleep 3
running=$(metric 0 gemma_num_requests_running)
term_at=$(now_s)
kill -TERM "${pids[0]}"
wait_lb_status r0 DOWN 10
step "   r0 ($running streams running) got SIGTERM; DOWN in HAProxy $(since "$term_at")s later (503 /health)"
for _ in $(seq 1 $(( (grace_s + 10) * 5 ))); do kill -0 "${pids[0]}" 2>/dev/null || break; sleep 0.2; done
wait "${pids[0]}" || fail "r0 exited non-zero after SIGTERM"
step "   r0 exited 0, $(since "$term_at")s after SIGTERM"
wait "$loadgen_pid" || true
report term
echo "   (calls that arrived between SIGTERM and the failed check get UNAVAILABLE; streams in flight finish)"

echo "   HAProxy per-server totals (gRPC backend, sessions): $(in_ns curl -s --max-time 2 "http://$lb:8404/stats;csv" |
  awk -F, '$1=="gemma_grpc" && $2 ~ /^r/ {printf "%s %s %s | ", $2, $8, $18}')"
step "PASS (logs in $logs)"
