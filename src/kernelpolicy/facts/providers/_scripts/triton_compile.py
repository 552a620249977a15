# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Probe: can this Triton compile for a target, without a GPU (run in a child process).

usage: python triton_compile.py [--targets 90,100,120,121]

Compiles an fp32 add and a bf16 ``tl.dot`` kernel with ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", cap, 32))``; ptxas runs, nothing is launched.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import triton
import triton.language as tl


def report(step: str, **data: object) -> None:
    print("KPROBE " + json.dumps({"step": step, **data}, default=str), flush=True)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b))


KERNELS = {
    "add_fp32": (
        add_kernel,
        {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        {"BLOCK": 128},
    ),
    "dot_bf16": (
        dot_kernel,
        {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "BLOCK": "constexpr"},
        {"BLOCK": 64},
    ),
}


def compile_one(cap: int, name: str) -> dict[str, object]:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn, sig, consts = KERNELS[name]
    t0 = time.monotonic()
    try:
        triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", cap, 32))
    except Exception as exc:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        fatal = [ln for ln in lines if "fatal" in ln or "error" in ln.lower()]
        msg = (fatal or lines or [""])[0].strip()[:400]
        return {
            "status": "error",
            "error": type(exc).__name__,
            "message": msg,
            "seconds": round(time.monotonic() - t0, 3),
        }
    return {"status": "ok", "seconds": round(time.monotonic() - t0, 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="90,100,120,121")
    args = ap.parse_args()
    report("import", status="ok", version=triton.__version__)
    for cap in (int(t) for t in args.targets.split(",")):
        kernels = {name: compile_one(cap, name) for name in KERNELS}
        ok = all(k["status"] == "ok" for k in kernels.values())
        report(f"sm{cap}a", status="ok" if ok else "error", kernels=kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
