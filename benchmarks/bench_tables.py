"""Markdown tables of `kernelpolicy bench` reports, for docs/measurements.

usage: python benchmarks/bench_tables.py REPORT.json [REPORT.json ...]

Each report (one run, or several processes combined by ``bench --report A --report B --json``)
becomes one table per path: per layer and M each candidate's median time in us with its spread
(range of every pass of every process / median), the timing mode, the fastest valid candidate and
the choice's loss, marked `~` where it is within the noise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelpolicy.bench.report import Report

SHORT = {
    "flashinfer_deep_gemm": "FDG",
    "deep_gemm": "DG",
    "cutlass": "CUT",
    "triton": "TRI",
    "torch": "TORCH",
    "linear_fp32": "linear32",
}


def _cell(o: object) -> str:
    from kernelpolicy.bench.protocol import Outcome

    assert isinstance(o, Outcome)
    if o.ok and o.seconds is not None:
        return f"{o.seconds * 1e6:.1f} ({(o.spread or 0) * 100:.0f}%)"
    return {"raised": "raised", "wrong": "WRONG", "not_run": "-"}[o.status]


def tables(report: Report) -> str:
    out = [f"**{report.model}** ({report.context.get('machine')}, {report.context.get('date')})", ""]
    for path, cands in report.candidates.items():
        cells = [c for c in report.cells if c.cell.layer.path == path]
        if not cells:
            continue
        ran = [
            c.backend
            for c in cands
            if any(x.outcomes.get(c.backend) and x.outcomes[c.backend].status != "not_run" for x in cells)
        ]
        head = [
            "layer (N x K)",
            "M",
            "mode",
            *(SHORT.get(b, b) + (" (choice)" if b == cells[0].choice else "") for b in ran),
            "fastest valid",
            "choice's loss",
        ]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in cells:
            layer = c.cell.layer
            best, loss = c.best, c.loss
            if loss is None:
                text = "n/a"
            elif loss <= 0:
                text = "**0**"
            else:
                text = f"{loss * 100:.1f}%" + (" ~" if c.beyond_noise is False else "")
            row = [
                f"{layer.name} ({layer.n}x{layer.k})" if path != "moe" else f"{layer.experts} experts",
                str(c.cell.m),
                c.mode or "-",
                *(_cell(c.outcomes[b]) if b in c.outcomes else "-" for b in ran),
                SHORT.get(best.backend, best.backend) if best else "-",
                text,
            ]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    for name in argv:
        report = Report.from_json(json.loads(Path(name).read_text()))
        sys.stdout.write(tables(report) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
