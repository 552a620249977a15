#!/bin/bash
# One device call: `kernelpolicy bench --paths attention` (issue #39 part 2), BF16 and FP8 KV cache,
# every report in two processes, then combined. usage: KP_CARRY=FOLDER bash scripts/bench/run-attention.sh (FOLDER: see scripts/bench/README.md)
# Reads $KP_CARRY/: wheels/ (pydantic..., flashinfer-python 0.6.14, apache-tvm-ffi);
# fa/ (vLLM 0.26.0's vllm_flash_attn/flash_attn_interface.py + _vllm_fa3_C.abi3.so.xz);
# tattn/ (vLLM 0.26.0's triton_unified_attention.py, triton_attention_helpers.py)
set -u
C=$(cd "${KP_CARRY:?name the folder scripts/bench/README.md describes}" && pwd) || exit 2
R=$(cd "$(dirname "$0")/../.." && pwd)  # this repository: kernelpolicy runs from its src/
T=/tmp/kp6; mkdir -p $T/site $T/res $T/fa/kp_fa
O=${OUT:-$T/out}; mkdir -p "$O"
exec > >(tee -a "$O/log.txt") 2>&1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( ${KP_DEADLINE:-560} - $(date +%s) + T0 )); }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [ ! -f $T/installed ]; then
  el "install"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $T/site "$C"/wheels/*.whl || exit 1
  cp "$C/fa/flash_attn_interface.py" $T/fa/kp_fa/; touch $T/fa/kp_fa/__init__.py
  xz -dc "$C/fa/_vllm_fa3_C.abi3.so.xz" > $T/fa/kp_fa/_vllm_fa3_C.abi3.so
  touch $T/installed
fi
export PYTHONPATH=$T/site:$R/src
export KERNELPOLICY_BENCH_VLLM_FA=$T/fa/kp_fa KERNELPOLICY_BENCH_VLLM_TRITON_ATTN=$C/tattn
NVLIB=$(python3 -c "import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$NVLIB:/usr/local/cuda/lib64
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} FLASHINFER_WORKSPACE_BASE=$T/fi FLASHINFER_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.max.sm,power.limit --format=csv
  python3 -c 'import sys,torch,triton; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'; } 2>&1
KP="python3 -m kernelpolicy"
MODEL=${KP_MODEL:-Qwen/Qwen3-32B-FP8}
el "smoke + JIT warm-up (FlashInfer's attention modules, Triton), one process per KV dtype"
PIDS=()
for kv in auto fp8; do
  ( timeout ${KP_WARM:-200} $KP bench --model $MODEL --paths attention --all --kv-cache-dtype $kv --passes 1 --reps 1 --warmup 0 > $T/res/warm_$kv.txt 2>&1; echo "rc=$?" >> $T/res/warm_$kv.txt ) &
  PIDS+=($!)
done; wait "${PIDS[@]}"  # not a bare wait: it would wait for the tee above
cp $T/res/warm_*.txt "$O/"; cat $T/res/warm_auto.txt $T/res/warm_fp8.txt | grep -v "^\s*$" | tail -60
for P in 1 2; do
  for kv in auto fp8; do
    cap=$(( $(left) - 20 )); [ $cap -gt 150 ] && cap=150
    [ $cap -lt 30 ] && { el "skip $kv (process $P): ${cap}s left"; continue; }
    el "bench attention kv=$kv, process $P (cap ${cap}s)"
    timeout $cap $KP bench --model $MODEL --paths attention --all --kv-cache-dtype $kv --passes 3 --reps 10 --warmup 3 --json > $T/res/attn-$kv.p$P.json 2> $T/res/attn-$kv.p$P.err
    el "rc=$?"; tail -3 $T/res/attn-$kv.p$P.err; cp $T/res/attn-$kv.p$P.json $T/res/attn-$kv.p$P.err "$O/" 2>/dev/null
  done
done
for kv in auto fp8; do
  ls $T/res/attn-$kv.p1.json $T/res/attn-$kv.p2.json > /dev/null 2>&1 || { el "$kv: a process is missing"; $KP bench --report $T/res/attn-$kv.p1.json > $T/res/attn-$kv.txt 2>&1; continue; }
  $KP bench --report $T/res/attn-$kv.p1.json --report $T/res/attn-$kv.p2.json --json > $T/res/attn-$kv.json 2> $T/res/attn-$kv.combine.err
  $KP bench --report $T/res/attn-$kv.json > $T/res/attn-$kv.txt 2>&1; cat $T/res/attn-$kv.txt
done
tar -czf "$O/raw-attn.tar.gz" -C $T res
el "done"
