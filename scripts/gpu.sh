#!/usr/bin/env bash
# The GPU test and benchmark runner. Runs ON the GPU machine, from the
# repository root, with a bundle made here by scripts/device_bundle.sh:
#   scripts/device_bundle.sh .device/bundle $(scripts/gpu.sh binaries SUBCOMMAND)
#   BUNDLE=.device/bundle OUT=gpu-out scripts/gpu.sh SUBCOMMAND [ARGS]
# Logs go to $OUT (default gpu-out); a short table comes last. `binaries`
# runs here: it prints the build/bin paths a subcommand needs (build them
# first: ninja -C build <names>). Subcommands and their knobs:
#   all [gemma-bench flags]     every GPU test, then `bench` (SKIP_BENCH=1: tests only)
#   test                        every GPU test binary gpu_*_test (GPU_TESTS: a glob to run fewer)
#   bench [gemma-bench flags]   gemma-bench on the 31B shape, random weights (BENCH_TIMEOUT, default 420 s)
#   integration                 `test`, attention_test, then the product path on the demo model:
#                               gemma-generate and gemma-serve (CUDA) vs the golden greedy ids,
#                               gemma-loadgen through the server, a SIGTERM drain
#   attention [token counts]    attention_test, then attention-bench --configs (default 8192,32768,131072)
#   fp8                         the FP8 weight path: kernels, quality, GEMV bench, gemma-bench --weights fp8
#   int4                        the int4 (W4A16) weight path: kernels, quality, GEMV bench, gemma-bench
#                               --weights int4 against --weights fp8
#   int4-quick                  the int4 path in ~2 minutes, for a short lease: the batch-1 W4A16 kernel tests,
#                               the int4 quality test, gemv-w4a16-bench at a layer's four shapes, gemma-bench
#                               --weights int4 twice; BASE=<bundle> alternates the two benches with that
#                               bundle's binaries (each with its own fresh tuning)
#   int4-profile                Nsight Compute on one batch-1 W4A16 tiling (TILING, default xc2-b1-t1s8k4)
#                               at gate|up's and o_proj's shapes: issue, warps, stalls, instructions
#   wgmma [kernel|engine]       the wgmma FP8 linear: kernel tests, sanitizers, bench (kernel, the
#                               default; RACECHECK=1 adds racecheck), or the engine's use of it (engine)
#   profile                     read-bw-bench, then a batch-1 decode under nsys or else ncu (WEIGHTS, default fp8)
#   prefill-profile             Nsight Compute on every kernel of one prefill (WEIGHTS, default bf16; DEPTH,
#                               default 8192), summed per kernel name
#   decode-attention-profile    Nsight Compute on the decode attention kernels where they are furthest
#                               from the read ceiling (E4M3 global at batch 1 and depth 131 072, E4M3
#                               sliding at batch 64 and depth 1 024): throughput, stalls, instruction mix
#   serve [concurrency...]      gemma-serve on the 31B shape measured by gemma-loadgen (default 1 8 32 64;
#                               IN, OUT_LEN, WAVES, WAVES_TOP, SAMPLED, WEIGHTS, KV, PROTOCOL, SLOTS, GPU_MEM,
#                               STEP_TOKENS: a number, or auto for the server's default)
#   long-context                time to first token of one long prompt through gemma-serve
#                               (CONFIGS, LENGTHS, MAX_CONTEXT, SLOTS, GPU_MEM, REQUEST_TIMEOUT)
#   tp                          tensor parallelism: all-reduce tests (NCCL, one-shot kernel), the TP
#                               backend vs the golden (ranks sharing GPU 0; across GPUs when visible),
#                               all-reduce latency per size
#   realwidth                   the 31B at its real width against transformers' reference
#                               (RW_DIR, RW_LAYERS, RW_TYPES, RW_SKIP_GTEST, RW_SKIP_SERVE, RW_BIG_LAYERS,
#                               RW_BIG_BEFORE_S, RW_BIG_SERVE_BEFORE_S)
# Each subcommand's file under scripts/gpu/ says more.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

cmd=${1:-}
[[ $# -gt 0 ]] && shift

# The build/bin binaries each subcommand runs.
binaries() {
  local b
  case "${1:-}" in
    all | test) b="gpu_kernels_test gpu_fp8_kernels_test gpu_fp8_quality_test gpu_backend_test gpu_head_dim_test
                   gpu_realwidth_test gpu_w4a16_kernels_test gpu_int4_quality_test gpu_comm_test gpu_tp_test"
      [[ $1 == all ]] && b+=" gemma-bench" ;;
    bench) b="gemma-bench" ;;
    integration) b="gpu_kernels_test gpu_fp8_kernels_test gpu_fp8_quality_test gpu_backend_test gpu_head_dim_test
                    attention_test
                    gemma-serve gemma-cli gemma-loadgen gemma-generate" ;;
    attention) b="attention_test attention-bench" ;;
    fp8) b="gpu_fp8_kernels_test gpu_fp8_quality_test gemv-fp8-bench gemma-bench" ;;
    int4) b="gpu_w4a16_kernels_test gpu_int4_quality_test gemv-w4a16-bench gemma-bench read-bw-bench" ;;
    int4-quick) b="gpu_w4a16_kernels_test gpu_int4_quality_test gemv-w4a16-bench gemma-bench" ;;
    int4-profile) b="gemv-w4a16-bench" ;;
    wgmma) b="gpu_fp8_kernels_test gemv-fp8-bench gpu_fp8_quality_test gemma-bench" ;;
    profile) b="read-bw-bench gemma-bench" ;;
    prefill-profile) b="gemma-bench" ;;
    decode-attention-profile) b="attention-bench" ;;
    serve | long-context) b="gemma-serve gemma-cli gemma-loadgen" ;;
    realwidth) b="gpu_realwidth_test gemma-generate gemma-serve gemma-cli" ;;
    tp) b="gpu_comm_test gpu_tp_test allreduce-bench" ;;
    *) echo "gpu.sh binaries: unknown subcommand '${1:-}'" >&2; return 2 ;;
  esac
  for x in $b; do printf 'build/bin/%s ' "$x"; done
  echo
}

case "$cmd" in
  binaries) binaries "$@"; exit ;;
  "" | -h | --help | help) usage; exit 0 ;;
esac

source "$here/gpu/common.sh"
case "$cmd" in
  all | test | bench | integration) source "$here/gpu/tests.sh" ;;
  attention | fp8 | wgmma | profile | prefill-profile | decode-attention-profile) source "$here/gpu/kernels.sh" ;;
  serve | long-context) source "$here/gpu/serve.sh" ;;
  realwidth) source "$here/gpu/realwidth.sh" ;;
  int4 | int4-quick | int4-profile) source "$here/gpu/int4.sh" ;;
  tp) source "$here/gpu/tp.sh" ;;
  *) echo "gpu.sh: unknown subcommand '$cmd'" >&2; usage >&2; exit 2 ;;
esac
"cmd_${cmd//-/_}" "$@"
