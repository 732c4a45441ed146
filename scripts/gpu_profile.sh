#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with a bundle made by
# scripts/device_bundle.sh: where a batch-1 decode step's time goes (issue 8).
#   1. read-bw-bench       the HBM read ceiling (linear and the GEMV's 16-row pattern)
#   2. gemma-bench         31B random weights, decode @512, under nsys when the machine has it
#                          (kernel time summary of the timed decode steps only)
#   BUNDLE=.device/bundle WEIGHTS=fp8 scripts/gpu_profile.sh
set -uo pipefail
bundle=${BUNDLE:-.device/bundle}
out=${OUT:-gpu-out}
weights=${WEIGHTS:-fp8}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
timeout 120 "$bundle/bin/read-bw-bench" 8 > "$out/read_bw.log" 2>&1
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
bench=("$bundle/bin/gemma-bench" --config tests/data/gemma4-31b --random-weights --weights "$weights" --skip-gemv
       --depths 512 --decode-tokens 64)
if [[ -n "$nsys" ]]; then
  timeout 240 "$nsys" profile -t cuda --cuda-graph-trace=node --capture-range=cudaProfilerApi \
    -o "$out/decode" -f true "${bench[@]}" > "$out/bench.log" 2>&1
  timeout 120 "$nsys" stats -q --report cuda_gpu_kern_sum --format csv -o "$out/kern" "$out/decode.nsys-rep" \
    > "$out/stats.log" 2>&1
  rm -f "$out/decode.sqlite"
else
  timeout 120 "${bench[@]}" > "$out/bench.log" 2>&1
fi
echo "==== GPU: $(tail -1 "$out/gpu.txt"); nsys: ${nsys:-none}"
grep -E 'read-bw' "$out/read_bw.log"
grep -hE 'bench: depth|fp8 GEMV' "$out/bench.log"
if [[ -f "$out/kern_cuda_gpu_kern_sum.csv" ]]; then
  echo "==== kernels over 64 decode steps (time %, total ns, instances, avg ns, name)"
  python3 - "$out/kern_cuda_gpu_kern_sum.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
total = sum(float(r["Total Time (ns)"]) for r in rows)
for r in rows[:22]:
    print(f'{float(r["Time (%)"]):5.1f} {int(float(r["Total Time (ns)"])):>11} {r["Instances"]:>6} '
          f'{int(float(r["Avg (ns)"])):>8}  {r["Name"][:110]}')
print(f"sum of kernel time {total/1e6:.2f} ms = {total/64/1e6:.3f} ms per step")
PY
fi
