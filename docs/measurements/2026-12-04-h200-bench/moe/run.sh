#!/bin/bash
# One device call: `kernelpolicy bench --paths moe` for DeepSeek-V3 and Qwen3-30B-A3B-FP8 on a bare H200.
# Run from the repository root; reads what the call carries in $KP_CARRY (default .devcarry/):
#   kp/{src,rules,policy,schemas} kernelpolicy from the branch, run from source
#   wheels/                  pydantic (+ core, annotated-types, typing-*)
#   vsite.tar.xz             vLLM 0.26.0's vendored DeepGEMM under an empty `vllm` package + vllm's dist-info
#   cstable.so.xz, moe.so.xz vLLM 0.26.0's _C / _moe_C stable-ABI libraries, sm_90 fatbin entries only
#   fused_moe.py             vLLM 0.26.0's fused_moe.py (bench loads its Triton kernel's source from it)
#   tcfg/                    vLLM 0.26.0's H200 block-FP8 fused-MoE Triton configs
# Writes into $OUT: log.txt, one bench --json report per model, extra.tar.gz (warm-up logs, texts, policies)
set -u
C=$(cd "${KP_CARRY:-.devcarry}" && pwd)
T=/tmp/kpm; mkdir -p $T/site $T/vs $T/libs $T/extra
O=${OUT:-$T/out}; mkdir -p "$O"
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
export KERNELPOLICY_BENCH_TRITON_CONFIGS=$C/tcfg KERNELPOLICY_BENCH_VLLM_FUSED_MOE=$C/fused_moe.py KERNELPOLICY_BENCH_SKIP=flashinfer
NVLIB=$(python3 -c "import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$NVLIB:/usr/local/cuda/lib64
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} DG_JIT_CACHE_DIR=$T/dg
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,power.limit --format=csv; nvcc --version | tail -1
  python3 -c 'import sys,torch,triton; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'; } 2>&1
KP="python3 -m kernelpolicy"
M=${KP_M:-1,16,128,1024,4096}
el "JIT warm-up (DeepGEMM's grouped kernels, Triton's fused_moe), one process per model and candidate, one call per cell"
PIDS=(); i=0
for model in deepseek-ai/DeepSeek-V3 Qwen/Qwen3-30B-A3B-FP8; do for b in deep_gemm triton; do
  i=$((i+1))
  ( timeout 200 $KP bench --model $model --paths moe --only $b --m $M --passes 1 --reps 1 --warmup 0 > $T/extra/warm_$i.txt 2>&1; echo "rc=$?" >> $T/extra/warm_$i.txt ) &
  PIDS+=($!)
done; done; wait "${PIDS[@]}"
for f in $T/extra/warm_*.txt; do echo "== $f"; tail -14 $f; done
tar -czf "$O/extra.tar.gz" -C $T extra
# name:model:cap:G=:flags (flags: the serve line's, comma-separated)
R="Qwen3-30B-A3B-FP8-moe:Qwen/Qwen3-30B-A3B-FP8:60:G=:
DeepSeek-V3-moe:deepseek-ai/DeepSeek-V3:90:G=:
Qwen3-30B-A3B-FP8-moe-ep8:Qwen/Qwen3-30B-A3B-FP8:60:G=:--tensor-parallel-size=8,--enable-expert-parallel
DeepSeek-V3-moe-ep8:deepseek-ai/DeepSeek-V3:80:G=:--tensor-parallel-size=8,--enable-expert-parallel"
for spec in $R; do
  IFS=: read -r n m cap g flags <<< "$spec"
  left=$(( ${KP_DEADLINE:-580} - $(date +%s) + T0 - 10 )); [ $left -lt $cap ] && cap=$left
  [ $cap -lt 20 ] && { el "skip $n: ${cap}s left"; continue; }
  el "bench $n (cap ${cap}s; ${flags//,/ })"
  timeout $cap $KP bench --model $m ${flags//,/ } --paths moe --m $M --all --json --emit-policy $T/extra/$n.policy.yaml > "$O/$n.json" 2> $T/extra/bench_$n.txt
  el "rc=$?"; tail -5 $T/extra/bench_$n.txt
  $KP bench --report "$O/$n.json" > $T/extra/$n.txt 2>&1; tail -12 $T/extra/$n.txt
done
tar -czf "$O/extra.tar.gz" -C $T extra
el "done"
