"""The conformance sweep and the plugin/explain parity, on every vLLM release the tests install.

One vLLM process per release runs the whole sweep (every catalog model on every GPU family,
without and with the plugin) and the golden cases with the plugin; the results are shared by
the tests below (:func:`sweep`).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import kernelpolicy as kp
from kernelpolicy.cli._vllm import _target_facts
from kernelpolicy.deployment.build import derived_facts
from kernelpolicy.deployment.pipeline import build_facts
from kernelpolicy.engines.vllm.conformance import (
    SWEEP_SERVE,
    CellResult,
    matrix_cells,
    render_markdown,
    run_matrix_with,
    section_of,
    sweep_serve_facts,
)
from kernelpolicy.engines.vllm.testing import Deployment, NativeChoices, parse_gpu
from kernelpolicy.facts import Facts
from kernelpolicy.facts.gpu import facts_from_spec

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "vllm-conformance.md"
CASES = sorted((ROOT / "tests" / "cases").glob("*.yaml"))
#: Facts of vLLM flags the simulated config does not carry yet: a case stating one is left out of
#: the golden-case parity (the plugin would read the config's default against the case's value).
_NOT_SERVED = frozenset(
    {
        "deploy.speculative",
        "deploy.dcp",
        "deploy.disaggregation",
        "deploy.two_batch_overlap",
        "deploy.max_num_batched_tokens",
    }
)


@dataclass(frozen=True)
class GoldenCell:
    """A golden case as a deployment for the plugin, and the decision ``explain`` makes."""

    name: str
    deployment: Deployment
    decision: Any


def _golden(policy_cache: dict[tuple[str, ...], kp.Policy], target: Mapping[str, object]) -> list[GoldenCell]:
    out = []
    for file in CASES:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
        given = data["given"]
        if "error" in data["expect"] or given.get("linear_backend") or not given.get("model") or not given.get("gpu"):
            continue  # no deployment to start (an error case), or a flag the simulation lacks
        if given.get("policy"):
            continue  # operator files reach the plugin through KERNELPOLICY_POLICY: another policy digest
        if set(given.get("facts") or {}) & _NOT_SERVED:
            continue  # a flag the simulated config does not serve yet (the serving modes, the token budget)
        named = given.get("policy") or ()
        files = tuple(str((file.parent / p).resolve()) for p in ([named] if isinstance(named, str) else named))
        if files not in policy_cache:
            policy_cache[files] = kp.load_policy(list(files))
        policy = policy_cache[files]
        spec = facts_from_spec(str(given["gpu"]), policy.gpus)
        config = next(m.config for m in policy.models if m.id == given["model"])
        cc = parse_gpu(str(spec["gpu.cc"]))
        name = str(spec.get("gpu.name") or f"NVIDIA sm{cc[0]}{cc[1]}")
        # what the simulation cannot be (its host) travels as operator facts, on both sides
        operator = {k: spec[k] for k in ("host.machine", "gpu.unified_memory") if k in spec}
        operator |= dict(given.get("facts") or {})
        # a case's facts that are vLLM flags are served as those flags (the simulated config carries
        # them): stated beside a running config that says otherwise they are a conflict the engine wins
        serve = dict(SWEEP_SERVE)
        if "deploy.kv_cache_dtype" in operator:
            serve["kv_cache_dtype"] = operator.pop("deploy.kv_cache_dtype")
        if "deploy.cuda_graphs" in operator:
            serve["enforce_eager"] = not operator.pop("deploy.cuda_graphs")
        env = {k: str(v) for k, v in (given.get("env") or {}).items()}
        derived = derived_facts(gpu=str(given["gpu"]), model=given["model"], policy=policy)
        derived = derived.merged(Facts.from_values(target, source="metadata"))
        derived = derived.merged(Facts.from_values({"gpu.name": name, "host.machine": platform.machine()}, "spec"))
        # served as every sweep cell is (SWEEP_SERVE, read as from a serve line), with the case's own
        # flags; the case's own facts win
        served = {**sweep_serve_facts(serve), **operator}
        facts = build_facts(policy, derived=derived, facts=served, env=env, moe_backend=given.get("moe_backend"))
        decision = kp.resolve(facts.facts, policy)
        plugin_env = dict(env)
        if files:
            plugin_env["KERNELPOLICY_POLICY"] = ":".join(files)
        dtype = decision.facts.get("model.router_dtype")
        deployment = Deployment(
            config=config,
            gpu=cc,
            gpu_name=name,
            env=plugin_env,
            moe_backend=given.get("moe_backend"),
            plugin=True,
            facts=operator,
            router_dtype=str(dtype) if dtype in ("bfloat16", "float16", "float32") else None,
            model_id=given["model"],
            serve=serve,
        )
        out.append(GoldenCell(file.stem, deployment, decision))
    return out


@dataclass
class Sweep:
    version: str
    results: list[CellResult]
    golden: list[tuple[GoldenCell, NativeChoices]]


_SWEEPS: dict[str, Future[Sweep]] = {}
_POOL = ThreadPoolExecutor(max_workers=2)  # one vLLM process per release, two at a time (2 cores)


def _run(version: str, python: Path) -> Sweep:
    policy = kp.load_policy()
    target = _target_facts(python)
    golden = _golden({(): policy}, target)
    extra = [g.deployment for g in golden]
    results, natives = run_matrix_with(python, policy, matrix_cells(policy), target, extra)
    return Sweep(version, results, list(zip(golden, natives, strict=True)))


def sweep(version: str, venv: Any, releases: tuple[str, ...]) -> Sweep:
    """The sweep and the golden cases on vLLM *version*, run once per test session; every
    installed release starts on the first call, so they overlap."""
    if not _SWEEPS:
        for release in releases:
            try:
                python = venv(release)
            except pytest.skip.Exception:
                continue
            _SWEEPS[release] = _POOL.submit(_run, release, python)
    if version not in _SWEEPS:
        venv(version)  # skips with the reason
    return _SWEEPS[version].result()


def test_conformance_document_is_in_sync(release: str, venv: Any, releases: tuple[str, ...]) -> None:
    s = sweep(release, venv, releases)
    section = section_of(DOC.read_text(encoding="utf-8"), release) if DOC.is_file() else None
    expected = render_markdown(release, s.results)
    assert section == expected, (
        f"docs/vllm-conformance.md is out of date for vLLM {release}: run "
        f"`kernelpolicy vllm audit --matrix --vllm {release} --markdown docs/vllm-conformance.md`"
    )


def test_the_plugin_never_stops_a_start_up(release: str, venv: Any, releases: tuple[str, ...]) -> None:
    """A cell that runs without the plugin runs with it (a refusal falls back, never raises)."""
    for r in sweep(release, venv, releases).results:
        if r.native.errors and "could not run" in r.result:
            continue  # vLLM cannot run it alone either
        assert r.result != "could not run", f"{r.cell}: {r.reason}"
        assert not any("AdapterError" in e for e in r.patched.errors.values()), f"{r.cell}: {r.patched.errors}"


def test_catalog_parity_plugin_logs_explains_fingerprint(release: str, venv: Any, releases: tuple[str, ...]) -> None:
    """Inside vLLM the plugin decides from the facts ``explain`` builds (same fingerprint)."""
    decided = [r for r in sweep(release, venv, releases).results if r.parity is not None]
    assert decided, "the plugin decided nothing"
    broken = [f"{r.cell.model} {r.cell.family} {r.cell.option}: {r.reason}" for r in decided if not r.parity]
    assert not broken, "\n".join(broken)


def test_golden_case_parity(release: str, venv: Any, releases: tuple[str, ...]) -> None:
    golden = sweep(release, venv, releases).golden
    assert golden
    broken = []
    for cell, native in golden:
        if "probe" in native.errors:
            continue  # this vLLM cannot build the model's config at all (gemma-4 on 0.26): nothing decided
        plugin = native.plugin or {}
        decisions = plugin.get("decisions") or []
        got = {d["fingerprint"] for d in decisions}
        if got != {cell.decision.fingerprint}:
            theirs = dict(decisions[0]["facts"]) if decisions else {}
            ours = dict(cell.decision.facts.values)
            diff = sorted(k for k in set(theirs) | set(ours) if _norm(theirs.get(k)) != _norm(ours.get(k)))
            broken.append(f"{cell.name}: {diff or plugin.get('warnings') or native.errors}")
    assert not broken, "\n".join(broken)


def _norm(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def test_matrix_json_satisfies_its_schema(release: str, venv: Any, releases: tuple[str, ...]) -> None:
    """`vllm audit --matrix --json` (its cells, as the command writes them) fits `vllm-matrix`."""
    jsonschema = pytest.importorskip("jsonschema")
    from kernelpolicy.tools.schemas import generate

    cells = [r.to_dict() for r in sweep(release, venv, releases).results]
    doc = json.loads(json.dumps({"schema": "kernelpolicy.vllm-matrix/1", "vllm": release, "cells": cells}, default=str))
    errors = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in jsonschema.Draft202012Validator(generate("vllm-matrix")).iter_errors(doc)
    ]
    assert errors == []
