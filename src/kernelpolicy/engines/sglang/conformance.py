"""``kernelpolicy sglang audit --matrix``: the conformance sweep of one SGLang release.

Every catalog model on every GPU family runs through SGLang's own resolution and per-layer
dispatch on a simulated GPU (:mod:`kernelpolicy.testing.sglang`) three times: SGLang alone, with
the kernelpolicy plugin, and unpatched with the flags ``kernelpolicy explain --engine
sglang==X.Y.Z`` prints for the decision. Beside each cell kernelpolicy resolves the same
deployment through the one fact pipeline, as ``explain`` does. Per path (dense, MoE):

- ``same``: the layer runs the decision's backend (with the plugin, and with the printed flags);
- ``differs``: it runs another backend the decision does not reject, or a kernel no
  kernelpolicy backend names (a linear whose quant method the naming does not model, or a
  per-call mix such as a tuned Triton tile for some batch sizes), or the plugin decided from
  other facts than ``explain`` (parity);
- ``conflict``: it runs a backend the decision rejects;
- ``unsupported``: the decision finds no backend for a path (a rule of ``unsupported``) and SGLang
  refuses the deployment too;
- ``could not run``: SGLang's own code failed in the simulation (the error is given).

The router path is judged where SGLang's gate shows its tier (the DeepSeek-V2/V3 module from
0.5.20 on); elsewhere the gate picks its kernel in its forward pass and the table shows ``·``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ...facts.keys import DECIDED_PATHS
from .. import conformance as _base
from ..conformance import FAMILIES, deployment_facts, one_line

if TYPE_CHECKING:
    from ...decision import Decision
    from ...policy import Policy
    from .testing import SglangChoices

__all__ = ["CellResult", "render_markdown", "run_matrix", "section_of", "update_document"]

RESULTS: Final = ("same", "differs", "conflict", "unsupported", "could not run")
#: the paths the harness observes in SGLang (attention, issue #39: the backends its resolution sets)
_PATHS: Final = DECIDED_PATHS
#: What the table shows for a router tier SGLang decides inside the gate's forward pass.
_UNSEEN: Final = "·"
#: What the probe reports for a layer no quantization method claims.
_UNQUANTIZED: Final = (None, "NoneType", "UnquantizedLinearMethod", "UnquantizedFusedMoEMethod")


@dataclass(frozen=True)
class CellResult:
    """One model on one GPU: SGLang alone, the decision, with the plugin, with the printed flags."""

    model: str
    family: str
    decision: Decision
    native: SglangChoices
    patched: SglangChoices
    flagged: SglangChoices
    flags: Mapping[str, Any]
    result: str
    reason: str
    parity: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "family": self.family,
            "kernelpolicy": _decided(self.decision),
            "sglang": self.native.to_dict(),
            "with_plugin": self.patched.to_dict(),
            "with_flags": self.flagged.to_dict(),
            "flags": dict(self.flags),
            "result": self.result,
            "reason": self.reason,
            "parity": self.parity,
            "fingerprint": self.decision.fingerprint,
        }


def _decided(decision: Decision) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for path in _PATHS:
        p = decision.paths[path]
        out[path] = (p.backend or "NONE") if p.applicable else None
    return out


def ran(choices: SglangChoices, path: str, moe_ids: Mapping[str, frozenset[str]]) -> tuple[str | None, frozenset[str]]:
    """What a path ran, as SGLang names it, and the kernelpolicy ids that name can be."""
    if path == "attention":
        return _attention_ran(choices)
    if path == "router":
        return choices.router, frozenset({choices.router}) if choices.router else frozenset()
    if path == "dense":
        if choices.dense_function:
            return choices.dense_function, choices.dense_ids
        return choices.dense_method, frozenset()
    runner = choices.moe_runner
    if runner is None:  # a quant method that calls its kernels directly, or none
        return choices.moe_method, frozenset()
    return runner, moe_ids.get(runner, frozenset())


def _attention_ran(choices: SglangChoices) -> tuple[str | None, frozenset[str]]:
    """The attention backend SGLang resolved (``prefill+decode`` where the phases differ) and the
    kernelpolicy id it is (none where the phases run different ids, or the name has none)."""
    from ...releases.sglang.names import attention_id

    prefill, decode = choices.attention
    if prefill is None and decode is None:
        return None, frozenset()
    name = prefill if prefill == decode else f"{prefill}+{decode}"
    ids = {attention_id(prefill), attention_id(decode)}
    return name, frozenset(i for i in ids if i is not None) if len(ids) == 1 else frozenset()


def _failure(choices: SglangChoices, decision: Decision) -> str | None:
    for step in ("resolution", "scheduler", "quantization"):
        if step in choices.errors:
            return f"step `{step}`: {choices.errors[step]}"
    for path in _PATHS:
        if path in choices.errors and decision.paths[path].applicable:
            return f"step `{path}`: {choices.errors[path]}"
    return None


def judge_path(
    choices: SglangChoices, decision: Decision, path: str, moe_ids: Mapping[str, frozenset[str]]
) -> tuple[str, str]:
    """``(result, reason)`` of one path of one run."""
    p = decision.paths[path]
    if not p.applicable or (path == "router" and choices.router is None):
        return "same", ""
    name, ids = ran(choices, path, moe_ids)
    if p.backend in ids:
        return "same", ""
    if path == "attention" and not ids:
        if name is None:
            return "differs", f"attention: SGLang resolved no attention backend (the decision: `{p.backend}`)"
        return "differs", f"attention: SGLang resolved `{name}`, which no kernelpolicy attention backend is"
    if p.backend == "torch" and name in _UNQUANTIZED:  # no quantized linear: what the decision says
        return "same", ""
    if name in _UNQUANTIZED:
        return "differs", f"{path}: SGLang dispatched no quantized {path} layer (the decision: `{p.backend}`)"
    if not ids and path == "dense" and choices.dense_function:  # named, but a per-call mix or no backend id
        return "differs", f"dense: the linear runs `{name}`, which no kernelpolicy backend is; no SGLang hook steers it"
    if not ids:
        return (
            "differs",
            f"{path}: `{name}` picks its kernel per call; kernelpolicy does not model it and no hook steers it",
        )
    why = next((w for w in (p.rejection(i) for i in sorted(ids)) if w), None)
    if why:
        return "conflict", f"{path}: runs `{name}`; {why}"
    return "differs", f"{path}: runs `{name}`, the decision ranks `{p.backend}` first"


def judge(
    patched: SglangChoices, flagged: SglangChoices, decision: Decision, moe_ids: Mapping[str, frozenset[str]]
) -> tuple[str, str, bool | None]:
    """The verdict of one cell (the plugin's and the flags' runs both count)."""
    for label, run in (("with the plugin", patched), ("with the flags", flagged)):
        failure = _failure(run, decision)
        if failure is None:
            continue
        none = [p for p in _PATHS if decision.paths[p].applicable and decision.paths[p].backend is None]
        if none:
            rule = decision.paths[none[0]].rule or "?"
            return "unsupported", f"the decision: no `{none[0]}` backend (`{rule}`); SGLang: {one_line(failure)}", None
        return "could not run", f"{label}: {one_line(failure)}", None
    status = patched.plugin or {}
    fingerprint = status.get("fingerprint")
    parity = None if fingerprint is None else fingerprint == decision.fingerprint
    verdicts = []
    for label, run in (("plugin", patched), ("flags", flagged)):
        for path in _PATHS:
            result, reason = judge_path(run, decision, path, moe_ids)
            if result != "same":
                verdicts.append((result, f"{label}, {reason}"))
    if parity is False:
        verdicts.append(("differs", "the plugin decided from other facts than explain (fingerprints differ)"))
    if parity is None:
        why = "; ".join(status.get("warnings") or ["(no warning)"])
        verdicts.append(("differs", f"the plugin made no decision: {why}"))
    for result in ("conflict", "differs"):
        hits = [reason for r, reason in verdicts if r == result]
        if hits:
            return result, one_line("; ".join(dict.fromkeys(hits))), parity
    return "same", "", parity


def _flag_deployment(base: Any, flags: Mapping[str, Any]) -> Any:
    """*base* with the printed flags as server args and environment (no plugin)."""
    from dataclasses import replace

    from ...releases.sglang.names import FLAG_FIELDS

    args = list(flags.get("args", ()))
    fields = {FLAG_FIELDS[f]: v for f, v in zip(args[::2], args[1::2], strict=True) if f in FLAG_FIELDS}
    return replace(base, args={**base.args, **fields}, env={**base.env, **dict(flags.get("env", {}))}, plugin=False)


def run_matrix(
    python: str | Path,
    policy: Policy,
    models: Sequence[str],
    families: Sequence[str],
    target: Mapping[str, object],
    *,
    timeout: float = 1800.0,
) -> list[CellResult]:
    """Every model on every family, three runs each (SGLang alone, the plugin, the flags)."""
    from ...facts.model import find_model
    from ...releases.sglang.flags import moe_ids_of
    from ...render.flags import engine_flags
    from ...resolver import resolve
    from .testing import Deployment, simulate_many

    engine = policy.engines["sglang"]
    release = str(target.get("sglang.version") or "") or None
    cells = [(m, f) for m in models for f in families]
    decisions = [resolve(deployment_facts(policy, m, f, target, engine="sglang"), policy) for m, f in cells]
    flags = [engine_flags(d.paths, engine, release, d.facts) for d in decisions]
    bases = []
    for (model, family), decision in zip(cells, decisions, strict=True):
        config, _extra, _source = find_model(model, policy.models)
        cc, name = FAMILIES[family]
        bases.append(
            Deployment(config=config, gpu=cc, gpu_name=name, model_id=model, moe=decision.paths["moe"].applicable)
        )
    from dataclasses import replace

    runs = [*bases, *(replace(b, plugin=True) for b in bases), *map(_flag_deployment, bases, flags)]
    choices = simulate_many(python, runs, timeout=timeout)
    n = len(cells)
    moe_ids = moe_ids_of(engine)
    out = []
    for i, ((model, family), decision) in enumerate(zip(cells, decisions, strict=True)):
        native, patched, flagged = choices[i], choices[n + i], choices[2 * n + i]
        result, reason, parity = judge(patched, flagged, decision, moe_ids)
        out.append(CellResult(model, family, decision, native, patched, flagged, flags[i], result, reason, parity))
    return out


# ----------------------------------------------------------------------------- the table


def _row(choices: SglangChoices, decision: Decision, moe_ids: Mapping[str, frozenset[str]]) -> str:
    if _failure(choices, decision) is not None:
        return "could not run"
    parts = []
    for path in _PATHS:
        if not decision.paths[path].applicable:
            parts.append("-")
            continue
        if path == "router" and choices.router is None:
            parts.append(_UNSEEN)
            continue
        name, ids = ran(choices, path, moe_ids)
        backend = decision.paths[path].backend
        shown = backend if backend in ids else "\\|".join(sorted(ids)) if ids else f"({name})" if name else "-"
        parts.append(str(shown))
    return " / ".join(parts)


def render_markdown(version: str, results: Sequence[CellResult], moe_ids: Mapping[str, frozenset[str]]) -> str:
    """The release's section of ``docs/sglang-conformance.md`` (deterministic: no timings)."""
    counts = {r: sum(1 for x in results if x.result == r) for r in RESULTS}
    summary = ", ".join(f"{n} {r}" for r, n in counts.items() if n)
    parity = [x for x in results if x.parity is not None]
    lines = [
        f"## SGLang {version}",
        "",
        f"{len(results)} cells: {summary}. Parity (the plugin's fingerprint is `explain`'s): "
        f"{sum(1 for x in parity if x.parity)} of {len(parity)} cells where the plugin decided.",
        "",
        "Paths: dense / moe / router / attention (`-`: the model has no such path; `(Name)`: the quant "
        f"method of a layer whose kernel is not named, or an attention backend with no kernelpolicy id; `{_UNSEEN}`: "
        "a router tier the gate picks in its forward pass).",
        "",
        "| model | gpu | SGLang alone | decision | with the plugin | with the printed flags | result | reason |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for x in results:
        decided = " / ".join("-" if v is None else v for v in _decided(x.decision).values())
        lines.append(
            f"| {x.model} | {x.family} | {_row(x.native, x.decision, moe_ids)} | {decided} "
            f"| {_row(x.patched, x.decision, moe_ids)} | {_row(x.flagged, x.decision, moe_ids)} "
            f"| {x.result} | {x.reason} |"
        )
    return "\n".join(lines) + "\n"


_HEADER: Final = """# SGLang conformance

Generated by `kernelpolicy sglang audit --matrix --sglang X.Y.Z --markdown docs/sglang-conformance.md`
(one section per release). The test suite re-runs the sweep for the releases of
`tests/sglang/releases.txt` (0.5.23; CI's disk holds one SGLang venv beside the vLLM ones) and
checks their sections are in sync; the 0.5.12.post1 section was made the same way, from its venv
(`kernelpolicy sglang venv 0.5.12.post1`), and is re-made by hand. Every catalog model on every
GPU family runs through SGLang's own resolution (`ServerArgs.resolve_once`, model overrides), its scheduler step
(`init_moe_gemm_config`) and the quant method of one linear and one MoE layer, on a simulated GPU:
SGLang alone, with the kernelpolicy plugin (loaded by SGLang's `load_plugins` from the
`sglang.srt.plugins` entry point), and unpatched with the flags `kernelpolicy explain --engine
sglang==X.Y.Z` prints. Results: `same` (both runs follow the decision on every path), `differs`
(a path runs another valid backend, a kernel SGLang picks per call, or the plugin's facts differ
from `explain`'s), `conflict` (a path runs what the decision rejects), `could not run` (SGLang's
code failed in the simulation; the error is given). Parity: inside SGLang the plugin logs the
fingerprint `explain` prints for the same inputs.

The attention backend (issue #39) is the one SGLang's resolution sets (`attention_backend`, and
`prefill_`/`decode_attention_backend` where a model override sets a phase apart: shown
`prefill+decode`), read after `resolve_once` as its model runner reads it.

The router tier is read where SGLang's gate exposes it (the DeepSeek-V2/V3 module's
`tiny_router_gemm_max_tokens`, 0.5.20 on; the plugin wraps it); other gates pick their kernel in
their forward pass (`·`). A linear's kernel is named the way SGLang's own code picks it, also
where that happens per call (per-tensor/per-channel FP8 through `apply_fp8_linear`, FP4 through the
published runner, weight-only Marlin: `kernelpolicy/releases/sglang/_linears.py`, the code the
plugin's layer hook runs); a quant method it does not model is shown in brackets. `unsupported`:
the decision finds no backend for a path and SGLang refuses the deployment too.
"""


def section_of(document: str, version: str) -> str | None:
    """The generated section of SGLang *version* in *document*, or ``None``."""
    return _base.section_of(document, version, "sglang")


def update_document(path: Path, version: str, section: str) -> None:
    """Write *section* as *version*'s part of ``docs/sglang-conformance.md`` (others kept)."""
    _base.update_document(path, version, section, "sglang", _HEADER)
