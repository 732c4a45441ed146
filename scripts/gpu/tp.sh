# Subcommand tp of scripts/gpu.sh (sourced after common.sh): tensor
# parallelism on whatever GPUs are visible, in about 2 minutes:
#   1. gpu_comm_test     NCCL (loaded at run time: libnccl.so.2, or
#                        $GEMMA_NCCL_LIBRARY) with one rank, the one-shot peer
#                        kernel with 1/2/4 ranks sharing GPU 0, eager and from
#                        graphs; with 2 GPUs both across GPUs 0 and 1
#   2. gpu_tp_test       the TP backend on GPUs 0,1 / 0..3 when visible (and,
#                        with GEMMA_TP_SHARED_GPU=1, 2 and 4 ranks sharing
#                        GPU 0, which can deadlock) vs the fortunes golden
#                        and the one-GPU backend; greedy ids from decode graphs
#   3. allreduce-bench   per-size latency: NCCL vs the one-shot kernel
# The decode and throughput targets run through `serve` with TP=2 (see
# docs/architecture.md, tensor parallelism).
cmd_tp() {
  autotune_in_out
  export CUDA_MODULE_LOADING=EAGER  # ranks sharing GPU 0 (tensor_parallel_backend.cc)
  gpu_info
  steps_begin
  if [ -z "${GEMMA_NCCL_LIBRARY:-}" ] && ! ldconfig -p | grep -q 'libnccl\.so\.2'; then
    local found
    found=$(find / -xdev \( -path /proc -o -path /sys \) -prune -o -name 'libnccl.so.2' -print 2>/dev/null | head -1)
    [ -n "$found" ] && export GEMMA_NCCL_LIBRARY=$found
  fi
  run gpu_comm_test 120 "$bundle/bin/gpu_comm_test"
  run gpu_tp_test 240 "$bundle/bin/gpu_tp_test"
  run allreduce-bench 60 "$bundle/bin/allreduce-bench" --calls 100 --repeats 5
  echo "==== GPU: $(gpu_name) x $(nvidia-smi -L | wc -l)"
  cat "$out/status.txt"
  for t in gpu_comm_test gpu_tp_test; do
    echo "$t: $(gtest_verdict "$out/$t.log")"
    grep -E 'NCCL [0-9]|TP=|SKIPPED \]|Failure|Expected|Which is|error' "$out/$t.log" | head -12
  done
  echo "==== all-reduce latency (us per call, in graphs)"
  cat "$out/allreduce-bench.log"
}
