"""Probe: DeepGEMM's scale-factor layout transform on this GPU (run in a child process).

usage: python deep_gemm_sf.py [--path PACKAGE_DIR] [--steps fp32,ue8m0]

Without --path it imports ``deep_gemm`` as vLLM would; with it, it loads the package in that
folder (vLLM's vendored copy) under the name ``deep_gemm`` without importing vLLM.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

UNKNOWN_SF = "Unknown SF transformation"


def report(step: str, **data: object) -> None:
    print("KPROBE " + json.dumps({"step": step, **data}, default=str), flush=True)


def load(path: str | None) -> Any:
    if path is None:
        return importlib.import_module("deep_gemm")
    folder = Path(path)
    spec = importlib.util.spec_from_file_location(
        "deep_gemm", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"no package in `{folder}`")
    module = importlib.util.module_from_spec(spec)
    sys.modules["deep_gemm"] = module
    spec.loader.exec_module(module)
    return module


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else "")[:400]


def case(step: str, fn: Any) -> None:
    import torch

    t0 = time.monotonic()
    try:
        out = fn()
        torch.cuda.synchronize()
    except Exception as exc:
        msg = first_line(exc)
        status = "unsupported" if UNKNOWN_SF in str(exc) else "error"
        report(
            step,
            status=status,
            error=type(exc).__name__,
            message=msg,
            seconds=round(time.monotonic() - t0, 3),
        )
        return
    report(
        step,
        status="ok",
        dtype=str(out.dtype),
        shape=list(out.shape),
        stride=list(out.stride()),
        seconds=round(time.monotonic() - t0, 3),
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--path")
    ap.add_argument("--steps", default="fp32,ue8m0")
    args = ap.parse_args()
    t0 = time.monotonic()
    try:
        import torch

        dg = load(args.path)
    except Exception as exc:
        report("import", status="error", error=type(exc).__name__, message=first_line(exc))
        return 0
    cap = torch.cuda.get_device_capability(0) if torch.cuda.is_available() else None
    report(
        "import",
        status="ok",
        file=getattr(dg, "__file__", None),
        version=getattr(dg, "__version__", None),
        torch=torch.__version__,
        cuda_available=torch.cuda.is_available(),
        capability=list(cap) if cap else None,
        device=torch.cuda.get_device_name(0) if cap else None,
        seconds=round(time.monotonic() - t0, 3),
    )
    if cap is None:
        return 0
    transform = dg.transform_sf_into_required_layout
    steps = set(args.steps.split(","))
    if "fp32" in steps:
        # the SM90 layout: FP32 scales, per-token (1, 128) groups, no UE8M0 cast
        sf32 = torch.rand((256, 4), device="cuda", dtype=torch.float32)
        case("fp32", lambda: transform(sf32, 256, 512, (1, 128), disable_ue8m0_cast=True))
    if "ue8m0" in steps:
        # the SM100/SM120 layout (DeepGEMM PR #403's case): FP32 scales packed to UE8M0
        sf = torch.ones((4, 128, 8), device="cuda", dtype=torch.float32)
        case(
            "ue8m0",
            lambda: transform(sf, 128, 256, (1, 1, 32), num_groups=4, is_sfa=False, disable_ue8m0_cast=False),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
