"""Record kernelpolicy's machine facts and raw probe outputs on a GPU machine (device run).

usage: PYTHONPATH=src:... python3 .device-probe/record_h200.py OUTDIR
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bare packages: use only the facts modules, whatever state the rest of the tree is in
for name, sub in (("kernelpolicy", "src/kernelpolicy"), ("kernelpolicy.facts", "src/kernelpolicy/facts")):
    mod = types.ModuleType(name)
    mod.__path__ = [str(ROOT / sub)]
    sys.modules[name] = mod

from kernelpolicy.facts import machine as M  # noqa: E402
from kernelpolicy.facts.providers import (  # noqa: E402
    Context,
    DeepGemmBuildProvider,
    DeepGemmProbeProvider,
    HostProvider,
    PackagesProvider,
    TorchProvider,
    TritonProbeProvider,
    run_script,
)
from kernelpolicy.facts.providers._deep_gemm import find_builds, in_use  # noqa: E402
from kernelpolicy.facts.providers._subprocess import script_path  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
log: list[str] = []


def say(msg: str) -> None:
    print(msg, flush=True)
    log.append(msg)


def dump(name: str, data: object) -> None:
    (out / name).write_text(json.dumps(data, indent=1, default=str) + "\n")
    say(f"wrote {name}")


# 1. NVML as it is, call by call
nv: dict[str, object] = {}
try:
    import pynvml as p

    nv["pynvml_file"] = p.__file__
    p.nvmlInit()
    h = p.nvmlDeviceGetHandleByIndex(0)
    nv.update(
        count=p.nvmlDeviceGetCount(),
        name=p.nvmlDeviceGetName(h),
        cc=list(p.nvmlDeviceGetCudaComputeCapability(h)),
        uuid=p.nvmlDeviceGetUUID(h),
        arch=p.nvmlDeviceGetArchitecture(h),
        memory_total=p.nvmlDeviceGetMemoryInfo(h).total,
        driver=p.nvmlSystemGetDriverVersion(),
        cuda_driver=p.nvmlSystemGetCudaDriverVersion(),
        nvml_version=p.nvmlSystemGetNVMLVersion(),
    )
    p.nvmlShutdown()
except Exception as exc:
    nv["error"] = repr(exc)
nv["torch_imported_in_parent"] = "torch" in sys.modules
dump("nvml.json", nv)

# 2. each probe script as the providers run it, raw
env = dict(os.environ)
builds = find_builds()
dg = in_use(*builds)
runs: dict[str, object] = {"builds": [b.to_json() if b else None for b in builds]}


def record(label: str, argv: list[str], run_env: dict[str, str], timeout: float) -> None:
    t0 = time.monotonic()
    r = run_script(argv, run_env, timeout)
    runs[label] = {"argv": [Path(argv[1]).name, *argv[2:]], "returncode": r.returncode,
                   "timed_out": r.timed_out, "seconds": round(r.seconds, 3),
                   "stdout": r.stdout, "stderr": r.stderr[-6000:]}
    say(f"{label}: rc={r.returncode} timed_out={r.timed_out} {time.monotonic() - t0:.1f}s")


py = sys.executable
dg_args = ["--path", dg.path] if dg and dg.source == "vendored" else []
# a real timeout first: a fresh JIT cache, so the first transform compiles with NVCC
env_cold = {**env, "DG_JIT_CACHE_DIR": "/tmp/dg-cold-jit"}
record("deep_gemm_sf_timeout", [py, script_path("deep_gemm_sf.py"), *dg_args, "--steps", "ue8m0,fp32"], env_cold, 4.0)
env_jit = {**env, "DG_JIT_CACHE_DIR": "/tmp/dg-jit", "DG_JIT_PRINT_COMPILER_COMMAND": "1"}
record("deep_gemm_sf", [py, script_path("deep_gemm_sf.py"), *dg_args, "--steps", "fp32,ue8m0"], env_jit, 400)
record("deep_gemm_sf_warm", [py, script_path("deep_gemm_sf.py"), *dg_args, "--steps", "fp32,ue8m0"], env_jit, 400)
record("torch_info", [py, script_path("torch_info.py")], env, 120)
record("torch_info_capability", [py, script_path("torch_info.py"), "--capability"], env, 120)
record("torch_info_novisible", [py, script_path("torch_info.py"), "--capability"], {**env, "CUDA_VISIBLE_DEVICES": ""}, 120)
record("triton_compile", [py, script_path("triton_compile.py"), "--targets", "90,100,120,121"], {**env, "TRITON_CACHE_DIR": "/tmp/tcache"}, 300)
dump("script-runs.json", runs)

# 3. gather, as `kernelpolicy facts --json --probe` would
cache = Path("/tmp/kp-cache")
t0 = time.monotonic()
m = M.gather(probe=True, cache_dir=cache, env={**env, "DG_JIT_CACHE_DIR": "/tmp/dg-jit"})
say(f"gather(probe=True): {time.monotonic() - t0:.1f}s")
t0 = time.monotonic()
m2 = M.gather(probe=True, cache_dir=cache, env={**env, "DG_JIT_CACHE_DIR": "/tmp/dg-jit"})
say(f"gather(probe=True) again: {time.monotonic() - t0:.2f}s cache={m2.cache.get('status')}")
m3 = M.gather(probe=False, cache_dir=Path("/tmp/kp-cache-novis"), env={**env, "CUDA_VISIBLE_DEVICES": ""})
fallback = (HostProvider(), PackagesProvider(), DeepGemmBuildProvider(), TorchProvider(),
            DeepGemmProbeProvider(), TritonProbeProvider())
m4 = M.gather(probe=False, use_cache=False, providers=fallback, env=env)
dump("machine.json", {"probe": m.to_json(), "cached": m2.to_json(), "novisible": m3.to_json(),
                      "torch_fallback": m4.to_json()})
from kernelpolicy.cli._facts import render_text  # noqa: E402

(out / "facts.txt").write_text(render_text(m) + "\n\n--- CUDA_VISIBLE_DEVICES='' ---\n" + render_text(m3) + "\n")
(out / "log.txt").write_text("\n".join(log) + "\n")
