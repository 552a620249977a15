"""Torch facts from a child process: its SASS arch list, and the GPU when NVML could not tell."""

from __future__ import annotations

from ._base import Context, Cost, ProviderResult
from ._gpu import capability_facts, torch_arch_ok
from ._locate import module_dir
from ._subprocess import interpret, script_path

__all__ = ["TorchProvider", "apply_torch_report"]


def apply_torch_report(
    res: ProviderResult,
    info: dict[str, object],
    cap: dict[str, object] | None,
    known_cc: str | None,
) -> None:
    """Pure: turn the child's reports into facts on *res*."""
    archs = info.get("arch_list")
    arch_list = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    if arch_list:
        res.put("torch.cuda_archs", [a for a in arch_list if a.startswith("sm_")], "torch")
    elif info.get("cuda"):
        res.notes.append("torch: empty arch list (torch <= 2.12 lists none without a visible GPU)")
    cc = known_cc
    cc_pair = cap.get("cc") if cap is not None else None
    if cap is not None and cap.get("status") == "ok" and isinstance(cc_pair, list):
        major, minor = int(cc_pair[0]), int(cc_pair[1])
        for key, value in capability_facts(major, minor).items():
            res.put(key, value, "torch")
        res.put("gpu.name", cap.get("name"), "torch")
        res.put("gpu.count", info.get("device_count"), "torch")
        res.raw["device"] = {"name": cap.get("name"), "cc": [major, minor]}
        cc = f"{major}.{minor}"
    elif cap is not None:
        res.notes.append(f"torch: no GPU ({cap.get('error')}: {cap.get('message')})")
    if cc is not None and arch_list:
        major, minor = (int(x) for x in cc.split("."))
        res.put("torch.arch_ok", torch_arch_ok(arch_list, major, minor), "torch")


class TorchProvider:
    name = "torch"
    cost: Cost = "subprocess"
    provides = (
        "torch.cuda_archs",
        "torch.arch_ok",
        # the fallback when NVML found no GPU
        "gpu.sm",
        "gpu.family",
        "gpu.cc",
        "gpu.name",
        "gpu.count",
        "gpu.has_tcgen05",
    )

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        if module_dir("torch") is None:
            res.notes.append("torch: not installed")
            return res
        known_cc = ctx.known.get("gpu.cc")
        # the fallback only when NVML could not answer at all: when it worked (a driver
        # version is known) and found no visible GPU, there is none
        need_gpu = (
            known_cc is None and ctx.known.get("driver.version") is None and ctx.known.get("cuda.version") is not None
        )
        argv = [ctx.python, script_path("torch_info.py"), *(["--capability"] if need_gpu else [])]
        run = ctx.runner(argv, dict(ctx.env), min(ctx.timeout_s, 120.0))
        out = interpret(run, "torch probe")
        res.raw["run"] = {
            "argv": argv[1:],
            "ended": out.ended,
            "detail": out.detail,
            "steps": list(out.steps),
            "seconds": round(run.seconds, 3),
        }
        info = out.step("import")
        if info is None or info.get("status") != "ok":
            why = out.detail or f"{(info or {}).get('error')}: {(info or {}).get('message')}"
            res.notes.append(f"torch: {why}")
            return res
        apply_torch_report(
            res,
            info,
            out.step("capability") if need_gpu else None,
            known_cc if isinstance(known_cc, str) else None,
        )
        if need_gpu and "gpu.cc" in res.values:
            res.notes.append("gpu: from torch (NVML was not available); this initialised CUDA in a child")
        return res
