"""A deployment as an engine's launch line describes it, on kernelpolicy's command line.

A deployment can be described as the engine takes it: ``explain``'s options are the default
engine's flags (vLLM's spellings: ``-tp``, ``--quantization``, ``--kv-cache-dtype``, ...) and its
YAML ``--config`` file, or a whole launch line after ``--`` (``kernelpolicy explain --gpu GB10 --
vllm serve MODEL -tp 2``, ``-- python -m sglang.launch_server --model-path M --tp 8``). Which
engine a line starts, how that engine's parser reads it and what its flags set are the engine's
spec (:mod:`kernelpolicy.releases`); this module names no engine.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..errors import UsageError, did_you_mean
from ..facts.quant import KNOWN_METHODS
from ..releases import DEFAULT, command_of, parse_engine, spec, specs, title
from ..releases.line import LineValues, ignored_note, leading_env, split_line, unknown_note

if TYPE_CHECKING:
    from ..facts import Facts
    from ..facts.hub import HubOptions
    from ..policy import Policy
    from ..releases.engine import EngineSpec

__all__ = [
    "Deployment",
    "LaunchLine",
    "add_vllm_options",
    "apply_quantization",
    "check_allow",
    "deployment_facts",
    "engine_quantized",
    "env_warnings",
    "hub_options",
    "ignored_note",
    "known_values",
    "launch_line",
    "quantization_methods",
    "read_deployment",
    "unknown_note",
]

#: The ignored variables one warning names one by one.
_ENV_SHOWN: Final = 8
_NAME_SHOWN: Final = 40


def quantization_methods() -> tuple[str, ...]:
    """The ``--quantization`` values of the methods kernelpolicy decides, of every engine (shell
    completion lists them)."""
    methods = {m for e in specs() for ms in e.compatible.values() for m in ms}
    methods |= {m for e in specs() for m in e.online}
    return tuple(sorted({*methods, "compressed-tensors", "mxfp4"}))


def add_vllm_options(p: argparse.ArgumentParser) -> None:
    """The default engine's flags (vLLM's) as explain options, and the launch line after ``--``."""
    for flag in spec(DEFAULT).flags:
        if not flag.native:
            continue
        if flag.store_true:
            p.add_argument(*flag.names, dest=flag.dest, action="store_true", default=None, help=flag.help)
        else:
            p.add_argument(*flag.names, dest=flag.dest, type=flag.type, metavar=flag.metavar, help=flag.help)
    p.add_argument(
        "serve",
        nargs="*",
        metavar="-- vllm serve MODEL [FLAGS]",
        help="a launch line (after `--`): `vllm serve` or `sglang serve` (or `python -m` of either), its model,"
        " flags and leading VAR=VALUE environment",
    )


@dataclass(frozen=True)
class LaunchLine:
    """The user's own launch line, as typed, for printing it back with kernelpolicy's flags."""

    engine: str  #: whose line it is (a spec's name)
    env: Mapping[str, str]  #: its leading ``VAR=VALUE`` assignments, in order
    command: tuple[str, ...]  #: ``vllm serve``, ``python -m sglang.launch_server``, ...
    rest: tuple[str, ...]  #: the model and every flag after the command, as given


def launch_line(args: argparse.Namespace) -> LaunchLine | None:
    """The launch line after ``--`` in *args* (``explain``'s), or one built from the default
    engine's flags given as ``explain`` options (``vllm serve MODEL -tp 8 ...``); None when
    neither says more than the model (the printed line is then the generic one)."""
    default = spec(DEFAULT)
    tokens = list(getattr(args, "serve", None) or ())
    if tokens:
        rest = split_line(tokens)
        env = leading_env(rest)
        engine, taken = command_of(rest)
        after = rest[taken:]
        command = tuple(rest[:taken]) or default.commands[0]
        given = {default.spelled_flag(t).partition("=")[0] for t in after}
        extra = _option_tokens(args, given) if engine is default else []
        return LaunchLine(engine.name, env, command, (*after, *extra))
    options = _option_tokens(args, set())
    if not options:
        return None
    model = getattr(args, "model", None)
    return LaunchLine(default.name, {}, default.commands[0], (*((model,) if model else ()), *options))


def _option_tokens(args: argparse.Namespace, given: set[str]) -> list[str]:
    """The default engine's flags given as ``explain`` options and not on the line (*given*: its
    flag names), as the engine spells them. Read *args* before the line is merged into it."""
    out: list[str] = []
    for flag in spec(DEFAULT).flags:
        value = getattr(args, flag.dest, None) if flag.native else None
        if value is None or given & set(flag.names):
            continue
        if flag.store_true:
            out += [flag.names[0]] if value else []
        else:
            out += [flag.names[0], str(value)]
    return out


def _parse_serve(tokens: Sequence[str], release: str | None = None) -> LineValues:
    """A launch line (``[VAR=VALUE ...] COMMAND [MODEL] [FLAGS]``) as flag values, read through the
    engine's one flag table as that engine's parser reads it (*release*: the release whose
    parser reads it, where that differs by release)."""
    rest = split_line(tokens)
    env = leading_env(rest)
    engine, taken = command_of(rest)
    rest = rest[taken:]
    positional = rest.pop(0) if rest and not rest[0].startswith("-") else None  # vllm serve MODEL
    return engine.read_line(rest, positional, env, release)


@dataclass(frozen=True)
class Deployment:
    """A deployment as explain's options and a launch line describe it, merged."""

    args: argparse.Namespace  #: explain's options, with the line's filled in
    facts: dict[str, Any] = field(default_factory=dict)  #: facts the engine's flags set (source user)
    quantization: str | None = None
    notes: tuple[str, ...] = ()  #: warnings for stderr, one line each
    engine: str = DEFAULT  #: whose launch line it was


def _merge(args: argparse.Namespace, serve: LineValues) -> argparse.Namespace:
    """*args* with the line's values filled in: every value of a default-engine line (an option
    given too must agree), the model and ``--quantization`` of another engine's."""
    merged = argparse.Namespace(**vars(args))
    default = serve.engine == DEFAULT
    for dest, value in serve.values.items():
        if dest == "vllm_config" or (not default and dest not in ("model", "quantization")):
            continue
        mine = getattr(merged, dest, None)
        if mine is None:
            setattr(merged, dest, value)
        elif mine != value:
            flag = next((f.names[0] for f in spec(DEFAULT).flags if f.dest == dest), "--" + dest.replace("_", "-"))
            raise UsageError(f"{flag} given twice: `{mine}` as an option and `{value}` in the serve line")
    merged.env = [f"{k}={v}" for k, v in serve.env.items()] + list(getattr(args, "env", []) or [])
    return merged


def deployment_facts(args: argparse.Namespace) -> dict[str, Any]:
    """The facts the default engine's flags in *args* (explain's options) set."""
    default = spec(DEFAULT)
    return default.facts_of({f.dest: getattr(args, f.dest, None) for f in default.flags}, None)


def known_values(facts: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """*facts* without values outside their key's finite domain (an engine accepts more than the
    rules name, e.g. ``--kv-cache-dtype fp8_ds_mla``): those stay unknown, with a note. The CLI
    and the plugins filter an engine's flag facts through this one function."""
    from ..facts import FACT_KEYS

    out = {}
    for key, value in facts.items():
        if key not in FACT_KEYS:
            continue  # a key this vocabulary does not have (yet)
        domain = FACT_KEYS[key].domain if key in FACT_KEYS else ()
        if domain and value not in domain:
            notes.append(f"`{value}` is not a value of `{key}` the rules know; it is left unknown")
            continue
        out[key] = value
    return out


def read_deployment(args: argparse.Namespace, policy: Policy | None = None) -> Deployment:
    """explain's options with the launch line (and a ``--config`` file) merged in.

    :param policy: the loaded policy (a line's backend names are read through its engine's
        vocabulary, ``rules/engines/<engine>.yaml``).
    :raises UsageError: the line cannot be read, or says something an option contradicts.
    """
    default = spec(DEFAULT)
    tokens = list(getattr(args, "serve", None) or [])
    notes: list[str] = []
    serve = LineValues({}, {}, (), DEFAULT)
    if tokens:
        serve = _parse_serve(tokens, _release_for_line(getattr(args, "engine", None)))
    elif getattr(args, "vllm_config", None):
        serve = _parse_serve(["--config", args.vllm_config])
    merged = _merge(args, serve)
    for dest in ("moe_backend", "linear_backend"):
        setattr(
            merged, dest, default.backend_name(getattr(merged, dest, None))
        )  # auto: the engine's own choice, explained
    values = {f.dest: getattr(merged, f.dest, None) for f in default.flags}
    if serve.engine == DEFAULT and (tokens or getattr(args, "vllm_config", None)):
        # a whole launch line: what it leaves out is the engine's default, not unknown
        values = {**default.serve_defaults, **{k: v for k, v in values.items() if v is not None}}
    # the backend flags reach the assembly as explicit choices (engine names read as aliases there)
    explicit = ("deploy.moe_backend", "deploy.linear_backend")
    facts = {k: v for k, v in default.facts_of(values, None).items() if k not in explicit}
    if serve.engine != DEFAULT:
        engine = spec(serve.engine)
        vocabulary = policy.engines.get(engine.name) if policy is not None else None
        line = {**engine.serve_defaults, **serve.values}
        facts = {**facts, **engine.facts_of(line, vocabulary), "deploy.engine": engine.name}
    if serve.ignored:
        notes.append(ignored_note(serve.ignored))
    notes += serve.notes
    return Deployment(
        args=merged,
        facts=known_values(facts, notes),
        quantization=getattr(merged, "quantization", None),
        notes=tuple(notes),
        engine=serve.engine,
    )


def _release_for_line(value: str | None) -> str | None:
    """The release an ``--engine`` value names, whose parser reads the launch line (None: none
    named; the line's engine is checked against it by the caller)."""
    return parse_engine(value, known=False).version if value else None


def hub_options(args: argparse.Namespace) -> HubOptions:
    """Where the model id is looked up: the environment (with the deployment's ``--env`` and
    launch-line assignments on top: ``VLLM_USE_MODELSCOPE=1 vllm serve ...``), ``--revision``
    and ``--download-dir``."""
    import os

    from ..facts.hub import HubOptions

    given = dict(str(a).partition("=")[::2] for a in getattr(args, "env", None) or [] if "=" in str(a))
    return HubOptions.from_env(
        {**os.environ, **given},
        revision=getattr(args, "revision", None),
        download_dir=getattr(args, "download_dir", None),
    )


def apply_quantization(facts: Facts, method: str | None, engine: str = DEFAULT) -> Facts:
    """*facts* with *engine*'s ``--quantization`` applied, as that engine applies it.

    A quantized checkpoint keeps its method (the engine refuses a different one, and so does
    this); an unquantized one is quantized online as the engine's spec says (vLLM's ``fp8``:
    per-tensor weights, dynamic activations).

    :raises UsageError: the flag contradicts the checkpoint, or the quantization (the
        checkpoint's or the flag's) is outside the FP8/FP4 paths kernelpolicy decides.
    """
    out = _quantized(facts, method, spec(engine))
    name = title(engine)
    if out.get("quant.method_known") is False:
        method = out.get("quant.method")
        if method in KNOWN_METHODS:  # a method kernelpolicy reads, holding no scheme it decides
            raise UsageError(
                f"quantization `{method}`: this checkpoint quantizes no weights in a scheme kernelpolicy decides"
                f" (FP8, FP4, or 4/8-bit integer weights; fact `quant.method_known` is false); {name} picks its"
                " kernels itself"
            )
        raise UsageError(
            f"quantization `{method}` (fact `quant.method_known` is false): kernelpolicy decides"
            " the FP8/FP4 kernels of fp8, compressed-tensors, modelopt, mxfp4, mxfp8, gptq and awq checkpoints;"
            f" {name} picks this method's kernels itself"
        )
    return out


def engine_quantized(values: Mapping[str, Any], method: str, engine: str) -> dict[str, Any]:
    """Fact *values* an engine's plugin read, with the engine's resolved quantization method applied
    as :func:`apply_quantization` applies ``--quantization`` (online FP8 of an unquantized
    checkpoint); where the engine names the checkpoint's method otherwise, *values* as they are
    (the engine accepted the config, so it is no contradiction)."""
    from ..errors import KernelPolicyError
    from ..facts import Facts

    try:
        return dict(apply_quantization(Facts.from_values(values, source=engine), method, engine).values)
    except KernelPolicyError:
        return dict(values)


def _quantized(facts: Facts, method: str | None, engine: EngineSpec) -> Facts:
    from ..facts import Facts

    if method is None:
        return facts
    method = method.lower().replace("_", "-") if method.lower() == "compressed_tensors" else method.lower()
    have = facts.get("quant.method")
    if have is not None:
        if method == have or method in engine.compatible.get(str(have), ()):
            return facts
        raise UsageError(
            f"--quantization `{method}` does not match the checkpoint's quantization `{have}`"
            f" ({engine.title} refuses it too)"
        )
    if facts.get("quant.scheme") not in (None, "none"):
        return facts
    online = engine.online.get(method)
    if online is None:
        return facts.merged(Facts.from_values({"quant.method": method, "quant.method_known": False}, source="user"))
    values: dict[str, object] = {"quant.method": method, "quant.method_known": True}
    values.update({k: v for k, v in online.items() if k != "quant.moe_scheme"})
    if facts.get("model.is_moe"):
        values["quant.moe_scheme"] = online.get("quant.moe_scheme", online["quant.scheme"])
    return facts.merged(Facts.from_values(values, source="user"))


def env_warnings(names: Sequence[str], policy: Policy) -> list[str]:
    """Warnings for an engine's variables no rule reads (of each engine whose spec says the rules
    read all its variables that bear on a kernel: ``VLLM_*``), with did-you-mean for
    misspellings: one line for each of the first :data:`_ENV_SHOWN`, one line for the rest."""
    from .pipeline import env_names

    known = env_names(policy)
    prefixes = {e.env_prefix: e.title for e in specs() if e.env_complete}
    unread = [n for n in dict.fromkeys(names) if n.startswith(tuple(prefixes)) and n not in known]
    out = []
    for name in unread[:_ENV_SHOWN]:
        engine = next(t for p, t in prefixes.items() if name.startswith(p))
        hint = did_you_mean(name, known)
        tail = f" (did you mean `{hint[0]}`?)" if hint else "; it does not change the decision"
        out.append(f"--env `{name}`: no rule reads this {engine} variable{tail}")
    rest = unread[_ENV_SHOWN:]
    if rest:  # 20,000 of them were 20,000 lines
        titles = sorted({t for p, t in prefixes.items() for n in rest if n.startswith(p)})
        shown = ", ".join(f"`{n[:_NAME_SHOWN]}`" for n in rest[:_ENV_SHOWN])
        more = f" and {len(rest) - _ENV_SHOWN:,} more" if len(rest) > _ENV_SHOWN else ""
        out.append(
            f"--env: {len(rest):,} more {'/'.join(titles)} variables no rule reads: {shown}{more};"
            " they do not change the decision"
        )
    return out


def check_allow(rule_ids: Sequence[str], policy: Policy) -> None:
    """:raises UsageError: an ``--allow`` id names no rule and no catalog requirement."""
    known = set(policy.by_id) | {f"catalog.{p}.{b}" for p, entries in policy.backends.items() for b in entries}
    for rule in rule_ids:
        if rule not in known:
            hint = did_you_mean(rule, sorted(known))
            raise UsageError(
                f"--allow `{rule}`: no rule or catalog requirement has this id",
                help=f"did you mean `{hint[0]}`?" if hint else "ids are in `kernelpolicy explain` output and rules/",
            )
