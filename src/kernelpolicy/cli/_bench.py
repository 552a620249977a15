"""``kernelpolicy bench``: time and check the decision's candidates on this GPU."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Final

from .._numbers import ascii_int, flag_int
from ..deployment.serve import add_vllm_options
from ..errors import UsageError
from ..facts.keys import DECIDED_PATHS
from ._common import add_fact_options, facts_from_args, load_policy_from_args, output_file, write_output

__all__ = ["add_parser", "run"]

_PATHS = tuple(DECIDED_PATHS)
#: The KV-cache dtypes the attention runners hold (`--kv-cache-dtype`); others are not measured.
_KV_DTYPES: Final = {"auto": "bf16", "bfloat16": "bf16", "fp8": "fp8", "fp8_e4m3": "fp8"}
#: The largest report ``--report`` reads (the H200 reports are 20-60 kB).
MAX_REPORT_BYTES: Final = 16_000_000


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [ascii_int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} `{text}`: expected comma-separated positive integers") from None
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{what} `{text}`: expected comma-separated positive integers")
    return values


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="time and check the decision's kernels on this GPU, on the model's real layer shapes",
        description="Run every candidate the decision calls valid (with --all also the ones it rules out) on the"
        " deployment's layer shapes per rank, check each output against a float reference, time the correct ones and"
        " say how much the decision's choice loses to the fastest. Runs inside the engine's environment, on a GPU.",
    )
    add_fact_options(p)
    for action in p._actions:  # bench measures this machine: --gpu defaults to it
        if action.dest == "gpu":
            action.required, action.default = False, "auto"
    add_vllm_options(p)
    p.add_argument(
        "--paths",
        default="dense,moe,router",
        help="paths to measure (default: dense,moe,router; attention: decode at 1k, 8k, 32k tokens of context and"
        " prefill, in the --kv-cache-dtype of the deployment)",
    )
    p.add_argument(
        "--m", default="1,16,128,1024,4096", metavar="M,...", help="token counts (default: 1,16,128,1024,4096)"
    )
    p.add_argument("--layers", metavar="NAME,...", help="only these layers (vLLM module names, e.g. qkv_proj,o_proj)")
    p.add_argument("--all", action="store_true", help="also run the candidates the rules rule out")
    p.add_argument("--only", metavar="BACKEND,...", help="only these candidates (backend ids)")
    p.add_argument("--passes", type=flag_int, default=3, help="timing passes per cell (default 3)")
    p.add_argument("--reps", type=flag_int, default=20, help="timed calls per pass (default 20)")
    p.add_argument("--warmup", type=flag_int, default=5, help="untimed units before each pass (default 5)")
    p.add_argument(
        "--mode",
        choices=("engine", "graph", "eager"),
        default="engine",
        help="engine (default): time M up to --graph-max-m as CUDA-graph replays, as vLLM captures them, larger M"
        " eager; graph or eager: every M so",
    )
    p.add_argument(
        "--graph-max-m",
        type=flag_int,
        default=512,
        help="the largest M the engine captures in a CUDA graph (vLLM 0.26's default for `vllm serve`: 512)",
    )
    p.add_argument(
        "--plan",
        action="store_true",
        help="print the shapes and candidates and stop (no GPU needed; decided for sm90 unless --gpu names one)",
    )
    p.add_argument(
        "--report",
        metavar="FILE",
        action="append",
        help="render a saved `bench --json` report instead of measuring (no GPU needed); given again, the runs"
        " (separate processes of one plan) are combined into one measurement, their noise included",
    )
    p.add_argument("--emit-policy", metavar="FILE", help="write an operator policy layer from the measurement")
    p.add_argument("--threshold", type=float, default=0.03, help="--emit-policy: loss above which to prefer (0.03)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (kernelpolicy.bench/1)")
    p.set_defaults(run=run)


def _plan_text(model: str, layers: list[Any], candidates: dict[str, list[Any]], decision: Any) -> str:
    lines = [f"bench plan for {model}"]
    for path, cands in candidates.items():
        chosen = decision.paths[path].backend
        names = ", ".join(f"{c.backend}{'' if c.valid else ' (ruled out by ' + c.rule + ')'}" for c in cands)
        lines.append(f"{path:<7} decision {chosen}; candidates {names}")
        for layer in (x for x in layers if x.path == path):
            lines.append(f"  {layer.label()}{'  [' + layer.note + ']' if layer.note else ''}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..bench.gpu import parallel_size
    from ..bench.protocol import Settings
    from ..bench.run import candidates_of
    from ..bench.shapes import attention_layers, layer_shapes
    from ..decision import with_provenance
    from ..deployment.serve import hub_options
    from ..facts.model import locate_model
    from ..resolver import resolve

    _check_outputs(args)
    if args.report is not None:
        return _replay(args)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    bad = [p for p in paths if p not in _PATHS]
    if bad or not paths:
        raise UsageError(f"--paths `{args.paths}`: expected some of {', '.join(_PATHS)}")
    ms = _ints(args.m, "--m")
    if min(args.passes, args.reps) < 1 or args.warmup < 0:
        raise UsageError("--passes and --reps must be at least 1, --warmup at least 0")
    policy = load_policy_from_args(args)
    if args.gpu == "auto" and args.plan:
        args.gpu = "sm90"  # the plan needs no GPU: decide as for Hopper unless told
    facts = facts_from_args(args, policy)
    if not args.model:
        raise UsageError("bench needs --model (or a serve line): the layer shapes come from its config.json")
    decision = with_provenance(resolve(facts, policy), policy, args.model)
    config = locate_model(args.model, policy.models, hub_options(args)).config
    tp, ep = parallel_size(facts.values.get("deploy.tp")), parallel_size(facts.values.get("deploy.ep"))
    layers = [x for x in layer_shapes(config, model=args.model, tp=tp, ep=ep) if x.path in paths]
    if "attention" in paths:
        kv = str(facts.values.get("deploy.kv_cache_dtype") or "auto")
        if kv not in _KV_DTYPES:
            raise UsageError(f"--kv-cache-dtype `{kv}`: bench measures attention with a BF16 or FP8 (e4m3) cache")
        layers += attention_layers(config, model=args.model, tp=tp, kv_dtype=_KV_DTYPES[kv])
    if args.layers:
        wanted = {x.strip() for x in args.layers.split(",")}
        layers = [x for x in layers if x.name in wanted]
    if not layers:
        raise UsageError(
            f"`{args.model}` has no layer on --paths `{args.paths}`"
            + (f" named `{args.layers}`" if args.layers else "")
        )
    candidates = {
        p: candidates_of(decision, policy, p, include_rejected=args.all)
        for p in paths
        if any(x.path == p for x in layers)
    }
    if args.only:
        only = {x.strip() for x in args.only.split(",") if x.strip()}
        known = {c.backend for cs in candidates.values() for c in cs}
        if not only & known:
            raise UsageError(
                f"--only `{args.only}`: none of these is a candidate here (candidates: {', '.join(sorted(known))})"
            )
        candidates = {p: [c for c in cs if c.backend in only] for p, cs in candidates.items()}
    if args.plan:
        sys.stdout.write(_plan_text(args.model, layers, candidates, decision) + "\n")
        return 0
    from ..bench.gpu import bench_on_gpu

    report = bench_on_gpu(
        model=args.model,
        decision=decision,
        layers=layers,
        ms=ms,
        candidates=candidates,
        settings=Settings(
            warmup=args.warmup, reps=args.reps, passes=args.passes, mode=args.mode, graph_max_m=args.graph_max_m
        ),
        quiet=args.json,
    )
    return _output(report, args)


def _schema_ref(target: Path) -> str | None:
    """The rules schema as a path relative to *target*'s folder, where a ``schemas/`` folder above it
    has one (a repository's ``policy/``), else None: a path valid only in another tree is not written."""
    from ..tools.fmt import find_schema

    found = find_schema(target)
    return None if found is None else Path(os.path.relpath(found, target.resolve().parent)).as_posix()


def _output(report: Any, args: argparse.Namespace, *, replay: bool = False) -> int:
    """Print *report*; 1 when a measured candidate a shipped rule calls valid failed (0 when *replay*:
    re-rendering a saved report measures nothing, its failures are in the text)."""
    from ..bench.emit import render_policy
    from ..bench.report import render_text

    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=1) + "\n")
    else:
        sys.stdout.write(render_text(report, saved=replay) + "\n")
    if args.emit_policy is not None:  # whole or not at all: an old file is kept when the write fails
        target = Path(args.emit_policy)
        text = render_policy(report, threshold=args.threshold, schema=_schema_ref(target))
        write_output("--emit-policy", target, text)
    if replay:
        return 0
    return 1 if any(f.contradicts_shipped for f in report.failures()) else 0


def _replay(args: argparse.Namespace) -> int:
    from .._files import ReadError, json_guarded, read_bounded
    from ..bench.combine import combine
    from ..bench.report import Report

    reports = []
    for name in args.report:
        try:  # bounded: a FIFO, /dev/stdin on an idle pipe or /dev/zero is refused at once
            raw = read_bounded(name, MAX_REPORT_BYTES)
        except ReadError as exc:
            raise UsageError(f"`{name}`: cannot be read ({exc.reason})") from None
        try:
            reports.append(Report.from_json(json_guarded(raw)))
        except ReadError as exc:
            raise UsageError(f"`{name}`: not a bench report: {exc.reason}") from None
        except (ValueError, KeyError, TypeError) as exc:
            what = f"missing `{exc.args[0]}`" if isinstance(exc, KeyError) else str(exc)
            raise UsageError(f"`{name}`: not a bench report: {what}") from None
    try:
        report = combine(reports)
    except ValueError as exc:
        raise UsageError(f"--report: {exc}") from None
    return _output(report, args, replay=True)


def _check_outputs(args: argparse.Namespace) -> None:
    """``--emit-policy`` and ``--threshold``, before anything is measured or read.

    :raises UsageError: an empty name, a FIFO, a folder, the ``--report`` file itself, a
        threshold that is not a finite fraction of at least 0.
    """
    if not (math.isfinite(args.threshold) and args.threshold >= 0):
        raise UsageError(f"--threshold `{args.threshold}`: expected a finite fraction of at least 0 (0.03: 3 %)")
    if args.emit_policy is None:
        return
    target = output_file("--emit-policy", args.emit_policy)
    same = False
    for report in args.report or ():
        with contextlib.suppress(OSError, ValueError):  # a report that is not there: said when it is read
            same = same or (target.exists() and os.path.samefile(target, report))
    if same:
        raise UsageError(f"--emit-policy `{args.emit_policy}` is the --report file: it would be overwritten")
