# Sourced by the GPU scripts (scripts/gpu_fp8.sh, scripts/gpu_wgmma.sh) with
# $out set: `run NAME TIMEOUT_S COMMAND...` runs one step with its output in
# $out/NAME.log and appends "NAME rc=N Ts" to $out/status.txt (emptied here).
run() {  # name timeout_s command...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - start))s" >> "$out/status.txt"
}
: > "$out/status.txt"
