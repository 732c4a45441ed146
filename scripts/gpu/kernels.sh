# Subcommands attention, fp8, wgmma, profile, prefill-profile and
# decode-attention-profile of scripts/gpu.sh (sourced after common.sh): kernel
# tests, kernel-level benchmarks and profiles.

# The attention tests, then attention-bench --configs: every compiled prefill
# configuration, D=512 global and D=256 sliding, at the given token counts,
# and a D=512 2048-token chunk at depth 126976 as gemma-bench runs it. About
# 1.5-2 minutes.
cmd_attention() {
  autotune_in_out
  gpu_info
  timeout 120 "$bundle/bin/attention_test" --gtest_brief=1 > "$out/attention_test.log" 2>&1
  local test_rc=$?
  timeout 150 "$bundle/bin/attention-bench" --configs "${1:-8192,32768,131072}" > "$out/attention_bench.log" 2>&1
  local bench_rc=$?
  echo "==== GPU: $(gpu_name)"
  echo "==== attention_test rc=$test_rc  $(gtest_verdict "$out/attention_test.log")"
  grep -E '^\[  FAILED|Failure|config |rel_error|Which is' "$out/attention_test.log" | head -20
  echo "==== attention-bench --configs rc=$bench_rc (vs default: >1 is faster; D256: default and best only)"
  awk 'NR == 1 || /^global/ { print; next }
       /^sliding/ { key = $4; if (!(key in best) || $7 + 0 > bestv[key]) { best[key] = $0; bestv[key] = $7 + 0 }
                    if ($0 ~ /1\.000x$/ && !(key in dflt)) dflt[key] = $0; order[key] = NR }
       !/^(global|sliding)/ && NR > 1 { print }
       END { for (k in order) { print dflt[k]; if (best[k] != dflt[k]) print best[k] } }' "$out/attention_bench.log"
}

# The FP8 weight path in under ~4 minutes:
#   1. gpu_fp8_kernels_test   quantizer, fp8 GEMV (every tiling, E4M3 and a16 input, 31B
#                             shapes), epilogue, norm / gelu gate emitting fp8 rows (the
#                             wgmma FP8 linear's tests and bench rows: `wgmma`)
#   2. gpu_fp8_quality_test   fp8 logits vs the fortunes float64 golden; 31B random fp8 vs
#                             bf16; LinearRunner paths (pre-quantized x, tuned a16)
#   3. gemv-fp8-bench         decode GEMV TB/s, bf16 vs fp8 (E4M3 / a16), 31B shapes, batch
#                             1/2/4/8, and the batch-1 fp8 GEMV sum of one token
#   4. gemma-bench --weights fp8 (31B, random weights): decode @512 (also with the bf16 LM
#      head, --lm-head bf16, for comparison), prefill @8K
cmd_fp8() {
  gpu_info
  steps_begin
  local bench=("$bundle/bin/gemma-bench" --config "$config_31b" --random-weights --weights fp8 --skip-gemv)
  run gpu_fp8_kernels_test 120 "$bundle/bin/gpu_fp8_kernels_test" --gtest_brief=1 --gtest_filter=-WgmmaFp8Test.*
  run gpu_fp8_quality_test 120 "$bundle/bin/gpu_fp8_quality_test" --gtest_brief=1
  GEMMA_BENCH_NO_WGMMA=1 run gemv-fp8-bench 60 "$bundle/bin/gemv-fp8-bench"
  # One depth, 8K prompt: prefill tok/s at 8K and decode tok/s at depth 8K; the
  # first run gives decode at depth 512 (prefill 512).
  run bench_fp8_512 60 "${bench[@]}" --depths 512 --json "$out/bench_fp8_512.json"
  run bench_fp8_512_bf16_head 60 "${bench[@]}" --lm-head bf16 --depths 512 --json "$out/bench_fp8_512_bf16_head.json"
  run bench_fp8_8k 70 "${bench[@]}" --depths 8192 --json "$out/bench_fp8_8k.json"
  # If cuBLASLt's outer-vector fp8 scales misbehave, the epilogue path instead.
  if ! grep -q 'bench: depth' "$out/bench_fp8_8k.log"; then
    GEMMA_FP8_OUTER_VEC=0 run bench_fp8_8k_epilogue 70 "${bench[@]}" --depths 8192 \
      --json "$out/bench_fp8_8k_epilogue.json"
  fi

  echo "==== GPU: $(gpu_name)"
  cat "$out/status.txt"
  for t in gpu_fp8_kernels_test gpu_fp8_quality_test; do
    grep -E '^\[  (PASSED|FAILED)|Failure|Expected|Which is|error' "$out/$t.log" | head -12
  done
  echo "==== quality"
  grep -hE 'fp8-quality|linear-fp8' "$out/gpu_fp8_quality_test.log"
  echo "==== decode GEMV (weight bytes / time, best tiling each)"
  grep -hE '^gemv-fp8 .* b(1|8) |decode token' "$out/gemv-fp8-bench.log" | sed -E 's/ +/ /g'  # b2, b4: see the log
  echo "==== autotuned fp8 GEMVs at batch 1 (gemma-bench 512)"
  grep -hE '^  fp8 GEMV' "$out/bench_fp8_512.log"
  echo "==== gemma-bench 31B fp8 (targets: decode@512 >= 100 tok/s, prefill@8K >= 11.5K tok/s)"
  for f in "$out"/bench_fp8_*.log; do
    grep -hE 'bench: depth|outer-vector|error|Error' "$f" | sed -E "s/^\[[^]]*\] /$(basename "$f" .log): /"
  done
}

# The wgmma FP8 linear (kernels/gemv/wgmma_fp8.h) for decode batches of 1..64
# tokens, in two stages of under ~10 minutes each (one device call each; run
# `engine` only once every test of `kernel` passed).
# Stage `kernel` (the default):
#   1. compute-sanitizer memcheck (+ racecheck with RACECHECK=1) on the exact
#      one-hot patterns (if the tool is there), then the one-hot patterns
#      alone: they name the first wrong (row, token) of a descriptor /
#      swizzle / fragment mistake
#   2. every WgmmaFp8Test (variants x grids (K splits, stream-K) x m at the
#      31B shapes, the LM head, odd shapes; graph replays; PDL), and the GEMV
#      tests sharing the helpers
#   3. gemv-fp8-bench, wgmma rows only (m = 16, 32, 64, weights rotated past
#      L2, a PDL stand-in kernel after each launch): best K split and best
#      stream-K grid on the six 31B linears and the fp8 LM head; every
#      candidate of 5376 x 8192 (the o_proj, 42 row tiles)
# Stage `engine`: the engine's use of it (engine/cuda/wgmma_path.h, fp8
# decode batches 1..64 against the GEMV and cuBLASLt):
#   1. LinearFp8Test.* (LinearRunner: wgmma after autotuning, forced, cached,
#      switched off; the cuBLASLt paths)
#   2. gemma-bench 31B fp8 batched decode, batches 4, 16 and 64 at contexts 64
#      and 2048: the measured choice (its start-up log lists wgmma vs the
#      GEMV / cuBLASLt per shape and bucket), GEMMA_FP8_WGMMA=0 (GEMV and
#      cuBLASLt only), and GEMMA_FP8_WGMMA=force (wgmma wherever tuned: the
#      kernel end to end)
#   Serving at concurrency 64 (a call each, ~10 minutes):
#     WEIGHTS=fp8 scripts/gpu.sh serve 64                     fp8, measured choice
#     WEIGHTS=fp8 GEMMA_FP8_WGMMA=0 scripts/gpu.sh serve 64   fp8, GEMV / cuBLASLt only
#     scripts/gpu.sh serve 64                                 bf16 weights, for reference
cmd_wgmma() {
  gpu_info
  steps_begin
  if [[ "${1:-kernel}" == engine ]]; then
    wgmma_engine
  else
    wgmma_kernel
  fi
}

wgmma_engine() {
  # One cache for the three bench runs: the GEMVs and wgmma choices are
  # timed once (first run), the later runs take them.
  autotune_in_out autotune_wgmma_engine.txt
  run linear_fp8_test 150 "$bundle/bin/gpu_fp8_quality_test" --gtest_filter='LinearFp8Test.*'
  local bench=("$bundle/bin/gemma-bench" --config "$config_31b" --random-weights --weights fp8 --batches 4,16,64
               --contexts 64,2048 --decode-tokens 16)
  run bench_wgmma 150 "${bench[@]}"
  GEMMA_FP8_WGMMA=0 run bench_cublaslt 120 "${bench[@]}"
  GEMMA_FP8_WGMMA=force run bench_wgmma_force 120 "${bench[@]}"
  echo "==== GPU: $(gpu_name)"
  cat "$out/status.txt"
  grep -E '^\[  (PASSED|FAILED)|Failure|Expected|Which is|error|measured:' "$out/linear_fp8_test.log" | head -24
  echo "==== wgmma vs GEMV / cuBLASLt per shape and bucket (start-up of the first bench run)"
  grep -hE 'cuda: fp8 [0-9]+ x [0-9]+ \(|wgmma' "$out/bench_wgmma.log" | sed -E 's/^\[[^]]*\] //' | head -20
  echo "==== gemma-bench 31B fp8 batched decode: measured | GEMMA_FP8_WGMMA=0 | force"
  for f in bench_wgmma bench_cublaslt bench_wgmma_force; do
    grep -hE 'bench: batch|error|Error' "$out/$f.log" | sed -E "s/^\[[^]]*\] /$f: /"
  done
}

wgmma_kernel() {
  local test_bin="$bundle/bin/gpu_fp8_kernels_test" sanitizer
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null || true)
  run wgmma_onehot 60 "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*:WgmmaFp8Test.Rejects*'
  if [[ -n "$sanitizer" ]]; then
    run sanitizer_memcheck 100 "$sanitizer" --tool memcheck "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*'
    [[ -n "${RACECHECK:-}" ]] &&
      run sanitizer_racecheck 100 "$sanitizer" --tool racecheck "$test_bin" --gtest_filter='WgmmaFp8Test.OneHot*'
  fi
  run wgmma_tests 300 "$test_bin" --gtest_brief=1 --gtest_filter='WgmmaFp8Test.*:GemvFp8Test.*'
  GEMMA_BENCH_WGMMA_ONLY=1 run wgmma_bench 240 "$bundle/bin/gemv-fp8-bench"
  GEMMA_BENCH_WGMMA_ONLY=1 run wgmma_bench_lm_head 120 "$bundle/bin/gemv-fp8-bench" 262144 5376
  GEMMA_BENCH_WGMMA_ONLY=1 GEMMA_BENCH_WGMMA_ALL=1 run wgmma_bench_all 120 "$bundle/bin/gemv-fp8-bench" 5376 8192

  echo "==== GPU: $(gpu_name)"
  cat "$out/status.txt"
  for t in sanitizer_memcheck sanitizer_racecheck; do
    [[ -f "$out/$t.log" ]] && grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race' "$out/$t.log" | head -6
  done
  for t in wgmma_onehot wgmma_tests; do
    grep -E '^\[  (PASSED|FAILED)|Failure|first wrong|first bad|Expected|Which is|error' "$out/$t.log" | head -16
  done
  echo "==== wgmma FP8 linear (weight bytes / time; best variant x split each; targets ~4 TB/s)"
  grep -hE '^wgmma-fp8' "$out/wgmma_bench.log" "$out/wgmma_bench_lm_head.log" | sed -E 's/ +/ /g'
}

# Nsight Compute's raw CSV (gpu__time_duration.sum per kernel) summed per kernel name, longest
# first: ms and launches per repeat (REPEATS: how many steps or passes the profile covered), share,
# average us, name. Usage: ncu_kernel_table CSV REPEATS TOP
ncu_kernel_table() {
  python3 - "$@" <<'PY'
import csv, collections, sys
path, repeats, top = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
per = collections.defaultdict(lambda: [0.0, 0])
rows = [line for line in open(path) if line.startswith('"')]  # not ncu's ==PROF== lines
for r in csv.DictReader(rows):
    try:
        ns = float(r["gpu__time_duration.sum"].replace(",", ""))
    except (KeyError, ValueError):
        continue  # the units row
    name = r.get("Kernel Name", "?")
    per[name][0] += ns
    per[name][1] += 1
total = sum(v[0] for v in per.values())
for name, (ns, count) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"{ns / repeats / 1e6:8.3f} {100 * ns / max(total, 1):5.1f}% {count / repeats:6.0f} {ns / count / 1e3:9.1f}  {name[:110]}")
print(f"sum {total / repeats / 1e6:.3f} ms per repeat over {sum(v[1] for v in per.values()) / repeats:.0f} launches")
PY
}

# Where a batch-1 decode step's time goes:
#   1. read-bw-bench   the HBM read ceiling (linear and the GEMV's 16-row pattern)
#   2. gemma-bench     31B random weights ($WEIGHTS, default fp8), decode @512, under nsys when
#                      the machine has it (kernel time summary of the timed decode steps only), else
#                      under Nsight Compute when it has that: every kernel of two timed steps (graph
#                      nodes one by one, serialized, at the GPU's own clocks), summed per kernel name
cmd_profile() {
  gpu_info
  local weights=${WEIGHTS:-fp8} nsys ncu
  timeout 120 "$bundle/bin/read-bw-bench" 8 > "$out/read_bw.log" 2>&1
  nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2> /dev/null | head -1)
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
  local bench=("$bundle/bin/gemma-bench" --config "$config_31b" --random-weights --weights "$weights" --skip-gemv
               --depths 512)
  if [[ -z "$nsys" && -n "$ncu" ]]; then
    timeout 120 "${bench[@]}" --decode-tokens 64 > "$out/bench.log" 2>&1
    # The CSV goes to --log-file (stdout keeps the bench's own output).
    timeout 400 "$ncu" --profile-from-start off --graph-profiling node --clock-control none \
      --metrics gpu__time_duration.sum --csv --page raw --log-file "$out/ncu_raw.csv" \
      "${bench[@]}" --decode-tokens 2 > "$out/ncu_bench.log" 2>&1
    echo "==== GPU: $(gpu_name); Nsight Compute: $ncu (rc $?)"
    grep -E 'read-bw' "$out/read_bw.log"
    grep -hE 'bench: depth' "$out/bench.log"
    echo "==== kernels of 2 decode steps, serialized (ms per step, share, launches per step, avg us, name)"
    ncu_kernel_table "$out/ncu_raw.csv" 2 30
    return
  fi
  bench+=(--decode-tokens 64)
  if [[ -n "$nsys" ]]; then
    timeout 240 "$nsys" profile -t cuda --cuda-graph-trace=node --capture-range=cudaProfilerApi \
      -o "$out/decode" -f true "${bench[@]}" > "$out/bench.log" 2>&1
    timeout 120 "$nsys" stats -q --report cuda_gpu_kern_sum --format csv -o "$out/kern" "$out/decode.nsys-rep" \
      > "$out/stats.log" 2>&1
    rm -f "$out/decode.sqlite"
  else
    timeout 120 "${bench[@]}" > "$out/bench.log" 2>&1
  fi
  echo "==== GPU: $(gpu_name); nsys: ${nsys:-none}"
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
}

# Where a prefill's time goes: gemma-bench prefills DEPTH tokens (default 8 192) of the 31B shape
# with $WEIGHTS (default bf16) in the backend's passes; Nsight Compute times every kernel of that
# prefill (--profile-prefill puts the profiler range around it), serialized, at the GPU's own clocks.
cmd_prefill_profile() {
  gpu_info
  local weights=${WEIGHTS:-bf16} depth=${DEPTH:-8192} ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
  [[ -n "$ncu" ]] || { echo "prefill-profile: no Nsight Compute (ncu) on this machine" >&2; return 1; }
  local bench=("$bundle/bin/gemma-bench" --config "$config_31b" --random-weights --weights "$weights" --skip-gemv
               --depths "$depth" --decode-tokens 2)
  timeout 150 "${bench[@]}" > "$out/bench.log" 2>&1
  local bench_rc=$?
  timeout 300 "$ncu" --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
    --print-units base --page raw --log-file "$out/ncu_prefill.csv" "${bench[@]}" --profile-prefill \
    > "$out/ncu_bench.log" 2>&1
  local rc=$?
  echo "==== GPU: $(gpu_name); gemma-bench rc $bench_rc; Nsight Compute: $ncu (rc $rc); $weights, prefill of $depth tokens"
  grep -hE 'bench: depth|chunk' "$out/bench.log" | sed -E 's/^\[[^]]*\] //' | cut -c1-200
  echo "==== kernels of the prefill, serialized (ms, share, launches, avg us, name)"
  ncu_kernel_table "$out/ncu_prefill.csv" 1 20
}

# Nsight Compute on two decode attention launches (graph nodes): the E4M3
# global layer at batch 1, depth 131 072 (attention-bench's first E4M3 D512
# launch) and the E4M3 sliding layer at batch 64, depth 1 024. Prints the
# sections' key lines and the executed instructions per SASS opcode.
cmd_decode_attention_profile() {
  gpu_info
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
  [[ -n "$ncu" ]] || { echo "no ncu on this machine"; return 1; }
  echo "==== GPU: $(gpu_name); $ncu"
  local name batch depth dim
  for case in "global 1 131072 512" "sliding 64 1024 256"; do
    read -r name batch depth dim <<< "$case"
    timeout 240 "$ncu" --graph-profiling node --kernel-name-base demangled \
      -k "regex:AttentionTileKernel<.int.$dim,.*bool.1," --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section InstructionStats --section Occupancy --section LaunchStats \
      --metrics sass__inst_executed_per_opcode --print-metric-instances values \
      "$bundle/bin/attention-bench" --batch-decode "$batch" "$depth" > "$out/ncu_decode_$name.log" 2>&1
    echo "==== E4M3 $name D$dim, batch $batch, depth $depth (ncu rc=$?)"
    grep -E "AttentionTileKernel|Duration|DRAM Throughput|Compute \(SM\)|Issue Slots|Executed Ipc A|Warp Cycles Per Issued|Registers Per|Achieved Occ|Issued Instructions  |sass__inst_executed_per_opcode|Stall|pipeline" \
      "$out/ncu_decode_$name.log" | cut -c1-200 | head -40
  done
}
