"""``kernelpolicy vllm audit``, as a library: what vLLM chose in a probe of one deployment beside
the decision, as a report (JSON-ready) and as the terminal shows it. The command line runs the
probe and prints; the conformance sweep (:mod:`.conformance`) judges many cells the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ...facts.keys import PATHS
from .conformance import kp_choice, native_choice

if TYPE_CHECKING:
    from ...decision import Decision
    from .conformance import Difference
    from .testing import NativeChoices

__all__ = ["SCHEMA", "audit_report", "probe_failure", "render_report", "whole_error"]

#: The schema of :func:`audit_report` (``kernelpolicy schema vllm-audit``).
SCHEMA: Final = "kernelpolicy.vllm-audit/1"
#: the paths the audit compares (attention: the selector's answer for the decoder layers)
_PATHS: Final = PATHS


def whole_error(text: str) -> str:
    """vLLM's whole error: the message, then the traceback's last frames, indented."""
    lines = [x.rstrip() for x in text.strip().splitlines() if x.strip()]
    return "\n".join(lines[:1] + ["    " + x.strip() for x in lines[1:]])


def probe_failure(native: NativeChoices, decision: Decision) -> str | None:
    """Why the probe's answer cannot be audited (a selection step that the model has failed)."""
    if "probe" in native.errors:
        return native.errors["probe"]
    for path in ("dense", "moe"):
        p = decision.paths.get(path)
        applies = p is not None and p.applicable
        if path in native.errors and applies:
            return native.errors[path]
    return None


def _native_label(native: NativeChoices, path: str) -> str:
    choice = native.backends().get(path)
    if path == "dense" and native.dense is not None:
        raw = native.dense.kernel
        return f"{choice or raw or 'none'}" + (f" ({raw})" if raw and choice else "")
    if path == "moe" and native.moe is not None:
        if native.moe.backend is None:
            return f"n/a ({native.moe.reason})" if native.moe.reason else "none"
        return f"{choice or native.moe.backend} ({native.moe.backend})"
    if path == "router" and native.router is not None:
        if native.router.backend is None:
            return f"n/a ({native.router.reason})" if native.router.reason else "none"
        return str(native.router.backend)
    if path == "attention" and native.attention is not None:
        raw = native.attention.backend
        return f"{choice or raw or 'none'}" + (f" ({raw})" if raw and choice else "")
    if path == "attention" and "attention" in native.errors:
        return "error (see the probe's step)"
    if path == "warmup":
        return choice or "nothing"
    return choice or "none"


def _kp_label(decision: Decision, path: str) -> str:
    if path == "warmup":
        return ", ".join(decision.warmup) or "nothing"
    p = decision.paths[path]
    if not p.applicable:
        return f"n/a ({p.reason})"
    head = p.backend or "NO VALID BACKEND"
    if p.explicit:
        return f"{head} (explicit: {p.explicit})"
    if p.rule:
        return f"{head} ({p.rule})"
    return head


def audit_report(
    model: str,
    plugin_on: bool,
    python: Path,
    native: NativeChoices,
    decision: Decision,
    divergences: Sequence[str],
    differences: Sequence[Difference],
    code: int,
) -> dict[str, Any]:
    """The report of one audit (``vllm audit --json`` prints it; its schema is :data:`SCHEMA`):
    per path what vLLM chose in the probe, what the decision is, and how they differ."""
    by_path = {d.path: d for d in differences}
    paths: dict[str, Any] = {}
    for path in _PATHS:
        diff = by_path.get(path)
        paths[path] = {
            "vllm": native_choice(native, path),
            "vllm_label": _native_label(native, path),
            "kernelpolicy": kp_choice(decision, path),
            "kernelpolicy_label": _kp_label(decision, path),
            "same": diff is None,
            "kind": diff.kind if diff else None,
            "reason": diff.reason if diff else None,
        }
    plugin = native.plugin or {}
    return {
        "schema": SCHEMA,
        "exit": code,
        "consistent": code == 0,
        "vllm": {"version": native.vllm_version, "python": str(python), "platform": native.platform},
        "gpu": {"cc": f"{native.gpu_cc[0]}.{native.gpu_cc[1]}", "sm": decision.facts.get("gpu.sm")},
        "model": {"spec": model, "type": native.model_type},
        "plugin": {
            "enabled": plugin_on,
            "registered": plugin.get("registered"),
            "warnings": list(plugin.get("warnings") or ()),
            "fallbacks": [dict(f) for f in plugin.get("fallbacks") or ()],
            "conflicts": [dict(c) for c in plugin.get("conflicts") or ()],
        },
        "env": dict(native.env),
        "moe_backend": native.moe_backend,
        "paths": paths,
        "divergences": list(divergences),
        "differences": [d.to_dict() for d in differences],
        "probe_errors": dict(native.errors),
        "auto_disable_warning": native.auto_disable_warning,
        "fingerprint": decision.fingerprint,
        "engine": {k: dict(v) for k, v in decision.engine.items()},
        "elapsed_s": round(native.elapsed_s, 1),
    }


def render_report(report: Mapping[str, Any]) -> str:
    """The audit report as the terminal shows it: the table of paths, then what differs and why."""
    v, gpu, model = report["vllm"], report["gpu"], report["model"]
    plugin = "plugin on" if report["plugin"]["enabled"] else "plugin off"
    setup = [f"{k}={val}" for k, val in report["env"].items()]
    if report["moe_backend"]:
        setup.append(f"--moe-backend {report['moe_backend']}")
    out = [
        f"vllm    {v['version']} ({v['python']}), {plugin}" + (", " + " ".join(setup) if setup else ""),
        f"gpu     {gpu['sm']} (simulated, cc {gpu['cc']})",
        f"model   {model['spec']}: {model['type']}",
        "",
    ]
    rows = [("path", "vLLM", "kernelpolicy", "")]
    for path, row in report["paths"].items():
        mark = "same" if row["same"] else ("CONFLICT" if row["kind"] == "conflict" else "differs")
        rows.append((path, row["vllm_label"], row["kernelpolicy_label"], mark))
    w0 = max(len(r[0]) for r in rows)
    w1 = min(max(len(r[1]) for r in rows), 48)
    w2 = min(max(len(r[2]) for r in rows), 48)
    out += [f"{a:<{w0}}  {b:<{w1}}  {c:<{w2}}  {d}".rstrip() for a, b, c, d in rows]
    for d in report["differences"]:
        out.append(f"  {d['path']}: {d['reason']}")
    out.append("")
    if report["divergences"]:
        out.append("divergences (vLLM's paths disagree with each other):")
        out += [f"  ! {d}" for d in report["divergences"]]
    else:
        out.append("divergences: none")
    for w in report["plugin"]["warnings"]:
        out.append(f"plugin warning: {w}")
    for f in report["plugin"]["fallbacks"]:
        out.append(f"plugin fallback: {f['path']} runs `{f['used']}`, not the decided `{f['decided']}`: {f['reason']}")
    for c in report["plugin"].get("conflicts") or ():
        out.append(
            f"plugin conflict: {c['path']} runs the operator's `{c['operator']}`, not the decided `{c['decided']}`"
            + (f" (rule `{c['rule']}`)" if c.get("rule") else "")
        )
    for step, err in report["probe_errors"].items():
        out.append(f"probe: step `{step}` failed: {whole_error(str(err))}")
    vllm_engine = report["engine"].get("vllm")
    if report["exit"] != 0 and vllm_engine is not None:
        merged = {**report["env"], **dict(vllm_engine.get("env", {}))}
        env = " ".join(f"{k}={val}" for k, val in merged.items())
        cmd = " ".join(x for x in (env, "vllm serve", str(model["spec"]), " ".join(vllm_engine.get("args", ()))) if x)
        out.append("")
        from ..._install import install_command

        out.append(f"to follow kernelpolicy: {install_command('vllm')} (the plugin), or where flags can:")
        out.append(f"  {cmd}")
    n_div, n_conf = len(report["divergences"]), sum(1 for d in report["differences"] if d["kind"] == "conflict")
    verdict = "consistent" if report["exit"] == 0 else f"{n_div} divergence(s), {n_conf} conflict(s)"
    out.append("")
    out.append(f"result  {verdict} (exit {report['exit']}); fingerprint {report['fingerprint']}")
    return "\n".join(out)
