"""Golden policy cases: facts in, the expected decision out (``kernelpolicy test``).

A case is a YAML file::

    name: Qwen3.6 FP8 MoE on GB10 runs no DeepGEMM anywhere
    refs: [vllm#50332]
    given:                      # what `explain` takes
      gpu: sm121
      model: Qwen/Qwen3.6-35B-A3B-FP8
      facts: {triton.version: "3.6.0"}
      env: {VLLM_USE_DEEP_GEMM: "1"}
      moe_backend: triton
      policy: [my-policy.yaml]  # relative to the case file
    expect:
      dense: cutlass            # the backend, or null for a path the model lacks
      moe: triton
      router: {not: [bf16x3]}   # or any of a list: {in: [cublas, linear]}
      warmup: []                # the exact kernels to warm
      rules: {dense: [deep_gemm-e8m0-qwen3_5]}   # among the rules that decided the path
      warnings: ["overrides"]   # substrings, each in some warning
      error: "contradictory"    # the case must fail to resolve, with this in the message

Each failure is one readable line: what was expected, what came, and the rules that decided.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dsl._yaml import YamlError, load_located
from ..errors import KernelPolicyError

__all__ = ["CaseResult", "find_cases", "run_case", "run_cases"]

_PATHS = ("dense", "moe", "router")


@dataclass(frozen=True)
class CaseResult:
    file: str
    name: str
    failures: tuple[str, ...] = ()
    error: str | None = None  #: the case file itself is broken
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def ok(self) -> bool:
        return not self.failures and self.error is None


def find_cases(items: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Case files: the files named, and every ``*.yaml`` under the folders named."""
    out: list[Path] = []
    for item in items:
        p = Path(item)
        out += sorted(p.rglob("*.y*ml")) if p.is_dir() else [p]
    return out


def _expect_backend(path: str, want: Any, got: str | None, rules: Sequence[str]) -> str | None:
    why = f" (decided by {', '.join(rules)})" if rules else ""
    if isinstance(want, Mapping):
        if "not" in want and got in list(want["not"]):
            return f"{path}: expected none of {list(want['not'])}, got `{got}`{why}"
        if "in" in want and got not in list(want["in"]):
            return f"{path}: expected one of {list(want['in'])}, got `{got}`{why}"
        return None
    if want != got:
        return f"{path}: expected `{want}`, got `{got}`{why}"
    return None


def run_case(file: Path, policies: dict[tuple[str, ...], Any] | None = None) -> CaseResult:
    """Resolve one case file and compare the decision with its ``expect``."""
    from ..dsl.loader import load_policy
    from ..facts import facts_for
    from ..resolver import resolve

    try:
        loc = load_located(file.read_text(encoding="utf-8"), str(file))
    except (OSError, UnicodeDecodeError) as exc:
        return CaseResult(str(file), file.stem, error=f"cannot read case: {exc}")
    except YamlError as exc:
        return CaseResult(str(file), file.stem, error=exc.diagnostic.one_line())
    data = loc.data
    if (
        not isinstance(data, Mapping)
        or not isinstance(data.get("given"), Mapping)
        or not isinstance(data.get("expect"), Mapping)
    ):
        return CaseResult(str(file), file.stem, error=f"{file}: a case needs `given` and `expect` mappings")
    name = str(data.get("name") or file.stem)
    given, expect = data["given"], data["expect"]
    unknown = set(given) - {"gpu", "model", "facts", "env", "moe_backend", "linear_backend", "policy"}
    unknown |= set(expect) - {*_PATHS, "warmup", "rules", "warnings", "error"}
    if unknown:
        return CaseResult(str(file), name, error=f"{file}: unknown case field(s): {', '.join(sorted(unknown))}")
    policy_files = tuple(str((file.parent / p).resolve()) for p in given.get("policy") or ())
    cache = policies if policies is not None else {}
    try:
        if policy_files not in cache:
            cache[policy_files] = load_policy(list(policy_files), environ=False)
        policy = cache[policy_files]
        facts = facts_for(
            gpu=given.get("gpu"),
            model=given.get("model"),
            facts=given.get("facts") or {},
            env={k: str(v) for k, v in (given.get("env") or {}).items()},
            moe_backend=given.get("moe_backend"),
            linear_backend=given.get("linear_backend"),
            policy=policy,
        )
        decision = resolve(facts, policy)
    except KernelPolicyError as exc:
        if "error" in expect and str(expect["error"]) in str(exc):
            return CaseResult(str(file), name)
        return CaseResult(str(file), name, failures=(f"resolving failed: {exc.one_line()}",))
    if "error" in expect:
        return CaseResult(
            str(file), name, failures=(f"expected an error containing `{expect['error']}`, got a decision",)
        )
    failures: list[str] = []
    for path in _PATHS:
        if path in expect:
            p = decision.paths[path]
            msg = _expect_backend(path, expect[path], p.backend, p.rules)
            if msg:
                failures.append(msg)
    if "warmup" in expect and list(decision.warmup) != list(expect["warmup"] or []):
        failures.append(f"warmup: expected {list(expect['warmup'] or [])}, got {list(decision.warmup)}")
    for path, ids in (expect.get("rules") or {}).items():
        have = decision.paths[path].rules if path in decision.paths else ()
        missing = [i for i in ids if i not in have]
        if missing:
            failures.append(f"{path}: expected rule(s) {missing} among the deciding rules {list(have)}")
    for needle in expect.get("warnings") or []:
        if not any(needle in w for w in decision.warnings):
            failures.append(f"warnings: none contains `{needle}` (got {list(decision.warnings)})")
    return CaseResult(str(file), name, tuple(failures), warnings=decision.warnings)


def run_cases(files: Iterable[Path]) -> list[CaseResult]:
    """Run every case, sharing loaded policies between cases with the same policy files."""
    cache: dict[tuple[str, ...], Any] = {}
    return [run_case(f, cache) for f in files]
