#!/bin/bash
# One device call: `kernelpolicy bench` for the catalog's sm90 block-FP8 models on a bare H200.
# Reads what the call carries in .devcarry/ (see docs/measurements/2026-12-03-h200-bench.md):
#   kp/{src,rules,policy,schemas}  kernelpolicy from the branch, run from source
#   wheels/                        pydantic (+ core, annotated-types, typing-*), flashinfer-python 0.6.14, apache-tvm-ffi
#   vsite.tar.xz                   vLLM 0.26.0's vendored DeepGEMM under an empty `vllm` package + vllm's dist-info
#   cstable.so.xz, moe.so.xz       vLLM 0.26.0's _C / _moe_C stable-ABI libraries, sm_90 fatbin entries only
#   tcfg/                          vLLM 0.26.0's H200 block-FP8 Triton configs
# Writes 6 files into $OUT: log.txt, four bench --json reports, extra.tar.gz (warm-up logs, texts, emitted policies)
set -u
C=$(cd "$(dirname "$0")" && pwd)
T=/tmp/kpb; mkdir -p $T/site $T/vs $T/libs
O=${OUT:-$T/out}; mkdir -p "$O" $T/extra
exec > >(tee -a "$O/log.txt") 2>&1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
el "install"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $T/site "$C"/wheels/*.whl || exit 1
tar -xJf "$C/vsite.tar.xz" -C $T/vs
xz -dc "$C/cstable.so.xz" > $T/libs/_C_stable_libtorch.abi3.so
xz -dc "$C/moe.so.xz" > $T/libs/_moe_C_stable_libtorch.abi3.so
export PYTHONPATH=$T/site:$T/vs:$C/kp/src
export KERNELPOLICY_BENCH_VLLM_LIBS=$T/libs/_C_stable_libtorch.abi3.so:$T/libs/_moe_C_stable_libtorch.abi3.so
export KERNELPOLICY_BENCH_TRITON_CONFIGS=$C/tcfg
NVLIB=$(python3 -c "import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$NVLIB:/usr/local/cuda/lib64
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} DG_JIT_CACHE_DIR=$T/dg FLASHINFER_WORKSPACE_BASE=$T/fi FLASHINFER_CUDA_ARCH_LIST=9.0a
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,power.limit --format=csv; nvcc --version | tail -1
  python3 -c 'import sys,torch,triton; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'; } 2>&1
KP="python3 -m kernelpolicy"
el "flashinfer JIT build, and the JIT warm-up of the other kernels (one process per model, one call per cell), in parallel"
( timeout 240 python3 -c "
import torch; from flashinfer.gemm import fp8_blockscale_gemm_sm90 as f
a=torch.randn(4,512,device='cuda',dtype=torch.bfloat16); w=torch.randn(256,512,device='cuda').to(torch.float8_e4m3fn); s=torch.ones(2,4,device='cuda')
print('flashinfer ok', f(a,w,None,s,out_dtype=torch.bfloat16).shape)" > $T/extra/fi_build.txt 2>&1; echo "rc=$?" >> $T/extra/fi_build.txt ) &
PIDS=($!)  # waited for by id: a bare `wait` would also wait for the log's tee
# one warm-up process per layer (nvcc builds DeepGEMM's kernels in parallel), one call per cell
W="deepseek-ai/DeepSeek-V3:fused_qkv_a_proj,gate deepseek-ai/DeepSeek-V3:q_b_proj deepseek-ai/DeepSeek-V3:kv_b_proj
deepseek-ai/DeepSeek-V3:o_proj deepseek-ai/DeepSeek-V3:mlp.gate_up_proj deepseek-ai/DeepSeek-V3:mlp.down_proj
deepseek-ai/DeepSeek-V3:shared_experts.gate_up_proj deepseek-ai/DeepSeek-V3:shared_experts.down_proj
Qwen/Qwen3-32B-FP8:qkv_proj Qwen/Qwen3-32B-FP8:o_proj Qwen/Qwen3-32B-FP8:mlp.gate_up_proj Qwen/Qwen3-32B-FP8:mlp.down_proj
Qwen/Qwen3-30B-A3B-FP8:qkv_proj,o_proj,gate"
i=0
for spec in $W; do
  i=$((i+1))
  ( KERNELPOLICY_BENCH_SKIP=flashinfer timeout 170 nice -n 10 $KP bench --model ${spec%%:*} --layers ${spec#*:} --paths dense,router --all --passes 1 --reps 1 --warmup 0 > $T/extra/warm_$i.txt 2>&1; echo "rc=$?" >> $T/extra/warm_$i.txt ) &
  PIDS+=($!)
done; wait "${PIDS[@]}"
tail -3 $T/extra/fi_build.txt
grep -q "flashinfer ok" $T/extra/fi_build.txt || export KERNELPOLICY_BENCH_SKIP=flashinfer
for f in $T/extra/warm_*.txt; do tail -2 $f; done
tar -czf "$O/extra.tar.gz" -C $T extra
if [ -z "${KERNELPOLICY_BENCH_SKIP:-}" ]; then
  el "FlashInfer's run-time (NVRTC) kernels: one call per layer at M = 1 and 16"
  PIDS=(); i=0
  for spec in $W; do
    i=$((i+1))
    ( timeout 60 $KP bench --model ${spec%%:*} --layers ${spec#*:} --paths dense --only flashinfer_deep_gemm --m 1,16 --passes 1 --reps 1 --warmup 0 > $T/extra/fiwarm_$i.txt 2>&1 ) &
    PIDS+=($!)
  done; wait "${PIDS[@]}"
  tail -3 $T/extra/fiwarm_1.txt
fi
R="DeepSeek-V3-attn:deepseek-ai/DeepSeek-V3:fused_qkv_a_proj,q_b_proj,kv_b_proj,o_proj,gate:85
DeepSeek-V3-mlp:deepseek-ai/DeepSeek-V3:mlp.gate_up_proj,mlp.down_proj,shared_experts.gate_up_proj,shared_experts.down_proj:85
Qwen3-32B-FP8:Qwen/Qwen3-32B-FP8:qkv_proj,o_proj,mlp.gate_up_proj,mlp.down_proj:85
Qwen3-30B-A3B-FP8:Qwen/Qwen3-30B-A3B-FP8:qkv_proj,o_proj,gate:50"
for spec in $R; do
  IFS=: read -r n m layers cap <<< "$spec"
  left=$(( ${KP_DEADLINE:-580} - $(date +%s) + T0 - 12 )); [ $left -lt $cap ] && cap=$left
  [ $cap -lt 20 ] && { el "skip $n: ${cap}s left"; continue; }
  el "bench $n (cap ${cap}s)"
  timeout $cap $KP bench --model $m --layers $layers --paths dense,router --json --emit-policy $T/extra/$n.policy.yaml > "$O/$n.json" 2> $T/extra/bench_$n.txt
  el "rc=$?"
  $KP bench --report "$O/$n.json" > $T/extra/$n.txt 2>&1; tail -12 $T/extra/$n.txt
done
tar -czf "$O/extra.tar.gz" -C $T extra
el "done"
