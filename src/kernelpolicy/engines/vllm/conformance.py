"""``kernelpolicy vllm audit --matrix``: the conformance sweep of one vLLM release.

Every catalog model on every GPU family (and a few options, such as ``VLLM_USE_DEEP_GEMM=1``)
runs through vLLM's own selectors twice, without and with the kernelpolicy plugin, in one
process of the target venv (vLLM is imported once: :func:`kernelpolicy.engines.vllm.testing.simulate_many`).
Beside each cell kernelpolicy resolves the same deployment through the one fact pipeline, as
``explain`` does. Per cell the table says what vLLM chose alone, what the decision is, and what
ran with the plugin:

- ``same``: every path runs the decision's backend;
- ``differs``: a path runs another valid backend, or the plugin decided from other facts than
  ``explain`` (the parity check: the fingerprints differ);
- ``conflict``: a path runs a backend the decision rejects;
- ``refused``: vLLM refused the decided backend and the plugin fell back (see its reason);
- ``could not run``: vLLM's own code failed in the simulation (the whole reason is given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ...facts.keys import DECIDED_PATHS, PATHS
from .. import conformance as _base
from ..conformance import FAMILIES, one_line

if TYPE_CHECKING:
    from ...decision import Decision
    from ...facts import Facts
    from ...policy import Policy
    from .testing import Deployment, NativeChoices

__all__ = [
    "FAMILIES",
    "Cell",
    "CellResult",
    "Difference",
    "audit_differences",
    "deployment_facts",
    "kp_choice",
    "matrix_cells",
    "native_choice",
    "render_markdown",
    "run_matrix",
    "run_matrix_with",
    "section_of",
    "update_document",
]

#: Options swept beside the defaults, for the models named (env of the deployment).
OPTIONS: Final[tuple[tuple[str, Mapping[str, str]], ...]] = (
    ("Qwen/Qwen3.6-35B-A3B-FP8", {"VLLM_USE_DEEP_GEMM": "1"}),
    ("deepseek-ai/DeepSeek-V3", {"VLLM_USE_DEEP_GEMM": "0"}),
)
#: the paths the harness observes in vLLM (attention: the selector's answer for the decoder layers)
_PATHS: Final = PATHS
#: the paths whose probe step failing makes the whole cell `could not run` (attention: vLLM imports
#: some backends' modules only to select them, which needs a driver on some (CUTLASS MLA); the
#: other paths stand, and the attention column says `error`)
_STEPS: Final = ("dense", "moe", "warmup", "router")
#: The vLLM flags every sweep cell is served with, by flag ``dest``: the harness builds vLLM's
#: config with them, and ``explain``'s side reads them as from ``vllm serve MODEL --dtype bfloat16
#: --max-num-batched-tokens 2048`` (vLLM's defaults for the rest, as a whole serve line means), so
#: the plugin and ``explain`` decide the one deployment (the parity column).
SWEEP_SERVE: Final = {"dtype": "bfloat16", "max_num_batched_tokens": 2048}
RESULTS: Final = ("same", "differs", "conflict", "refused", "could not run")


@dataclass(frozen=True)
class Cell:
    """One deployment of the sweep."""

    model: str
    family: str
    env: Mapping[str, str] = field(default_factory=dict)
    moe_backend: str | None = None

    @property
    def option(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.env.items())]
        if self.moe_backend:
            parts.append(f"--moe-backend {self.moe_backend}")
        return " ".join(parts) or "default"


@dataclass(frozen=True)
class CellResult:
    """One cell: vLLM alone, the decision, vLLM with the plugin, and the verdict."""

    cell: Cell
    native: NativeChoices
    patched: NativeChoices
    decision: Decision
    result: str
    reason: str
    parity: bool | None  #: the plugin's fingerprint is the decision's (None: it decided nothing)

    def path_row(self) -> _base.PathRow:
        """This cell for the counts per path (a cell that could not run counts on no path)."""
        if self.result == "could not run":
            return _base.PathRow(())
        decided = _decided(self.decision)
        paths = tuple(p for p in _PATHS if decided.get(p) not in (None, "NONE") and (p != "warmup" or decided[p]))
        differs = {d.path for d in audit_differences(self.patched, self.decision)}
        differs |= {str(f.get("path")) for f in (self.patched.plugin or {}).get("fallbacks") or ()}
        parity: dict[str, bool] = {}
        plugin = [d for d in (self.patched.plugin or {}).get("decisions") or () if isinstance(d, Mapping)]
        for path in paths:
            if not plugin:
                break
            theirs: list[Any]
            if path == "warmup":
                theirs = [",".join(d.get("warmup") or ()) for d in plugin]
            else:
                theirs = [((d.get("paths") or {}).get(path) or {}).get("backend") for d in plugin]
            parity[path] = all(t == kp_choice(self.decision, path) for t in theirs)
        return _base.PathRow(paths, frozenset(differs & set(paths)), parity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.cell.model,
            "family": self.cell.family,
            "option": self.cell.option,
            "vllm": _choices(self.native),
            "kernelpolicy": _decided(self.decision),
            "with_plugin": _choices(self.patched),
            "result": self.result,
            "reason": self.reason,
            "parity": self.parity,
            "fingerprint": self.decision.fingerprint,
            "native_errors": dict(self.native.errors),
            "plugin": dict(self.patched.plugin or {}),
        }


def matrix_cells(
    policy: Policy, models: Sequence[str] | None = None, families: Sequence[str] | None = None
) -> list[Cell]:
    """The sweep: every catalog model (or *models*) on every family, then :data:`OPTIONS`."""
    ids = list(models) if models else [m.id for m in policy.models]
    fams = list(families) if families else list(FAMILIES)
    cells = [Cell(model, fam) for model in ids for fam in fams]
    cells += [Cell(model, fam, env) for model, env in OPTIONS if model in ids for fam in fams]
    return cells


# ----------------------------------------------------------------------------- running


def sweep_serve_facts(serve: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The facts of *serve* (flag values by ``dest``; :data:`SWEEP_SERVE` when None) as
    ``explain`` reads them from a whole serve line (vLLM's defaults for the flags it leaves out)."""
    from ...releases.vllm.flags import SERVE_DEFAULTS, facts_of

    return facts_of({**SERVE_DEFAULTS, **(SWEEP_SERVE if serve is None else serve)})


def deployment_facts(
    policy: Policy,
    model: str,
    family: str,
    target: Mapping[str, object],
    *,
    env: Mapping[str, str] | None = None,
    moe_backend: str | None = None,
) -> Facts:
    """What ``explain`` builds for a vLLM sweep cell, served with :data:`SWEEP_SERVE`."""
    return _base.deployment_facts(
        policy, model, family, target, engine="vllm", env=env, moe_backend=moe_backend, flags=sweep_serve_facts()
    )


def run_matrix(
    python: str | Path,
    policy: Policy,
    cells: Sequence[Cell],
    target: Mapping[str, object],
    *,
    timeout: float = 1800.0,
) -> list[CellResult]:
    """Run every cell without and with the plugin in one vLLM process, and judge each."""
    return run_matrix_with(python, policy, cells, target, (), timeout=timeout)[0]


def run_matrix_with(
    python: str | Path,
    policy: Policy,
    cells: Sequence[Cell],
    target: Mapping[str, object],
    extra: Sequence[Deployment],
    *,
    timeout: float = 1800.0,
) -> tuple[list[CellResult], list[NativeChoices]]:
    """:func:`run_matrix`, and *extra* deployments in the same vLLM process (their choices)."""
    from ...facts.model import find_model
    from ...resolver import resolve
    from .testing import Deployment

    decisions = [
        resolve(deployment_facts(policy, c.model, c.family, target, env=c.env, moe_backend=c.moe_backend), policy)
        for c in cells
    ]
    deployments = []
    for plugin in (False, True):
        for cell, decision in zip(cells, decisions, strict=True):
            cc, name = FAMILIES[cell.family]
            config, _extra, _source = find_model(cell.model, policy.models)
            dtype = decision.facts.get("model.router_dtype")
            deployments.append(
                Deployment(
                    config=config,
                    gpu=cc,
                    gpu_name=name,
                    env=dict(cell.env),
                    moe_backend=cell.moe_backend,
                    plugin=plugin,
                    router_dtype=str(dtype) if dtype in ("bfloat16", "float16", "float32") else None,
                    model_id=cell.model,
                    serve=SWEEP_SERVE,
                )
            )
    choices = _simulate_distinct(python, [*deployments, *extra], policy, timeout)
    natives, patched = choices[: len(cells)], choices[len(cells) : 2 * len(cells)]
    out = []
    for cell, decision, native, with_plugin in zip(cells, decisions, natives, patched, strict=True):
        result, reason, parity = judge(with_plugin, decision)
        out.append(CellResult(cell, native, with_plugin, decision, result, reason, parity))
    return out, choices[2 * len(cells) :]


def _simulate_distinct(
    python: str | Path, deployments: Sequence[Deployment], policy: Policy, timeout: float
) -> list[NativeChoices]:
    """:func:`simulate_many`, running each distinct deployment once: catalog entries that share
    a config (DeepSeek-V3 and R1, a model and its re-release) select alike on a GPU."""
    import json

    from .testing import simulate_many

    extras = {m.id: dict(m.facts) for m in policy.models}

    def key(d: Deployment) -> str:
        request = d.request()
        request["model_id"] = extras.get(d.model_id or "", {})  # the served name only finds these
        return json.dumps(request, sort_keys=True, default=str)

    index: dict[str, int] = {}
    distinct: list[Deployment] = []
    for d in deployments:
        if key(d) not in index:
            index[key(d)] = len(distinct)
            distinct.append(d)
    ran = simulate_many(python, distinct, timeout=timeout)
    return [ran[index[key(d)]] for d in deployments]


def _failure(choices: NativeChoices, decision: Decision) -> str | None:
    if "probe" in choices.errors:
        return choices.errors["probe"]
    for path in _STEPS:
        p = decision.paths.get(path)
        if path in choices.errors and (path == "warmup" or (p is not None and p.applicable)):
            return f"step `{path}`: {choices.errors[path]}"
    return None


def judge(with_plugin: NativeChoices, decision: Decision) -> tuple[str, str, bool | None]:
    """The verdict of one cell with the plugin: (result, reason, parity)."""
    failure = _failure(with_plugin, decision)
    if failure is not None:
        return "could not run", one_line(failure), None
    plugin = with_plugin.plugin or {}
    decided = [d for d in plugin.get("decisions") or () if isinstance(d, Mapping)]
    parity = None
    notes: list[str] = []
    if decided:
        parity = all(d.get("fingerprint") == decision.fingerprint for d in decided)
        if not parity:
            theirs = dict(decided[0].get("facts") or {})
            ours = dict(decision.facts.values)
            keys = sorted(k for k in set(theirs) | set(ours) if _norm(theirs.get(k)) != _norm(ours.get(k)))
            notes.append(
                "the plugin decided from other facts than explain: "
                + ", ".join(f"`{k}` {theirs.get(k)!r} vs {ours.get(k)!r}" for k in keys[:6])
                if keys
                else "the plugin's fingerprint differs (same facts: another policy)"
            )
    else:
        notes.append("the plugin made no decision: " + "; ".join(plugin.get("warnings") or ["(no warning)"]))
    standing = [c for c in plugin.get("conflicts") or () if isinstance(c, Mapping)]
    if standing:  # an operator's explicit choice the decision did not keep: it runs
        c = standing[0]
        rule = f" (rule `{c['rule']}`)" if c.get("rule") else ""
        why = (
            f"{c.get('path')}: the operator's `{c.get('operator')}` runs, the decision chose `{c.get('decided')}`{rule}"
        )
        return "conflict", why, parity
    fallbacks = list(plugin.get("fallbacks") or ())
    if fallbacks:
        f = fallbacks[0]
        return "refused", f"{f.get('where')} {f.get('reason')}; the plugin used `{f.get('used')}`", parity
    differences = audit_differences(with_plugin, decision)
    conflicts = [d for d in differences if d.kind == "conflict"]
    if conflicts:
        return "conflict", "; ".join(f"{d.path}: {d.reason}" for d in conflicts), parity
    if differences or notes:
        return "differs", "; ".join([f"{d.path}: {d.reason}" for d in differences] + notes), parity
    return "same", "", parity


def _norm(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


# ----------------------------------------------------------------------------- the table


def _choices(native: NativeChoices) -> dict[str, str | None]:
    out = dict(native.backends())
    if out.get("dense") is None and native.dense is not None and native.dense.kernel:
        out["dense"] = native.dense.kernel  # a kernel kernelpolicy has no id for (vLLM's Machete, ...)
    if out.get("attention") is None and native.attention is not None and native.attention.backend:
        out["attention"] = native.attention.backend  # a backend kernelpolicy has no id for (FLASH_ATTN_MLA_SPARSE)
    if "attention" in native.errors:
        out["attention"] = "error"
    return out


def _decided(decision: Decision) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for path in _PATHS:
        if path == "warmup":
            out[path] = ",".join(decision.warmup)
            continue
        p = decision.paths[path]
        out[path] = (p.backend or "NONE") if p.applicable else None
    return out


def _row(values: Mapping[str, str | None]) -> str:
    return " / ".join("-" if values.get(p) in (None, "") else str(values[p]) for p in _PATHS)


def render_markdown(version: str, results: Sequence[CellResult]) -> str:
    """The release's section of ``docs/vllm-conformance.md`` (deterministic: no timings)."""
    counts = {r: sum(1 for x in results if x.result == r) for r in RESULTS}
    summary = ", ".join(f"{n} {r}" for r, n in counts.items() if n)
    parity = [x for x in results if x.parity is not None]
    per_path = _base.path_counts((x.path_row() for x in results), _PATHS)
    lines = [
        f"## vLLM {version}",
        "",
        f"{len(results)} cells: {summary}. Parity (the plugin's fingerprint is `explain`'s): "
        f"{sum(1 for x in parity if x.parity)} of {len(parity)} cells where the plugin decided.",
        "",
        _base.path_summary(per_path),
        "",
        f"Paths: {' / '.join(_PATHS)} (`-`: the model has no such path, or nothing is warmed; "
        "`error`: vLLM's selector could not run in the simulation).",
        "",
        "| model | gpu | option | vLLM alone | decision | with the plugin | result | reason |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for x in results:
        native = _row(_choices(x.native)) if not _failure(x.native, x.decision) else "could not run"
        lines.append(
            f"| {x.cell.model} | {x.cell.family} | {x.cell.option} | {native} | {_row(_decided(x.decision))} "
            f"| {_row(_choices(x.patched))} | {x.result} | {x.reason} |"
        )
    return "\n".join(lines) + "\n"


_HEADER: Final = """# vLLM conformance

Generated by `kernelpolicy vllm audit --matrix --vllm X.Y.Z --markdown docs/vllm-conformance.md`
(one section per release; the test suite re-runs the sweep for the releases it installs and
checks each section is in sync). Every catalog model on every GPU family runs through vLLM's own
selection code on a simulated GPU, without and with the kernelpolicy plugin. Results: `same`
(every path runs the decision), `differs` (another valid backend, or the plugin's facts differ
from `explain`'s), `conflict` (a path runs what the decision rejects), `refused` (vLLM refused the
decided backend; the plugin fell back to the decision's next valid candidate), `could not run`
(vLLM's code failed in the simulation). Parity: inside vLLM the plugin logs the fingerprint
`explain` prints for the same inputs. Each section also counts per path (dense, moe, router,
attention, warmup) the cells where vLLM with the plugin runs the decision's backend, and where
the plugin's own backend on that path is `explain`'s.

Why a cell is not `same` (the reason column names the case):

- a kernel kernelpolicy has no id for: the `vLLM alone` column names its class (vLLM's Machete
  weight-only kernel on sm90, ...); the plugin holds the decided kernel in vLLM's FP8, weight-only,
  NVFP4, MXFP4 and MXFP8 linear selectors;
- a router tier vLLM's `GateLinear` does not enable for a gate (its weight dtype or shape) while
  the decision ranks it first: the plugin keeps the decision's next valid tier `GateLinear`
  enabled (`refused`, naming both);
- a warmup vLLM does not run for MXFP4 experts while the decision lists it;
- attention: vLLM's selector refusing the decided backend for the model's layers (the plugin
  leaves vLLM's own choice for those layers: `refused`, naming vLLM's reason), a backend
  kernelpolicy has no id for (`FLASH_ATTN_MLA_SPARSE`), or a selector that cannot run on the
  simulated GPU (`error`: vLLM imports the CUTLASS MLA module only to select it, which asks
  for a driver);
- `could not run`: vLLM's own config or selection code fails in the simulation (the whole error
  is given), with the plugin and without it alike.
"""


def section_of(document: str, version: str) -> str | None:
    """The generated section of vLLM *version* in *document*, or ``None``."""
    return _base.section_of(document, version, "vllm")


def update_document(path: Path, version: str, section: str) -> None:
    """Write *section* as *version*'s part of ``docs/vllm-conformance.md`` (others kept)."""
    _base.update_document(path, version, section, "vllm", _HEADER)


# ----------------------------------------------------------------------------- comparing (`vllm audit` and the sweep)


@dataclass(frozen=True)
class Difference:
    """One path where vLLM's choice is not kernelpolicy's."""

    path: str
    vllm: str | None
    kernelpolicy: str | None
    kind: str  #: ``conflict`` (vLLM runs what the decision rejects) or ``preference``
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "vllm": self.vllm,
            "kernelpolicy": self.kernelpolicy,
            "kind": self.kind,
            "reason": self.reason,
        }


def _rejection(decision: Decision, path: str, backend: str) -> str | None:
    p = decision.paths.get(path)
    return p.rejection(backend) if p is not None else None


def kp_choice(decision: Decision, path: str) -> str | None:
    if path == "warmup":
        return ",".join(decision.warmup)
    p = decision.paths.get(path)
    return p.backend if p is not None else None


def native_choice(native: NativeChoices, path: str) -> str | None:
    return native.backends().get(path)


def audit_differences(native: NativeChoices, decision: Decision) -> list[Difference]:
    """Per path, where vLLM's choice is not the decision's (paths neither has are skipped)."""
    out: list[Difference] = []
    for path in (p for p in DECIDED_PATHS if p in _PATHS):
        ours, theirs = kp_choice(decision, path), native_choice(native, path)
        if ours == theirs:
            continue
        if path == "attention" and native.attention is None and "attention" not in native.errors:
            continue  # a probe that did not ask vLLM's attention selector
        if path == "attention" and "attention" in native.errors:
            p = decision.paths.get(path)
            if p is not None and p.applicable:
                error = one_line(native.errors["attention"])
                text = f"vLLM's attention selector could not run in the simulation: {error}"
                out.append(Difference(path, None, ours, "preference", text))
            continue
        if path == "attention" and theirs is None and native.attention is not None and native.attention.backend:
            raw = native.attention.backend  # a backend kernelpolicy has no id for
            out.append(Difference(path, raw, ours, "preference", f"vLLM runs `{raw}`, which has no kernelpolicy id"))
            continue
        if theirs is None:
            p = decision.paths.get(path)
            if p is None or not p.applicable or ours == "torch":
                continue  # `torch`: an unquantized layer, which no FP8 selector sees
            out.append(Difference(path, None, ours, "conflict", f"vLLM selected nothing on `{path}`"))
            continue
        if ours is None:
            out.append(Difference(path, theirs, None, "conflict", f"the decision has no `{path}` backend"))
            continue
        why = _rejection(decision, path, theirs)
        kind = "conflict" if why else "preference"
        out.append(
            Difference(path, theirs, ours, kind, why or f"`{theirs}` is valid, but the decision ranks `{ours}` first")
        )
    dense = native.dense.backend if native.dense is not None else None
    warmed = set(native.warmup.warmed(dense)) if native.warmup is not None else set()
    wanted = set(decision.warmup)
    if warmed != wanted and native.warmup is not None:
        extra, missing = sorted(warmed - wanted), sorted(wanted - warmed)
        reason = "; ".join(
            x
            for x in (
                extra and "vLLM JIT-warms " + ", ".join(f"`{k}`" for k in extra) + ", which the decision does not run",
                missing and "vLLM does not warm " + ", ".join(f"`{k}`" for k in missing),
            )
            if x
        )
        kind = "conflict" if extra else "preference"
        out.append(Difference("warmup", ",".join(sorted(warmed)), ",".join(sorted(wanted)), kind, reason))
    return out
