#!/bin/bash
# Follow-up call: the torch block-FP8 candidate called as vLLM calls it (M padded to a multiple of 4),
# beside the bare call and CUTLASS, at small M on every shape of the three models.
set -u
C=$(cd "$(dirname "$0")" && pwd); T=/tmp/kpb; mkdir -p $T/site $T/vs $T/libs; O=${OUT:-$T/out}; mkdir -p "$O"
exec > >(tee -a "$O/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $T/site "$C"/wheels/*.whl || exit 1
tar -xJf "$C/vsite.tar.xz" -C $T/vs; xz -dc "$C/cstable.so.xz" > $T/libs/_C_stable_libtorch.abi3.so
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PYTHONPATH=$T/site:$T/vs:$C/kp/src KERNELPOLICY_BENCH_VLLM_LIBS=$T/libs/_C_stable_libtorch.abi3.so
for m in deepseek-ai/DeepSeek-V3 Qwen/Qwen3-32B-FP8 Qwen/Qwen3-30B-A3B-FP8; do
  n=${m##*/}
  timeout 60 python3 -m kernelpolicy bench --model $m --paths dense --only torch,cutlass --m 1,2,3,4,5,16 --json > "$O/$n.padded.json" 2> "$O/$n.padded.err"
  echo "$n rc=$?"; python3 -m kernelpolicy bench --report "$O/$n.padded.json" | sed -n '5,20p'
done
KERNELPOLICY_BENCH_TORCH_NO_PAD=1 timeout 60 python3 -m kernelpolicy bench --model Qwen/Qwen3-30B-A3B-FP8 --paths dense --only torch --m 1,2,3,4,5,8,12,16 --json > "$O/bare.json" 2>/dev/null
python3 -m kernelpolicy bench --report "$O/bare.json" | sed -n '5,30p'
