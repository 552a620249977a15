"""Measurements as knowledge: an operator policy layer written from a bench report.

- a candidate the decision calls valid that raised on some cell: ``deny`` it, severity ``crash``;
  one that gave a wrong product: ``deny``, severity ``accuracy``;
- a path where a valid candidate is faster than the chosen backend beyond the measured noise
  (:func:`~kernelpolicy.bench.combine.preferences`: every pass time of the choice, over every
  repeat and process, above every one of the candidate's, by more than *threshold*) on every M
  from 1 up to some M, ties allowed: ``prefer`` it there, scoped with
  ``deploy.max_num_batched_tokens <= M`` (no fact holds the M of one forward pass; a deployment
  sees every M up to that flag). Never from one process: its noise across processes is unknown.

Each rule is scoped to what was measured (the GPU, the quantisation scheme, the model type and
the TP size where the times depend on the shapes) and cites the machine, the versions and the
date in ``refs``. The layer is an ordinary policy file: ``kernelpolicy check`` proves it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from .report import Failure, Report

__all__ = ["policy_layer", "render_policy"]


#: What a comment line must not hold: a line break of any kind YAML knows (``\n``, ``\r``, NEL,
#: U+2028, U+2029), other control characters, and lone surrogates (no file encoding writes them).
_NOT_IN_A_COMMENT: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _comment(value: object, limit: int = 200) -> str:
    """*value* as text for one comment line: a report's ``model`` of ``x\nimplies: ...`` must
    not start a live line of the emitted policy; long text is cut."""
    text = _NOT_IN_A_COMMENT.sub(lambda m: f"\\u{ord(m.group()):04x}", str(value))
    return text if len(text) <= limit else text[:limit] + "..."


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_.]+", "-", text.lower()).strip("-")


def _refs(report: Report) -> list[str]:
    ctx = report.context
    refs = [f"kernelpolicy bench on {ctx.get('machine', '?')}, {ctx.get('date', '?')}"]
    refs += [f"{name} {version}" for name, version in (ctx.get("versions") or {}).items()]
    return refs


def _scope(report: Report, *, shapes: bool) -> dict[str, Any]:
    facts: Mapping[str, Any] = report.context.get("facts") or {}
    keys = ["gpu.sm", "quant.scheme", "model.type"] + (["deploy.tp"] if shapes else [])
    return {k: facts[k] for k in keys if facts.get(k) is not None}


def _deny_rules(report: Report) -> list[dict[str, Any]]:
    by: dict[tuple[str, str, str], list[Failure]] = {}
    for f in report.failures():
        if f.candidate.valid:
            by.setdefault((f.cell.layer.path, f.outcome.backend, f.outcome.status), []).append(f)
    rules = []
    for (path, backend, status), fails in by.items():
        cells = sorted({f"{f.cell.layer.name}@M={f.cell.m}" for f in fails})
        total = sum(1 for c in report.cells if c.cell.layer.path == path and backend in c.outcomes)
        what = "raised" if status == "raised" else "gave a wrong product"
        ms = sorted({f.cell.m for f in fails})
        because = (
            f"measured: {backend} {what} on {len(fails)} of {total} cells (M in {ms}; {', '.join(cells[:3])}"
            f"{', ...' if len(cells) > 3 else ''}): {fails[0].outcome.detail}"
        )
        scope = _scope(report, shapes=False)
        if fails[0].contradicts_shipped:
            because += f"; contradicts shipped {fails[0].candidate.cite()}"
        rules.append(
            {
                "id": f"bench-{_slug(str(scope.get('gpu.sm', 'gpu')))}-{_slug(backend)}-{path}-{status}",
                "when": scope,
                "paths": [path],
                "deny": backend,
                "severity": "crash" if status == "raised" else "accuracy",
                "because": because,
                "refs": _refs(report),
            }
        )
    return rules


def _prefer_rules(report: Report, threshold: float) -> list[dict[str, Any]]:
    from .combine import preferences, processes_of

    rules = []
    for pref in preferences(report, threshold):
        scope = _scope(report, shapes=True)
        scope["deploy.max_num_batched_tokens"] = f"<= {pref.up_to}"
        wins = ", ".join(f"M={v.m} {(v.gain or 0.0) * 100:+.1f}%" for v in pref.verdicts if v.verdict == "faster")
        ties = [v.m for v in pref.verdicts if v.verdict == "tie"]
        rules.append(
            {
                "id": "-".join(
                    ("bench", _slug(str(scope.get("gpu.sm", "gpu"))), _slug(str(scope.get("model.type", "-"))))
                )
                + f"-{pref.path}-{_slug(pref.backend)}-upto-{pref.up_to}",
                "when": scope,
                "paths": [pref.path],
                "prefer": [pref.backend, pref.choice],
                "because": (
                    f"measured on {report.model}: {pref.backend} is faster than {pref.choice} beyond the noise"
                    f" ({processes_of(report)} processes) at {wins}"
                    + (f", within it at M in {ties}" if ties else "")
                    + f"; measured at M = 1..{pref.up_to} only, the M between them assumed to follow"
                ),
                "refs": _refs(report),
            }
        )
    return rules


def policy_layer(report: Report, *, threshold: float = 0.03) -> dict[str, Any]:
    """The operator policy layer (a rule-file mapping) that *report*'s measurements support."""
    return {"rules": _deny_rules(report) + _prefer_rules(report, threshold)}


def render_policy(report: Report, *, threshold: float = 0.03, schema: str | None = None) -> str:
    """:func:`policy_layer` as the text of a policy file; *schema* the ``$schema`` reference valid
    where the file is written (None: no reference, and the line that says how to get one)."""
    import yaml

    layer = policy_layer(report, threshold=threshold)
    ref = (
        f"# yaml-language-server: $schema={schema}\n"
        if schema
        else "# editors: `kernelpolicy schema --write DIR` writes rules.schema.json; name it in a $schema line\n"
    )
    head = (
        ref + f"# Written by `kernelpolicy bench --emit-policy` for {_comment(report.model)} on"
        f" {_comment(report.context.get('machine', '?'))} ({_comment(report.context.get('date', '?'))}).\n"
        "# An operator policy layer: pass it with --policy or put it in policy/; `kernelpolicy check` proves it.\n"
    )
    from .combine import processes_of

    if processes_of(report) < 2:
        head += "# one process: no order is preferred (the noise across processes is not measured)\n"
    if not layer["rules"]:
        return head + "# the measurement contradicts no rule and changes no order\nrules: []\n"
    return head + yaml.safe_dump(layer, sort_keys=False, width=100, allow_unicode=True)
