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
      engine: sglang==0.5.23    # the engine and its release (default: vLLM, release unknown)
      serve: "vllm serve MODEL -tp 8"   # or a launch line, read as `explain -- LINE` reads it
    expect:
      dense: cutlass            # the backend, or null for a path the model lacks
      moe: triton
      router: {not: [bf16x3]}   # or any of a list: {in: [cublas, linear]}
      warmup: []                # the exact kernels to warm
      rules: {dense: [deep_gemm-e8m0-qwen3_5]}   # among the rules that decided the path
      warnings: ["overrides"]   # substrings, each in some warning
      error: "contradictory"    # the case must fail to resolve, with this in the message

Each failure is one readable line: what was expected, what came, and the rules that decided.
``prefer`` rules that reordered a path are among its deciding rules. A case with ``serve`` is
read through the command line's own fact assembly (the launch line's engine, flags and leading
``VAR=VALUE`` environment, with ``gpu``, ``facts``, ``env``, ``engine`` and ``policy`` as
``explain``'s options), so it tests what ``explain -- LINE`` decides.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..dsl.files import SourceError, SourceFile, YamlError, load_located, yaml_files_under
from ..errors import KernelPolicyError, UsageError
from ..facts.keys import DECIDED_PATHS

if TYPE_CHECKING:
    from ..decision import PathDecision

__all__ = ["CaseResult", "case_problem", "coverage", "find_cases", "given_facts", "run_case", "run_cases"]

_PATHS = DECIDED_PATHS


@dataclass(frozen=True)
class CaseResult:
    file: str
    name: str
    failures: tuple[str, ...] = ()
    error: str | None = None  #: the case file itself is broken
    warnings: tuple[str, ...] = field(default=(), compare=False)
    #: every rule the case's decision read: it rejected, preferred, overrode or was assumed for a candidate
    exercised: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def ok(self) -> bool:
        return not self.failures and self.error is None


def find_cases(items: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Case files: the files named, and every ``*.yaml`` under the folders named (links to
    folders not followed, the walk bounded).

    :raises UsageError: for an empty name or a folder too large to be one of cases.
    """
    out: list[Path] = []
    for item in items:
        if not os.fspath(item):
            raise UsageError("a case path is empty", help="name a case file or a folder of them")
        p = Path(item)
        if p.is_dir():
            try:
                out += yaml_files_under(p)
            except SourceError as exc:
                raise UsageError(f"`{p}`: {exc.diagnostic.message}", help=exc.diagnostic.help) from None
        else:
            out.append(p)
    return out


_STR: Final = (str,)
_GIVEN: Final[dict[str, str]] = {
    "gpu": "a GPU spec such as `sm121`",
    "model": "a model id or path",
    "facts": "a mapping of fact keys to values",
    "env": "a mapping of variable names to values",
    "moe_backend": "a backend id",
    "linear_backend": "a backend id",
    "policy": "a list of policy files",
    "engine": "an engine release such as `sglang==0.5.23` (as `explain --engine`)",
    "serve": "a launch line (`vllm serve MODEL ...`), as a string or a list of words",
}
_EXPECT: Final = (*_PATHS, "warmup", "rules", "warnings", "error")


def _is_strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _backend_expectation(v: Any) -> bool:
    if v is None or isinstance(v, str):
        return True
    # `{not: []}` checks nothing (it passed whatever was decided) and `{in: []}` nothing can meet
    return (
        isinstance(v, Mapping)
        and bool(v)
        and set(v) <= {"not", "in"}
        and all(_is_strs(x) and bool(x) for x in v.values())
    )


def _fields_problem(data: Mapping[str, Any]) -> str | None:
    unknown = sorted(
        [f"`{k}`" for k in data if k not in ("name", "refs", "given", "expect")]
        + [f"`given.{k}`" for k in data["given"] if k not in _GIVEN]
        + [f"`expect.{k}`" for k in data["expect"] if k not in _EXPECT]
    )
    if unknown:
        return f"unknown case field(s): {', '.join(unknown)}"
    if not data["expect"]:
        return (
            "`expect` is empty: a case that expects nothing passes whatever is decided"
            " (expect a path's backend, `warmup`, `rules`, `warnings` or `error`)"
        )
    return None


def case_problem(data: Any) -> str | None:
    """Pure: what is wrong with the shape of a case (its fields and their types), or ``None``."""
    if (
        not isinstance(data, Mapping)
        or not isinstance(data.get("given"), Mapping)
        or not isinstance(data.get("expect"), Mapping)
    ):
        return "a case needs `given` and `expect` mappings"
    problem = _fields_problem(data)
    if problem is not None:
        return problem
    if data.get("name") is not None and not isinstance(data["name"], (str, int, float)):
        return "`name` must be a string"
    given, expect = data["given"], data["expect"]
    for key, what in _GIVEN.items():
        v = given.get(key)
        if v is None:
            continue
        ok = {
            "facts": isinstance(v, Mapping),
            "env": isinstance(v, Mapping) and all(not isinstance(x, (Mapping, list)) for x in v.values()),
            "policy": _is_strs(v) or isinstance(v, str),
            "serve": (_is_strs(v) and bool(v)) or (isinstance(v, str) and bool(v.strip())),
        }.get(key, isinstance(v, _STR))
        if not ok:
            return f"`given.{key}` must be {what}"
    for path in _PATHS:
        if path in expect and not _backend_expectation(expect[path]):
            return (
                f"`expect.{path}` must be a backend id, null, or `{{not: [...]}}` / `{{in: [...]}}`"
                " lists of at least one id"
            )
    if expect.get("warmup") is not None and not _is_strs(expect["warmup"]):
        return "`expect.warmup` must be a list of backend ids"
    rules = expect.get("rules")
    if rules is not None and not (isinstance(rules, Mapping) and all(_is_strs(v) for v in rules.values())):
        return "`expect.rules` must be a mapping of paths to lists of rule ids"
    if expect.get("warnings") is not None and not _is_strs(expect["warnings"]):
        return "`expect.warnings` must be a list of strings"
    if "error" in expect and not isinstance(expect["error"], str):
        return "`expect.error` must be a string"
    return None


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


def _deciding(p: PathDecision) -> tuple[str, ...]:
    """The rules that decided path *p*: those that rejected a candidate ranked above the chosen
    one, then the ``prefer`` rules that reordered its candidates."""
    return (*p.rules, *(r for r in p.preferred_by if r not in p.rules))


def _exercised(decision: Any) -> frozenset[str]:
    """Every rule *decision* read: the rules that rejected or were overridden for a candidate,
    that preferred one, and those an assumption rests on."""
    out: set[str] = set()
    for p in decision.paths.values():
        out.update(p.rules, p.preferred_by)
        for c in p.candidates:
            out.update(c.rules, c.overridden)
    out.update(a.rule for a in decision.assumptions)
    return frozenset(out)


def _served_facts(given: Mapping[str, Any], policy: Any) -> Any:
    """The facts of a case written as a launch line, assembled as ``explain -- LINE`` assembles
    them: the case's other ``given`` fields are explain's options; no process environment."""
    import argparse
    import shlex

    from ..deployment.options import options_facts
    from ..releases import DEFAULT, spec

    line = given["serve"]
    words = shlex.split(line) if isinstance(line, str) else [str(w) for w in line]
    args = argparse.Namespace(
        **{f.dest: None for f in spec(DEFAULT).flags},
        gpu=None if given.get("gpu") is None else str(given["gpu"]),
        model_type=None,
        quant=None,
        scale_fmt=None,
        fact=[f"{k}={v}" for k, v in (given.get("facts") or {}).items()],
        env=[f"{k}={v}" for k, v in (given.get("env") or {}).items()],
        engine=None if given.get("engine") is None else str(given["engine"]),
        allow=[],
        no_env=True,
        serve=words,
    )
    args.moe_backend, args.linear_backend = given.get("moe_backend"), given.get("linear_backend")
    return options_facts(args, policy, read_env=False).facts


def given_facts(given: Mapping[str, Any], policy: Any) -> Any:
    """The facts a case's ``given`` states (a launch line, or GPU, model, engine, facts and env),
    as ``kernelpolicy test`` and the editor's case lens read them.

    :raises KernelPolicyError: a value the fact pipeline refuses, or an engine release kernelpolicy
        does not know (as ``explain --engine`` refuses it).
    """
    from ..deployment import facts_for
    from ..deployment.pipeline import engine_facts

    engine = engine_facts(str(given["engine"])) if given.get("engine") is not None else {}
    _known_release(engine)
    if given.get("serve") is not None:
        return _served_facts(given, policy)
    return facts_for(
        gpu=given.get("gpu"),
        model=given.get("model"),
        facts={**engine, **(given.get("facts") or {})},
        env={k: str(v) for k, v in (given.get("env") or {}).items()},
        moe_backend=given.get("moe_backend"),
        linear_backend=given.get("linear_backend"),
        policy=policy,
    )


def run_case(  # noqa: PLR0912 (predates the lint; split in a follow-up)
    file: Path, policies: dict[tuple[str, ...], Any] | None = None, extra: Sequence[str] = ()
) -> CaseResult:
    """Resolve one case file and compare the decision with its ``expect``; *extra* policy files
    load on top of the case's own (``kernelpolicy test --policy``)."""
    from ..dsl.loader import load_policy
    from ..resolver import resolve

    try:
        loc = load_located(SourceFile(file, str(file), "policy").read_text(), str(file))
    except SourceError as exc:
        return CaseResult(str(file), file.stem, error=exc.diagnostic.one_line())
    except YamlError as exc:
        return CaseResult(str(file), file.stem, error=exc.diagnostic.one_line())
    data = loc.data
    problem = case_problem(data)
    if problem is not None:
        name = data.get("name") if isinstance(data, Mapping) and isinstance(data.get("name"), str) else None
        return CaseResult(str(file), name or file.stem, error=f"{file}: {problem}")
    name = str(data.get("name") or file.stem)
    given, expect = data["given"], data["expect"]
    named = given.get("policy") or ()
    policy_files = tuple(str((file.parent / p).resolve()) for p in ([named] if isinstance(named, str) else named))
    policy_files += tuple(str(Path(p).resolve()) for p in extra)
    cache = policies if policies is not None else {}
    try:
        if policy_files not in cache:
            cache[policy_files] = load_policy(list(policy_files), environ=False)
        policy = cache[policy_files]
        decision = resolve(given_facts(given, policy), policy)
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
            msg = _expect_backend(path, expect[path], p.backend, _deciding(p))
            if msg:
                failures.append(msg)
    if "warmup" in expect and list(decision.warmup) != list(expect["warmup"] or []):
        failures.append(f"warmup: expected {list(expect['warmup'] or [])}, got {list(decision.warmup)}")
    for path, ids in (expect.get("rules") or {}).items():
        have = _deciding(decision.paths[path]) if path in decision.paths else ()
        missing = [i for i in ids if i not in have]
        if missing:
            failures.append(f"{path}: expected rule(s) {missing} among the deciding rules {list(have)}")
    for needle in expect.get("warnings") or []:
        if not any(needle in w for w in decision.warnings):
            failures.append(f"warnings: none contains `{needle}` (got {list(decision.warnings)})")
    return CaseResult(str(file), name, tuple(failures), warnings=decision.warnings, exercised=_exercised(decision))


def run_cases(files: Iterable[Path], extra: Sequence[str] = ()) -> list[CaseResult]:
    """Run every case, sharing loaded policies between cases with the same policy files; *extra*
    policy files load under every case (``kernelpolicy test --policy``)."""
    cache: dict[tuple[str, ...], Any] = {}
    return [run_case(f, cache, extra) for f in files]


def coverage(results: Iterable[CaseResult], rule_ids: Iterable[str]) -> tuple[list[str], list[str]]:
    """Of *rule_ids*, those some case's decision read and those none did (``test --coverage``),
    each sorted."""
    seen = frozenset().union(*(r.exercised for r in results))
    ids = sorted(set(rule_ids))
    return [i for i in ids if i in seen], [i for i in ids if i not in seen]


def _known_release(engine: Mapping[str, Any]) -> None:
    """:raises UsageError: the vLLM release named is not one kernelpolicy knows (an SGLang
    release between scanned ones is a fact the rules compare, as `explain` reads it)."""
    from ..errors import UsageError

    if engine.get("vllm.version") is not None:
        from ..releases.vllm.versions import SUPPORTED, patch_points_for

        if patch_points_for(str(engine["vllm.version"])) is None:
            raise UsageError(
                f"engine `vllm=={engine['vllm.version']}`: not a vLLM release kernelpolicy knows "
                f"(known: {', '.join(SUPPORTED)})"
            )
