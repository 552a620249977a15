"""Probe: what the installed torch was built for (run in a child process).

usage: python torch_info.py [--capability]

Reads the version, CUDA version and SASS arch list; none of these initialises CUDA. With
--capability it also asks for device 0's capability, which does (the GPU fallback when NVML
is not available).
"""

from __future__ import annotations

import argparse
import json
import sys


def report(step: str, **data: object) -> None:
    print("KPROBE " + json.dumps({"step": step, **data}, default=str), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--capability", action="store_true")
    args = ap.parse_args()
    try:
        import torch
    except Exception as exc:
        report("import", status="error", error=type(exc).__name__, message=str(exc)[:400])
        return 0
    cuda = torch.version.cuda
    archs: list[str] = []
    if cuda is not None:
        archs = list(torch.cuda.get_arch_list())
    report(
        "import",
        status="ok",
        version=torch.__version__,
        cuda=cuda,
        arch_list=archs,
        available=bool(cuda) and torch.cuda.is_available(),
        device_count=torch.cuda.device_count() if cuda else 0,
        initialized=torch.cuda.is_initialized(),
    )
    if args.capability and cuda is not None:
        try:
            major, minor = torch.cuda.get_device_capability(0)
            name = torch.cuda.get_device_name(0)
        except Exception as exc:
            report("capability", status="error", error=type(exc).__name__, message=str(exc)[:400])
        else:
            report("capability", status="ok", cc=[major, minor], name=name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
