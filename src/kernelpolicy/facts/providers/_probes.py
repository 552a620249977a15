"""Live probes on this machine, each in a child with a timeout: DeepGEMM's SF transform
for the present GPU, and Triton compiles for sm_90a/sm_100a/sm_120a/sm_121a."""

from __future__ import annotations

import tempfile

from ..keys import PROBE_OUTCOMES
from ._base import Context, Cost, ProviderResult
from ._capabilities import TRITON_TARGETS
from ._deep_gemm import find_builds, in_use
from ._locate import module_dir
from ._subprocess import ProbeOutcome, interpret, script_path

__all__ = ["DG_STEPS", "DeepGemmProbeProvider", "TritonProbeProvider", "dg_step_outcomes"]

DG_STEPS = ("fp32", "ue8m0")


def dg_step_outcomes(outs: list[ProbeOutcome]) -> dict[str, tuple[str, str]]:
    """Pure: each DeepGEMM step's outcome (one of ``PROBE_OUTCOMES``) and a detail line.

    *outs* are the runs in order (a retry after a crash runs only the steps not reported).
    A step that no run reported takes the way the run that should have reported it ended.
    """
    result: dict[str, tuple[str, str]] = {}
    last = ""
    for out in outs:
        imp = out.step("import")
        if imp is None:  # it died before it could import anything
            ended = out.ended if out.ended != "ok" else "error"
            detail = out.detail or "the probe reported nothing"
            return {s: result.get(s, (ended, detail)) for s in DG_STEPS}
        if imp.get("status") != "ok":
            msg = f"import failed: {imp.get('error')}: {imp.get('message')}"
            return {s: result.get(s, ("error", msg)) for s in DG_STEPS}
        if not imp.get("capability"):
            return {s: result.get(s, ("unavailable", "no CUDA device in the probe")) for s in DG_STEPS}
        for step in DG_STEPS:
            if step in result:
                continue
            rep = out.step(step)
            if rep is not None:
                status = str(rep.get("status"))
                status = status if status in PROBE_OUTCOMES else "error"
                detail = "" if status == "ok" else f"{rep.get('error')}: {rep.get('message')}"
                result[step] = (status, detail)
            elif out.ended in ("crashed", "timeout"):
                result[step] = (out.ended, out.detail)
                break  # the step in flight; later steps were never started by this run
            elif out.ended == "error":
                result[step] = ("error", out.detail)
        last = out.detail
    why = f"not run ({last})" if last else "not run"
    return {s: result.get(s, ("unavailable", why)) for s in DG_STEPS}


class DeepGemmProbeProvider:
    name = "deep_gemm_probe"
    cost: Cost = "probe"
    provides = (
        "deep_gemm.sf_probe_fp32",
        "deep_gemm.sf_probe_ue8m0",
        "deep_gemm.has_sm120_sf_layout",
    )

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        if ctx.known.get("gpu.cc") is None:
            res.notes.append("deep_gemm probe: skipped, no GPU")
            return res
        build = in_use(*find_builds())
        if build is None:
            res.notes.append("deep_gemm probe: skipped, no DeepGEMM installed")
            return res
        base = [ctx.python, script_path("deep_gemm_sf.py")]
        if build.source == "vendored":
            base += ["--path", build.path]
        outs: list[ProbeOutcome] = []
        runs: list[dict[str, object]] = []
        pending = list(DG_STEPS)
        for _attempt in range(2):  # one retry, for the steps after a crash
            argv = [*base, "--steps", ",".join(pending)]
            run = ctx.runner(argv, dict(ctx.env), ctx.timeout_s)
            out = interpret(run, "deep_gemm probe")
            outs.append(out)
            runs.append(
                {
                    "argv": argv[1:],
                    "ended": out.ended,
                    "detail": out.detail,
                    "steps": list(out.steps),
                    "stderr_tail": run.stderr[-2000:],
                    "seconds": round(run.seconds, 3),
                }
            )
            done = {s for s in pending if out.step(s) is not None}
            in_flight = next((s for s in pending if s not in done), None)
            pending = [s for s in pending if s not in done and s != in_flight]
            if out.ended != "crashed" or not pending or out.step("import") is None:
                break
        res.raw["runs"] = runs
        outcome = dg_step_outcomes(outs)
        for step, (status, detail) in outcome.items():
            res.put(f"deep_gemm.sf_probe_{step}", status, "probe")
            if status != "ok":
                on = ctx.known.get("gpu.sm", ctx.known.get("gpu.cc"))
                res.notes.append(f"deep_gemm probe: the {step} scale-factor transform is {status} on {on}: {detail}")
        ue8m0 = outcome["ue8m0"][0]
        if ctx.known.get("gpu.family") == "sm120" and ue8m0 in ("ok", "unsupported"):
            res.put("deep_gemm.has_sm120_sf_layout", ue8m0 == "ok", "probe")
        return res


class TritonProbeProvider:
    name = "triton_probe"
    cost: Cost = "probe"
    provides = tuple(f"triton.{t}_ok" for t in TRITON_TARGETS)

    def collect(self, ctx: Context) -> ProviderResult:
        res = ProviderResult()
        if module_dir("triton") is None:
            res.notes.append("triton probe: skipped, Triton is not installed")
            return res
        caps = ",".join(t[2:-1] for t in TRITON_TARGETS)
        argv = [ctx.python, script_path("triton_compile.py"), "--targets", caps]
        with tempfile.TemporaryDirectory(prefix="kernelpolicy-triton-") as cache:
            # a fresh cache, so ptxas really runs
            env = {**ctx.env, "TRITON_CACHE_DIR": cache}
            run = ctx.runner(argv, env, ctx.timeout_s)
        out = interpret(run, "triton probe")
        res.raw["run"] = {
            "argv": argv[1:],
            "ended": out.ended,
            "detail": out.detail,
            "steps": list(out.steps),
            "stderr_tail": run.stderr[-2000:],
            "seconds": round(run.seconds, 3),
        }
        for target in TRITON_TARGETS:
            rep = out.step(target)
            if rep is None:
                res.notes.append(f"triton probe: {target} not checked ({out.detail or 'no report'})")
                continue
            ok = rep.get("status") == "ok"
            res.put(f"triton.{target}_ok", ok, "probe")
            if not ok:
                kernels = rep.get("kernels")
                msgs = (
                    [str(k.get("message")) for k in kernels.values() if isinstance(k, dict) and k.get("message")]
                    if isinstance(kernels, dict)
                    else []
                )
                res.notes.append(f"triton probe: {target} does not compile: {msgs[0] if msgs else '?'}")
        return res
