#!/bin/bash
# One device call: `kernelpolicy bench` re-measured as the engine runs the kernels (CUDA-graph replay
# for M <= 512, eager above, the data rotated past the L2), every report run in two processes.
# usage: KP_CARRY=FOLDER bash scripts/bench/run-gemm.sh dense|moe   (FOLDER: see scripts/bench/README.md)
# Reads $KP_CARRY/:
#   wheels/                        pydantic (+ core, annotated-types, typing-*), flashinfer-python 0.6.14, apache-tvm-ffi 0.1.10
#   vsite.tar.xz                   vLLM 0.26.0's vendored DeepGEMM 2.5.0 under an empty `vllm` package + vllm's dist-info
#   cstable.so.xz                  vLLM 0.26.0's _C stable-ABI library, fatbin entries a sm_90 device never selects removed
#   moe90.so.xz                    vLLM 0.26.0's _moe_C, sm_90 fatbin entries only (dsv3_router_gemm)
#   fused_moe.py, tcfg/            vLLM 0.26.0's fused_moe.py (the Triton kernel's source), its H200 block-FP8 configs
# Writes into $OUT: log.txt, raw-<stage>.tar.gz (every process's JSON, the combined JSON and text, the policies)
set -u
STAGE=${1:-dense}
C=$(cd "${KP_CARRY:?name the folder scripts/bench/README.md describes}" && pwd) || exit 2
R=$(cd "$(dirname "$0")/../.." && pwd)  # this repository: kernelpolicy runs from its src/
T=/tmp/kp5; mkdir -p $T/site $T/vs $T/libs $T/res
O=${OUT:-$T/out}; mkdir -p "$O"
exec > >(tee -a "$O/log.txt") 2>&1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( ${KP_DEADLINE:-560} - $(date +%s) + T0 )); }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -f $T/installed ]; then
  el "install"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $T/site "$C"/wheels/*.whl || exit 1
  tar -xJf "$C/vsite.tar.xz" -C $T/vs
  xz -dc "$C/cstable.so.xz" > $T/libs/_C_stable_libtorch.abi3.so
  xz -dc "$C/moe90.so.xz" > $T/libs/_moe_C_stable_libtorch.abi3.so
  touch $T/installed
else
  el "installed already (warm machine)"
fi
export PYTHONPATH=$T/site:$T/vs:$R/src
export KERNELPOLICY_BENCH_VLLM_LIBS=$T/libs/_C_stable_libtorch.abi3.so:$T/libs/_moe_C_stable_libtorch.abi3.so
export KERNELPOLICY_BENCH_TRITON_CONFIGS=$C/tcfg KERNELPOLICY_BENCH_VLLM_FUSED_MOE=$C/fused_moe.py
NVLIB=$(python3 -c "import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$NVLIB:/usr/local/cuda/lib64
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} DG_JIT_CACHE_DIR=$T/dg FLASHINFER_WORKSPACE_BASE=$T/fi FLASHINFER_CUDA_ARCH_LIST=9.0a
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; nvcc --version | tail -1
  python3 -c 'import sys,torch,triton; p=torch.cuda.get_device_properties(0); print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "L2", p.L2_cache_size)'; } 2>&1
KP="python3 -m kernelpolicy"
M=${KP_M:-1,16,128,1024,4096}
PROTO="--passes 3 --reps 10 --warmup 3"
W=$T/res/warm; mkdir -p $W
if [ "$STAGE" = dense ]; then
  el "JIT warm-up: FlashInfer's block-FP8 GEMM module, and DeepGEMM/Triton per layer (eager, one call per cell), in parallel"
  ( timeout 240 python3 -c "
import torch; from flashinfer.gemm import fp8_blockscale_gemm_sm90 as f
a=torch.randn(4,512,device='cuda',dtype=torch.bfloat16); w=torch.randn(256,512,device='cuda').to(torch.float8_e4m3fn); s=torch.ones(2,4,device='cuda')
print('flashinfer ok', f(a,w,None,s,out_dtype=torch.bfloat16).shape)" > $W/fi_build.txt 2>&1; echo "rc=$?" >> $W/fi_build.txt ) &
  PIDS=($!)
  WL="deepseek-ai/DeepSeek-V3:fused_qkv_a_proj,gate deepseek-ai/DeepSeek-V3:q_b_proj deepseek-ai/DeepSeek-V3:kv_b_proj
deepseek-ai/DeepSeek-V3:o_proj deepseek-ai/DeepSeek-V3:mlp.gate_up_proj deepseek-ai/DeepSeek-V3:mlp.down_proj
deepseek-ai/DeepSeek-V3:shared_experts.gate_up_proj deepseek-ai/DeepSeek-V3:shared_experts.down_proj
Qwen/Qwen3-32B-FP8:qkv_proj Qwen/Qwen3-32B-FP8:o_proj Qwen/Qwen3-32B-FP8:mlp.gate_up_proj Qwen/Qwen3-32B-FP8:mlp.down_proj
Qwen/Qwen3-30B-A3B-FP8:qkv_proj,o_proj,gate"
  i=0
  for spec in $WL; do
    i=$((i+1))
    ( KERNELPOLICY_BENCH_SKIP=flashinfer timeout 170 nice -n 10 $KP bench --model ${spec%%:*} --layers ${spec#*:} --paths dense,router --m $M --mode eager --passes 1 --reps 1 --warmup 0 > $W/warm_$i.txt 2>&1; echo "rc=$?" >> $W/warm_$i.txt ) &
    PIDS+=($!)
  done; wait "${PIDS[@]}"
  tail -2 $W/fi_build.txt; for f in $W/warm_*.txt; do tail -1 $f; done
  grep -q "flashinfer ok" $W/fi_build.txt || export KERNELPOLICY_BENCH_SKIP=flashinfer
  el "FlashInfer's run-time (NVRTC) kernels, one call per layer at M = 1 and 16; then a graph-mode smoke cell"
  PIDS=(); i=0
  for spec in $WL; do
    i=$((i+1))
    ( timeout 60 $KP bench --model ${spec%%:*} --layers ${spec#*:} --paths dense --only flashinfer_deep_gemm --m 1,16 --mode eager --passes 1 --reps 1 --warmup 0 > $W/fiwarm_$i.txt 2>&1 ) &
    PIDS+=($!)
  done; wait "${PIDS[@]}"
  timeout 60 $KP bench --model Qwen/Qwen3-30B-A3B-FP8 --layers qkv_proj --paths dense --m 1,1024 --passes 1 --reps 5 --warmup 1 2>&1 | tail -12
  R="DeepSeek-V3-attn:deepseek-ai/DeepSeek-V3:fused_qkv_a_proj,q_b_proj,kv_b_proj,o_proj,gate:dense,router:
DeepSeek-V3-mlp:deepseek-ai/DeepSeek-V3:mlp.gate_up_proj,mlp.down_proj,shared_experts.gate_up_proj,shared_experts.down_proj:dense:
Qwen3-32B-FP8:Qwen/Qwen3-32B-FP8:qkv_proj,o_proj,mlp.gate_up_proj,mlp.down_proj:dense:
Qwen3-30B-A3B-FP8:Qwen/Qwen3-30B-A3B-FP8:qkv_proj,o_proj,gate:dense,router:"
else
  export KERNELPOLICY_BENCH_SKIP=${KERNELPOLICY_BENCH_SKIP:-flashinfer}
  el "JIT warm-up: DeepGEMM's grouped kernels and Triton's fused_moe, one process per model and candidate (eager)"
  PIDS=(); i=0
  for model in deepseek-ai/DeepSeek-V3 Qwen/Qwen3-30B-A3B-FP8; do for b in deep_gemm triton; do
    i=$((i+1))
    ( timeout 200 $KP bench --model $model --paths moe --only $b --m $M --mode eager --passes 1 --reps 1 --warmup 0 > $W/mwarm_$i.txt 2>&1; echo "rc=$?" >> $W/mwarm_$i.txt ) &
    PIDS+=($!)
  done; done; wait "${PIDS[@]}"
  for f in $W/mwarm_*.txt; do tail -3 $f; done
  R="Qwen3-30B-A3B-FP8-moe:Qwen/Qwen3-30B-A3B-FP8::moe:--all
DeepSeek-V3-moe:deepseek-ai/DeepSeek-V3::moe:--all
Qwen3-30B-A3B-FP8-moe-ep8:Qwen/Qwen3-30B-A3B-FP8::moe:--all,--tensor-parallel-size=8,--enable-expert-parallel
DeepSeek-V3-moe-ep8:deepseek-ai/DeepSeek-V3::moe:--all,--tensor-parallel-size=8,--enable-expert-parallel"
fi
for P in 1 2; do
  for spec in $R; do
    IFS=: read -r n m layers paths flags <<< "$spec"
    cap=$(( $(left) - 15 )); [ $cap -gt 110 ] && cap=110
    [ $cap -lt 20 ] && { el "skip $n (process $P): ${cap}s left"; continue; }
    el "bench $n, process $P (cap ${cap}s)"
    timeout $cap $KP bench --model $m ${layers:+--layers $layers} ${flags//,/ } --paths $paths --m $M $PROTO --json > $T/res/$n.p$P.json 2> $T/res/$n.p$P.err
    el "rc=$?"; tail -2 $T/res/$n.p$P.err
  done
done
el "combine the two processes of each report"
for spec in $R; do
  IFS=: read -r n rest <<< "$spec"
  ls $T/res/$n.p1.json $T/res/$n.p2.json > /dev/null 2>&1 || { el "$n: a process is missing"; continue; }
  $KP bench --report $T/res/$n.p1.json --report $T/res/$n.p2.json --json --emit-policy $T/res/$n.policy.yaml > $T/res/$n.json 2> $T/res/$n.combine.err
  $KP bench --report $T/res/$n.json > $T/res/$n.txt 2>&1; tail -4 $T/res/$n.txt
done
tar -czf "$O/raw-$STAGE.tar.gz" -C $T res
el "done"
