# Subcommand int4 of scripts/gpu.sh (sourced after common.sh): the int4
# (W4A16, Q4_0) weight path in ~4 minutes:
#   0. compute-sanitizer memcheck on the W4A16 kernel tests' small shapes
#      (every tiling, the tiling and dequantization kernels), when present
#   1. gpu_w4a16_kernels_test  device Q4_0 quantizer == host bits, row -> tiled
#                              layout, bf16 dequantizer, W4A16 kernel (every tiling
#                              at its smallest and largest batch, 1..64, group 32/128
#                              inputs, 31B shapes incl. the LM head, fixture and odd
#                              shapes) against float64 references
#   2. gpu_int4_quality_test   fortunes int4 vs the float64 golden (fp8 / int4 / bf16
#                              LM head); on-grid fortunes int4 vs bf16 of the same weights;
#                              the compressed-tensors W4A16 fixtures (tests/data) against
#                              the on-grid fixture and the golden
#   3. gemv-w4a16-bench        TB/s vs the read ceiling, 31B shapes, batch 1..64,
#                              and the batch-1 sum of one token (GEMM rows: unset
#                              GEMMA_BENCH_NO_GEMM); read-bw-bench --linears: a
#                              kernel that only reads, at the same sizes
#   4. gemma-bench --weights int4 (31B, random weights on the grid): prefill @8K, decode
#      @512 and @8K (and twice more each with GEMMA_FUSED_DECODE=0 and the default, and
#      with GEMMA_INT4_SPLIT_K=0 and the default, and with GEMMA_NORM_CLUSTER=0 and the default), @512
#      with each kind of launch left out (--omit, timing only); then batched decode at
#      64 sequences x 2048 with the fp8 KV cache
#      (and again with GEMMA_FP8_LEFT_SCALES=0: the scaling kernel after each fp8 GEMM);
#      both again with the bf16 copy for large passes instead of the fp8 one
#      (GEMMA_INT4_FP8_COPY=0) and with
#      --weights fp8 for comparison (FP8_REF=0 leaves the fp8 runs out)
cmd_int4() {
  autotune_in_out
  gpu_info
  steps_begin
  local bench=("$bundle/bin/gemma-bench" --config "$config_31b" --random-weights --skip-gemv)
  local b64=(--kv-cache-dtype fp8 --batches 64 --contexts 2048)
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null || true)
  if [[ -n "$sanitizer" ]]; then
    run sanitizer_memcheck 120 "$sanitizer" --tool memcheck "$bundle/bin/gpu_w4a16_kernels_test" \
      --gtest_filter='GemvW4Test.Small*:DequantizeW4Test.*:GemvW4Test.Rejects*' --gtest_brief=1
  fi
  run gpu_w4a16_kernels_test 240 "$bundle/bin/gpu_w4a16_kernels_test" --gtest_brief=1
  run gpu_int4_quality_test 120 "$bundle/bin/gpu_int4_quality_test" --gtest_brief=1
  GEMMA_BENCH_ALL_TILINGS=1 GEMMA_BENCH_NO_GEMM=1 run gemv-w4a16-bench 60 "$bundle/bin/gemv-w4a16-bench"
  run read-bw-linears 60 "$bundle/bin/read-bw-bench" --linears  # what a kernel that only reads reaches
  run bench_int4 90 "${bench[@]}" --weights int4 --depths 512,8192 --json "$out/bench_int4.json"
  # The sliding layers' three decode kernels (QKV-RoPE, split attention, merge) instead of the fused
  # one (GEMMA_FUSED_DECODE=0), alternated with the default.
  local i
  for i in 1 2; do
    GEMMA_FUSED_DECODE=0 run "bench_int4_unfused_$i" 90 "${bench[@]}" --weights int4 --depths 512,8192
    run "bench_int4_default_$i" 90 "${bench[@]}" --weights int4 --depths 512,8192
  done
  # Whole tilings only for o_proj and down at batch 1 (GEMMA_INT4_SPLIT_K=0), alternated with the
  # default (split tilings where the tuner measured them faster; the log names its picks).
  for i in 1 2; do
    GEMMA_INT4_SPLIT_K=0 run "bench_int4_nosplit_$i" 90 "${bench[@]}" --weights int4 --depths 512,8192
    run "bench_int4_split_$i" 90 "${bench[@]}" --weights int4 --depths 512,8192
  done
  # The residual norms in one block per token (GEMMA_NORM_CLUSTER=0), alternated with the default
  # (a cluster of 8 blocks per token for passes of up to 16 tokens).
  for i in 1 2; do
    GEMMA_NORM_CLUSTER=0 run "bench_int4_normblock_$i" 90 "${bench[@]}" --weights int4 --depths 512,8192
    run "bench_int4_normcluster_$i" 90 "${bench[@]}" --weights int4 --depths 512,8192
  done
  # What each kind of launch costs inside the decode graph at batch 1 (timing only: outputs wrong).
  local kind
  for kind in norms qkv-rope attention linears; do
    run "bench_int4_omit_$kind" 60 "${bench[@]}" --weights int4 --depths 512 --omit "$kind"
  done
  run bench_int4_b64 75 "${bench[@]}" --weights int4 "${b64[@]}" --json "$out/bench_int4_b64.json"
  # The fp8 copy's scales applied by a kernel after each GEMM instead of by the gelu gate and the
  # residual norms (GEMMA_FP8_LEFT_SCALES=0).
  GEMMA_FP8_LEFT_SCALES=0 run bench_int4_b64_scaling 75 "${bench[@]}" --weights int4 "${b64[@]}" \
    --json "$out/bench_int4_b64_scaling.json"
  # The bf16 copy for large passes (the int4 values exactly, 29 GB more than the fp8 copy).
  GEMMA_INT4_FP8_COPY=0 run bench_int4_bf16copy 90 "${bench[@]}" --weights int4 --depths 512,8192 \
    --json "$out/bench_int4_bf16copy.json"
  GEMMA_INT4_FP8_COPY=0 run bench_int4_bf16copy_b64 75 "${bench[@]}" --weights int4 "${b64[@]}" \
    --json "$out/bench_int4_bf16copy_b64.json"
  if [[ ${FP8_REF:-1} != 0 ]]; then  # the same two runs with fp8 weights, same machine
    run bench_int4_fp8ref 90 "${bench[@]}" --weights fp8 --depths 512,8192 --json "$out/bench_fp8ref.json"
    run bench_int4_fp8ref_b64 75 "${bench[@]}" --weights fp8 "${b64[@]}" --json "$out/bench_fp8ref_b64.json"
  fi

  echo "==== GPU: $(gpu_name)"
  cat "$out/status.txt"
  for t in sanitizer_memcheck gpu_w4a16_kernels_test gpu_int4_quality_test; do
    [[ -f "$out/$t.log" ]] || continue
    grep -E '^\[  (PASSED|FAILED)|Failure|Expected|Which is|error|ERROR SUMMARY' "$out/$t.log" | head -12
  done
  echo "==== quality"
  grep -h 'int4-quality' "$out/gpu_int4_quality_test.log"
  echo "==== W4A16 kernel (tiled code + scale bytes / time, best tiling; ceiling 4.35 TB/s)"
  grep -hE '^w4-gemv .* b(1|8|16|64) |decode token' "$out/gemv-w4a16-bench.log" | sed -E 's/ +/ /g'
  grep -hE '^ +tiling .* b1 +x[adc]2?-|partial sums' "$out/gemv-w4a16-bench.log" | sed -E 's/ +/ /g' | head -60
  echo "==== read-only kernel at a layer's linear sizes"
  grep -h '^read-only' "$out/read-bw-linears.log"
  echo "==== gemma-bench 31B int4 (targets: decode@512 >= 170, @8K >= 160, prefill@8K >= 12,334 tok/s)"
  for f in "$out"/bench_int4*.log; do
    grep -hE 'bench: |quantized|error|Error|ready|^ +64 |split tiling' "$f" | sed -E "s/^\[[^]]*\] /$(basename "$f" .log): /"
  done
}

# The int4 path in ~2 minutes, for a short lease: the batch-1 kernel tests, the quality test, the batch-1
# GEMVs at a sliding layer's four shapes (every tiling) and two whole-step benches; with BASE=<bundle>
# (older binaries, e.g. main before a change) its gemv-w4a16-bench and gemma-bench run too, alternated,
# each bundle with its own fresh tuning cache.
cmd_int4_quick() {
  gpu_info
  steps_begin
  local shapes=(16384 5376 5376 8192 43008 5376 5376 21504) sides=(new) side dir i
  [[ -n ${BASE:-} ]] && sides+=(base)
  run gpu_w4a16_kernels_test 120 "$bundle/bin/gpu_w4a16_kernels_test" --gtest_brief=1 \
    --gtest_filter='GemvW4Test.Small*:GemvW4Test.LargeAndSmall*:GemvW4Test.Split*'
  run gpu_int4_quality_test 120 "$bundle/bin/gpu_int4_quality_test" --gtest_brief=1
  for side in "${sides[@]}"; do
    dir=$bundle; [[ $side == base ]] && dir=$BASE
    GEMMA_BENCH_ALL_TILINGS=1 GEMMA_BENCH_NO_GEMM=1 run "gemv_$side" 90 "$dir/bin/gemv-w4a16-bench" "${shapes[@]}"
  done
  for i in 1 2; do
    for side in "${sides[@]}"; do
      dir=$bundle; [[ $side == base ]] && dir=$BASE
      GEMMA_AUTOTUNE_CACHE="$out/autotune_$side.txt" run "bench_${side}_$i" 120 "$dir/bin/gemma-bench" \
        --config "$config_31b" --random-weights --skip-gemv --weights int4 --depths 512,8192 --decode-tokens 64
    done
  done

  echo "==== GPU: $(gpu_name)"
  cat "$out/status.txt"
  for t in gpu_w4a16_kernels_test gpu_int4_quality_test; do echo "$t: $(gtest_verdict "$out/$t.log")"; done
  grep -h 'int4-quality' "$out/gpu_int4_quality_test.log"
  for side in "${sides[@]}"; do
    echo "==== W4A16 batch 1, $side (best tiling per shape; ceiling 4.35 TB/s)"
    grep -hE '^w4-gemv .* b1 ' "$out/gemv_$side.log" | sed -E 's/ +/ /g'
  done
  echo "==== gemma-bench int4, ms a token (targets on the H200: 170 tok/s @512, 160 @8K)"
  for i in 1 2; do
    for side in "${sides[@]}"; do
      echo "$side $i: $(grep -hE '^ +(512|8192) ' "$out/bench_${side}_$i.log" | sed -E 's/ +/ /g' | tr '\n' '|')"
    done
  done
}

# Nsight Compute on one batch-1 W4A16 tiling ($TILING, default xc2-b1-t1s8k4; gemv-w4a16-bench times
# only it) at gate|up's and o_proj's shapes: where the kernel is between its read floor and its issue
# rate (issue slots busy, active and eligible warps, cycles per instruction, stalls). A launch past
# the warm-up ones, at the GPU's own clocks; the full reports stay in $OUT.
cmd_int4_profile() {
  gpu_info
  local tiling=${TILING:-xc2-b1-t1s8k4} ncu shape
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
  [[ -n "$ncu" ]] || { echo "int4-profile: no ncu on this machine" >&2; return 1; }
  echo "==== GPU: $(gpu_name); tiling $tiling"
  for shape in "43008 5376" "5376 8192"; do
    GEMMA_BENCH_TILING="$tiling" GEMMA_BENCH_NO_GEMM=1 timeout 120 "$ncu" --clock-control none \
      --kernel-name regex:GemvW4 --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
      --section InstructionStats --section LaunchStats \
      "$bundle/bin/gemv-w4a16-bench" $shape > "$out/ncu_${shape// /x}.txt" 2>&1
    echo "==== $shape"
    grep -E 'Duration|DRAM Throughput|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Achieved Occupancy|Grid Size|Stall' \
      "$out/ncu_${shape// /x}.txt" | sort -u | sed -E 's/ +/ /g'
  done
}
