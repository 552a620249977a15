"""vLLM's own vocabulary on kernelpolicy's command line.

A deployment can be described as vLLM takes it: its flag spellings (``-tp``,
``--quantization``, ``--kv-cache-dtype``, ...), its YAML ``--config`` file, or a whole serve line
after ``--`` (``kernelpolicy explain --gpu GB10 -- vllm serve MODEL -tp 2``). One table of vLLM
flags (:data:`VLLM_FLAGS`) feeds both the explain options and the serve-line reader, so a flag
means the same wherever it is written. What each flag sets is in :func:`deployment_facts`.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NoReturn

from .._paths import expand_user
from ..engines.sglang.flags import FLAGS as SGLANG_FLAGS
from ..engines.sglang.flags import LAUNCHERS as SGLANG_LAUNCHERS
from ..engines.sglang.flags import SERVE_DEFAULTS as SGLANG_SERVE_DEFAULTS
from ..engines.sglang.flags import facts_of as sglang_facts_of
from ..engines.sglang.flags import parser_release as sglang_parser_release
from ..engines.sglang.flags import read_spellings as sglang_spellings
from ..engines.table import Flag
from ..engines.vllm.flags import FLAGS as VLLM_FLAGS
from ..engines.vllm.flags import SERVE_DEFAULTS, backend_name, facts_of
from ..errors import UsageError, did_you_mean
from ..facts.quant import KNOWN_METHODS

if TYPE_CHECKING:
    from ..facts import Facts
    from ..facts.hub import HubOptions
    from ..policy import Policy

__all__ = [
    "QUANTIZATION_METHODS",
    "VLLM_FLAGS",
    "Deployment",
    "LaunchLine",
    "add_vllm_options",
    "apply_quantization",
    "check_allow",
    "check_engine",
    "deployment_facts",
    "engine_quantized",
    "env_warnings",
    "hub_options",
    "known_values",
    "launch_line",
    "read_deployment",
]


#: ``quant_method`` of a checkpoint, and the ``--quantization`` values vLLM accepts for it.
_COMPATIBLE: Final = {
    "gptq": ("gptq", "gptq_marlin", "marlin"),
    "awq": ("awq", "awq_marlin", "marlin"),
    "modelopt": ("modelopt", "modelopt_fp4", "modelopt_mxfp8"),
    "fp8": ("fp8", "ptpc_fp8"),
}
#: Online quantization of an unquantized checkpoint (``vllm serve BF16-MODEL --quantization fp8``).
_ONLINE: Final[dict[str, dict[str, object]]] = {
    "fp8": {"quant.scheme": "fp8_tensor", "quant.activation_scheme": "dynamic", "quant.scale_fmt": "fp32"},
    "ptpc_fp8": {"quant.scheme": "fp8_channel", "quant.activation_scheme": "dynamic", "quant.scale_fmt": "fp32"},
    "mxfp8": {"quant.scheme": "mxfp8", "quant.scale_fmt": "ue8m0"},
}
#: SGLang's online quantization of an unquantized checkpoint (``--quantization fp8``): per-channel
#: dense weights (``Fp8LinearMethod.process_weights_after_loading``: CUTLASS and Marlin take only
#: per-channel scales), one scale per expert (``Fp8MoEMethod``), dynamic activations.
_SGLANG_ONLINE: Final[dict[str, dict[str, object]]] = {
    "fp8": {
        "quant.scheme": "fp8_channel",
        "quant.moe_scheme": "fp8_tensor",
        "quant.activation_scheme": "dynamic",
        "quant.scale_fmt": "fp32",
    },
}
_ENGINE_NAMES: Final = {"vllm": "vLLM", "sglang": "SGLang"}
#: ``--quantization`` values of the methods kernelpolicy decides (shell completion lists them).
QUANTIZATION_METHODS: Final = tuple(
    sorted({*(m for ms in _COMPATIBLE.values() for m in ms), *_ONLINE, "compressed-tensors", "mxfp4"})
)
_ENV_ASSIGN: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.S)
_ENTRYPOINTS: Final = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
_MAX_CONFIG_BYTES: Final = 1024 * 1024
#: vLLM flags that change the model config vLLM builds (and so the facts), which kernelpolicy
#: does not apply: a serve line with one is refused, with what to do instead.
_CONFIG_FLAGS: Final = {
    "--hf-config-path": "decide from that config instead: `--model {value}`",
    "--hf-overrides": "apply the overrides to a copy of the checkpoint's config.json and pass that folder as --model",
    "--config-format": "a Mistral-format checkpoint (`params.json`) has no config.json kernelpolicy can read;"
    " give its Hugging Face folder or id",
}
#: ``--config-format`` values that read the checkpoint's config.json, as kernelpolicy does.
_HF_FORMATS: Final = ("auto", "hf")


def add_vllm_options(p: argparse.ArgumentParser) -> None:
    """vLLM's flags as explain options, and the serve line after ``--``."""
    for flag in VLLM_FLAGS:
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
        help="a vLLM serve line (after `--`): its model, flags and leading VAR=VALUE environment",
    )


class _ServeParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"serve line: {message}")


def _serve_parser(flags: Sequence[Flag] = VLLM_FLAGS, prog: str = "vllm serve") -> argparse.ArgumentParser:
    p = _ServeParser(prog=prog, add_help=False, allow_abbrev=False)
    for flag in flags:
        if flag.store_true:
            p.add_argument(*flag.names, dest=flag.dest, action="store_true", default=None)
        else:
            p.add_argument(*flag.names, dest=flag.dest, type=flag.type)
    return p


#: Flags per argparse call: argparse's parse is quadratic in the number of options on a line
#: (16,000 ignored `--foo 1` pairs took 21 s), so a line is parsed in runs of this many.
_FLAGS_PER_PARSE: Final = 64


def _parse_known(parser: argparse.ArgumentParser, tokens: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """``parser.parse_known_args(tokens)`` in linear time: the set values (a later flag wins) and
    the unread tokens in order, as one call would give them.

    The line is cut before a flag (as argparse tells a flag from a value, ``-5`` being a value)
    into runs of :data:`_FLAGS_PER_PARSE` flags; a flag's value never crosses a flag, so each run
    reads as it reads within the whole line. ``--`` ends the flags: it and the rest are one run.
    """
    runs: list[list[str]] = [[]]
    flags = 0
    for i, token in enumerate(tokens):
        if token == "--":
            runs.append(list(tokens[i:]))
            break
        if parser._parse_optional(token) is not None:  # argparse's own test of a flag
            flags += 1
            if flags > _FLAGS_PER_PARSE:
                runs.append([])
                flags = 1
        runs[-1].append(token)
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for run in runs:
        if not run:
            continue
        ns, extra = parser.parse_known_args(run)
        values.update({k: v for k, v in vars(ns).items() if v is not None})
        unknown += extra
    return values, unknown


def _dashes(token: str) -> str:
    """vLLM's spelling rule: ``--tensor_parallel_size`` is ``--tensor-parallel-size``."""
    if not token.startswith("--"):
        return token
    name, eq, value = token.partition("=")
    return name.replace("_", "-") + eq + value


def _check_config_value(path: str, key: str, value: object, flags: Sequence[Flag] = VLLM_FLAGS) -> None:
    """A ``--config`` value of the kind its flag takes: vLLM would read ``"false"`` for a switch as
    the switch turned on, and keep one of two sizes; refused instead of mis-read."""
    flag = next(
        (f for f in flags if f.dest == key.replace("-", "_") or ("--" + key.replace("_", "-")) in f.names), None
    )
    if flag is None or value is None:
        return
    if flag.store_true and not isinstance(value, bool):
        raise UsageError(f"--config `{path}`: `{key}` takes true or false, got `{value!r}`")
    if not flag.store_true and isinstance(value, list | tuple | Mapping | bool):
        raise UsageError(f"--config `{path}`: `{key}` takes one value, got `{value!r}`")


def _config_tokens(path: str, engine: str = "vllm") -> list[str]:
    """A vLLM YAML ``--config`` file as flags (``key: value`` is ``--key value``); SGLang's
    (*engine* ``sglang``) keeps the key as written (``--tp-size 8``, ``--tp 8``, as its
    ``ConfigArgumentMerger`` does)."""
    from .._files import ReadError, read_bounded
    from ..dsl.files import YamlError, load_located

    file = expand_user(path)
    try:  # bounded (a FIFO or /dev/zero is refused at once), then the rule files' safe YAML
        text = read_bounded(file, _MAX_CONFIG_BYTES).decode("utf-8")
        data = load_located(text, f"--config `{path}`").data  # no aliases (bombs), depth-limited
    except ReadError as exc:
        reason = "larger than 1 MiB" if exc.too_large else f"cannot be read ({exc.reason})"
        raise UsageError(f"--config `{path}`: {reason}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--config `{path}`: not UTF-8 text") from None
    except YamlError as exc:
        d = exc.diagnostic
        where = f" at line {d.line}" if d.line else ""
        raise UsageError(f"--config `{path}`: not valid YAML{where}: {d.message}") from None
    if data is None:
        return []
    if not isinstance(data, Mapping):
        raise UsageError(f"--config `{path}`: expected a mapping of {_ENGINE_NAMES[engine]} flag names to values")
    tokens: list[str] = []
    for key, value in data.items():
        if engine == "sglang":
            _check_config_value(path, str(key), value, SGLANG_FLAGS)
            tokens += _flag_tokens("--" + str(key), value)
            continue
        _check_config_value(path, str(key), value)
        tokens += _flag_tokens("--" + str(key).replace("_", "-"), value)
    return tokens


def _flag_tokens(flag: str, value: object) -> list[str]:
    """One ``key: value`` of a vLLM YAML config as command-line tokens."""
    if isinstance(value, bool):
        return [flag] if value else []
    if isinstance(value, list | tuple):
        return [flag, *map(str, value)]
    if isinstance(value, Mapping):
        # a mapping that rewrites the model config is refused (_refuse_config_flags); other
        # JSON-valued flags (--compilation-config ...) bear on no kernel choice
        return [flag, json.dumps(value)] if flag in _CONFIG_FLAGS else []
    return [] if value is None else [flag, str(value)]


@dataclass(frozen=True)
class _Serve:
    values: dict[str, Any]
    env: dict[str, str]
    ignored: tuple[str, ...]
    engine: str = "vllm"  #: whose launch line it is (``vllm``, ``sglang``)
    notes: tuple[str, ...] = ()  #: warnings of the engine's reading, one line each


def _command(rest: list[str]) -> tuple[str, list[str]]:
    """The engine a launch line starts, and the tokens after its command: ``vllm serve``,
    ``python -m vllm.entrypoints.openai.api_server``, ``sglang serve``, ``python3 -m
    sglang.launch_server`` (any ``python*`` interpreter, by name or path); no command: vLLM's."""
    head = rest[:1]
    if head == ["vllm"]:
        if rest[1:2] != ["serve"]:
            raise UsageError("serve line: expected `vllm serve MODEL [FLAGS]`", help="the command after `--`")
        return "vllm", rest[2:]
    if head == ["sglang"]:
        if rest[1:2] != ["serve"]:
            raise UsageError("serve line: expected `sglang serve --model-path MODEL [FLAGS]`")
        return "sglang", rest[2:]
    if len(rest) >= 3 and rest[0].rsplit("/", 1)[-1].startswith("python") and rest[1] == "-m":
        if rest[2] in _ENTRYPOINTS:
            return "vllm", rest[3:]
        if rest[2] in SGLANG_LAUNCHERS:
            return "sglang", rest[3:]
        raise UsageError(
            f"serve line: `{rest[0]} -m {rest[2]}` starts neither vLLM nor SGLang",
            help="expected `vllm serve`, `python -m vllm.entrypoints.openai.api_server`, `sglang serve` or"
            " `python -m sglang.launch_server`",
        )
    return "vllm", rest


@dataclass(frozen=True)
class LaunchLine:
    """The user's own launch line, as typed, for printing it back with kernelpolicy's flags."""

    engine: str  #: ``vllm`` or ``sglang``: whose line it is
    env: Mapping[str, str]  #: its leading ``VAR=VALUE`` assignments, in order
    command: tuple[str, ...]  #: ``vllm serve``, ``python -m sglang.launch_server``, ...
    rest: tuple[str, ...]  #: the model and every flag after the command, as given


def _parse_sglang(rest: list[str], positional: str | None, env: dict[str, str], release: str | None) -> _Serve:
    """An SGLang launch line's flags, read as SGLang *release*'s parser reads them (abbreviations
    written out first); the ignored and unknown flags named as the line wrote them."""
    rel = sglang_parser_release(release)
    rest = _sglang_config(rest)
    spelled = sglang_spellings(rest, rel)
    written = {
        new.partition("=")[0]: old.partition("=")[0] for new, old in zip(spelled, rest, strict=True) if new != old
    }
    values, unread = _parse_known(_serve_parser(SGLANG_FLAGS, "sglang serve"), spelled)
    _check_sglang_choices(values)
    model = values.pop("model_path", None)
    if positional is not None and model is not None and model != positional:
        raise UsageError(f"serve line: two models, `{positional}` and `--model-path {model}`")
    if model or positional:
        values["model"] = model or positional
    flags = [t.partition("=")[0] for t in unread if t.startswith("-")]
    ignored = tuple(written.get(f, f) for f in flags if f in rel.options)
    unknown = [f for f in flags if f not in rel.options]
    notes = (unknown_note(unknown, f"SGLang {rel.version}", rel.options),) if unknown else ()
    return _Serve(values, env, ignored, "sglang", notes)


def _split_line(tokens: Sequence[str]) -> list[str]:
    rest = list(tokens)
    if len(rest) == 1 and " " in rest[0]:
        try:
            rest = shlex.split(rest[0])  # the whole line quoted as one argument
        except ValueError as exc:  # an unclosed quote
            raise UsageError(f"serve line: {str(exc).lower()}", help="the command after `--`") from None
    return rest


def _leading_env(rest: list[str]) -> dict[str, str]:
    """The line's leading ``VAR=VALUE`` assignments, taken off the front of *rest*."""
    env: dict[str, str] = {}
    while rest and (m := _ENV_ASSIGN.match(rest[0])):
        env[m.group(1)] = m.group(2)
        rest.pop(0)
    return env


def launch_line(args: argparse.Namespace) -> LaunchLine | None:
    """The launch line after ``--`` in *args* (``explain``'s), or one built from the vLLM flags
    given as ``explain`` options (``vllm serve MODEL -tp 8 ...``); None when neither says more
    than the model (the printed line is then the generic one)."""
    tokens = list(getattr(args, "serve", None) or ())
    if tokens:
        rest = _split_line(tokens)
        env = _leading_env(rest)
        engine, after = _command(rest)
        command = tuple(rest[: len(rest) - len(after)]) or ("vllm", "serve")
        given = {_dashes(t).partition("=")[0] for t in after}
        extra = _option_tokens(args, given) if engine == "vllm" else []
        return LaunchLine(engine, env, command, (*after, *extra))
    options = _option_tokens(args, set())
    if not options:
        return None
    model = getattr(args, "model", None)
    return LaunchLine("vllm", {}, ("vllm", "serve"), (*((model,) if model else ()), *options))


def _option_tokens(args: argparse.Namespace, given: set[str]) -> list[str]:
    """The vLLM flags given as ``explain`` options and not on the line (*given*: its flag
    names), as vLLM spells them. Read *args* before the serve line is merged into it."""
    out: list[str] = []
    for flag in VLLM_FLAGS:
        value = getattr(args, flag.dest, None) if flag.native else None
        if value is None or given & set(flag.names):
            continue
        if flag.store_true:
            out += [flag.names[0]] if value else []
        else:
            out += [flag.names[0], str(value)]
    return out


def _parse_serve(tokens: Sequence[str], sglang_release: str | None = None) -> _Serve:
    """A launch line (``[VAR=VALUE ...] vllm serve MODEL [FLAGS]``, or SGLang's) as flag values,
    read through that engine's one flag table, spelled as that engine's parser reads it (an
    SGLang line: SGLang *sglang_release*'s, abbreviations included)."""
    rest = _split_line(tokens)
    env = _leading_env(rest)
    engine, rest = _command(rest)
    positional = rest.pop(0) if rest and not rest[0].startswith("-") else None  # vllm serve MODEL
    if engine == "sglang":
        return _parse_sglang(rest, positional, env, sglang_release)
    rest = [_dashes(t) for t in rest]
    parser = _serve_parser()
    values, unknown = _parse_known(parser, rest)
    # --config first, then the line itself: the line wins, as in vLLM
    if "vllm_config" in values:
        from_file, unknown_file = _parse_known(parser, _config_tokens(values["vllm_config"]))
        values = {**from_file, **values}
        unknown += unknown_file
    if positional is not None and values.setdefault("model", positional) != positional:
        raise UsageError(f"serve line: two models, `{positional}` and `--model {values['model']}`")
    _refuse_config_flags(unknown)
    ignored = tuple(t for t in unknown if t.startswith("-") and t.partition("=")[0] not in _CONFIG_FLAGS)
    return _Serve(values, env, ignored)


def _sglang_config(tokens: list[str]) -> list[str]:
    """An SGLang line's tokens with a ``--config FILE`` (that exact token, as
    ``prepare_server_args`` looks for it) replaced by the file's flags before the line's (the
    line wins)."""
    at = [i for i, t in enumerate(tokens) if t == "--config"]
    if len(at) > 1:
        raise UsageError("serve line: `--config` twice: SGLang takes one config file")
    if at:
        i = at[0]
        if i + 1 >= len(tokens):
            raise UsageError("serve line: `--config` without a file")
        path = tokens[i + 1]
        if not path.lower().endswith((".yaml", ".yml")):
            raise UsageError(f"serve line: --config `{path}`: SGLang reads only a .yaml or .yml file")
        tokens = [*_config_tokens(path, engine="sglang"), *tokens[:i], *tokens[i + 2 :]]
    return tokens


def _check_sglang_choices(values: Mapping[str, Any]) -> None:
    """:raises UsageError: a backend flag's value no known SGLang release accepts (SGLang's
    parser refuses it: ``invalid choice``)."""
    from ..releases.sglang.versions import known_releases

    for flag in SGLANG_FLAGS:
        value = values.get(flag.dest)
        choices = sorted({c for r in known_releases().values() for c in r.flags.get(flag.names[0], ())})
        if value is None or not choices or str(value) in choices:
            continue
        hint = did_you_mean(str(value), choices)
        raise UsageError(
            f"serve line: {flag.names[0]} `{str(value)[:_FLAG_SHOWN]}`: not a value SGLang accepts"
            + (f" (did you mean `{hint[0]}`?)" if hint else f" ({', '.join(choices)})")
        )


#: The ignored flags one warning names (a line of 16,000 of them gave one 100 KB line).
_IGNORED_SHOWN: Final = 8
_FLAG_SHOWN: Final = 40


def ignored_note(ignored: Sequence[str]) -> str:
    """The one warning for a serve line's ignored flags: each name once, the first
    :data:`_IGNORED_SHOWN` of them, each cut to :data:`_FLAG_SHOWN` characters, and how many more."""
    names = list(dict.fromkeys(ignored))
    shown = ", ".join(
        f"`{n if len(n) <= _FLAG_SHOWN else n[: _FLAG_SHOWN - 3] + '...'}`" for n in names[:_IGNORED_SHOWN]
    )
    more = len(names) - _IGNORED_SHOWN
    tail = f" and {more} more" if more > 0 else ""
    return f"serve line: flags that decide no kernel, ignored: {shown}{tail}"


def unknown_note(flags: Sequence[str], parser: str, options: Collection[str]) -> str:
    """The one warning for a launch line's flags that are no option of the engine's *parser*
    (which refuses such a line), with the option the first one likely meant."""
    names = list(dict.fromkeys(flags))
    shown = ", ".join(
        f"`{n if len(n) <= _FLAG_SHOWN else n[: _FLAG_SHOWN - 3] + '...'}`" for n in names[:_IGNORED_SHOWN]
    )
    more = len(names) - _IGNORED_SHOWN
    hint = did_you_mean(names[0], sorted(options))
    tail = (f" and {more} more" if more > 0 else "") + (f" (did you mean `{hint[0]}`?)" if hint else "")
    return f"serve line: not options of {parser}, which refuses the line; ignored: {shown}{tail}"


def _refuse_config_flags(unknown: Sequence[str]) -> None:
    """:raises UsageError: *unknown* (a serve line's unread tokens) has a flag of
    :data:`_CONFIG_FLAGS` that changes the model config (``--config-format auto|hf`` does not)."""
    for i, token in enumerate(unknown):
        name, eq, value = token.partition("=")
        if name not in _CONFIG_FLAGS:
            continue
        if not eq:
            following = unknown[i + 1] if i + 1 < len(unknown) else ""
            value = "" if following.startswith("-") else following
        if name == "--config-format" and value.strip().lower() in _HF_FORMATS:
            continue
        shown = f"{name} {value}".strip() if len(value) <= 40 else name
        raise UsageError(
            f"serve line: `{shown}` changes the model config vLLM builds, which kernelpolicy does not read",
            help=_CONFIG_FLAGS[name].format(value=value or "PATH"),
        )


@dataclass(frozen=True)
class Deployment:
    """A deployment as explain's options and a serve line describe it, merged."""

    args: argparse.Namespace  #: explain's options, with the serve line's filled in
    facts: dict[str, Any] = field(default_factory=dict)  #: facts the vLLM flags set (source user)
    quantization: str | None = None
    notes: tuple[str, ...] = ()  #: warnings for stderr, one line each
    engine: str = "vllm"  #: whose launch line it was


def _merge(args: argparse.Namespace, serve: _Serve) -> argparse.Namespace:
    merged = argparse.Namespace(**vars(args))
    for dest, value in serve.values.items():
        if dest == "vllm_config" or (serve.engine != "vllm" and dest not in ("model", "quantization")):
            continue
        mine = getattr(merged, dest, None)
        if mine is None:
            setattr(merged, dest, value)
        elif mine != value:
            flag = next((f.names[0] for f in VLLM_FLAGS if f.dest == dest), "--" + dest.replace("_", "-"))
            raise UsageError(f"{flag} given twice: `{mine}` as an option and `{value}` in the serve line")
    merged.env = [f"{k}={v}" for k, v in serve.env.items()] + list(getattr(args, "env", []) or [])
    return merged


def deployment_facts(args: argparse.Namespace) -> dict[str, Any]:
    """The facts vLLM's flags in *args* set (:func:`kernelpolicy.engines.vllm.flags.facts_of`)."""
    return facts_of({f.dest: getattr(args, f.dest, None) for f in VLLM_FLAGS})


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
    """explain's options with the launch line (and any vLLM ``--config`` file) merged in.

    :param policy: the loaded policy (an SGLang line's backend names are read through its
        SGLang vocabulary); required for an SGLang line.
    :raises UsageError: the line cannot be read, or says something an option contradicts.
    """
    tokens = list(getattr(args, "serve", None) or [])
    notes: list[str] = []
    serve = _Serve({}, {}, ())
    if tokens:
        serve = _parse_serve(tokens, _sglang_release(getattr(args, "engine", None)))
    elif getattr(args, "vllm_config", None):
        serve = _parse_serve(["--config", args.vllm_config])
    merged = _merge(args, serve)
    for dest in ("moe_backend", "linear_backend"):
        setattr(merged, dest, backend_name(getattr(merged, dest, None)))  # auto: vLLM's own choice, explained
    values = {f.dest: getattr(merged, f.dest, None) for f in VLLM_FLAGS}
    if serve.engine == "vllm" and (tokens or getattr(args, "vllm_config", None)):
        # a whole serve line: what it leaves out is vLLM's default, not unknown
        values = {**SERVE_DEFAULTS, **{k: v for k, v in values.items() if v is not None}}
    # the backend flags reach the assembly as explicit choices (engine names read as aliases there)
    facts = {k: v for k, v in facts_of(values).items() if k not in ("deploy.moe_backend", "deploy.linear_backend")}
    if serve.engine == "sglang":
        if policy is None or "sglang" not in policy.engines:
            raise UsageError("serve line: an SGLang line needs the SGLang vocabulary (rules/engines/sglang.yaml)")
        line = {**SGLANG_SERVE_DEFAULTS, **serve.values}
        facts = {**facts, **sglang_facts_of(line, policy.engines["sglang"]), "deploy.engine": "sglang"}
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


def _sglang_release(spec: str | None) -> str | None:
    """The SGLang release an ``--engine`` value names (None: another engine, or none named)."""
    from .pipeline import parse_engine

    if not spec:
        return None
    name, version = parse_engine(spec)
    return version if name == "sglang" else None


def hub_options(args: argparse.Namespace) -> HubOptions:
    """Where the model id is looked up: the environment (with the deployment's ``--env`` and
    serve-line assignments on top: ``VLLM_USE_MODELSCOPE=1 vllm serve ...``), ``--revision``
    and ``--download-dir``."""
    import os

    from ..facts.hub import HubOptions

    given = dict(str(a).partition("=")[::2] for a in getattr(args, "env", None) or [] if "=" in str(a))
    return HubOptions.from_env(
        {**os.environ, **given},
        revision=getattr(args, "revision", None),
        download_dir=getattr(args, "download_dir", None),
    )


def apply_quantization(facts: Facts, method: str | None, engine: str = "vllm") -> Facts:
    """*facts* with *engine*'s ``--quantization`` applied, as that engine applies it.

    A quantized checkpoint keeps its method (vLLM refuses a different one, and so does this);
    an unquantized one is quantized online (``fp8``: per-tensor weights, dynamic activations).

    :raises UsageError: the flag contradicts the checkpoint, or the quantization (the
        checkpoint's or the flag's) is outside the FP8/FP4 paths kernelpolicy decides.
    """
    out = _quantized(facts, method, engine)
    name = _ENGINE_NAMES.get(engine, engine)
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


def _quantized(facts: Facts, method: str | None, engine: str = "vllm") -> Facts:
    from ..facts import Facts

    if method is None:
        return facts
    method = method.lower().replace("_", "-") if method.lower() == "compressed_tensors" else method.lower()
    have = facts.get("quant.method")
    if have is not None:
        if method == have or method in _COMPATIBLE.get(str(have), ()):
            return facts
        raise UsageError(
            f"--quantization `{method}` does not match the checkpoint's quantization `{have}`"
            f" ({_ENGINE_NAMES.get(engine, engine)} refuses it too)"
        )
    if facts.get("quant.scheme") not in (None, "none"):
        return facts
    online = (_SGLANG_ONLINE if engine == "sglang" else _ONLINE).get(method)
    if online is None:
        return facts.merged(Facts.from_values({"quant.method": method, "quant.method_known": False}, source="user"))
    values: dict[str, object] = {"quant.method": method, "quant.method_known": True}
    values.update({k: v for k, v in online.items() if k != "quant.moe_scheme"})
    if facts.get("model.is_moe"):
        values["quant.moe_scheme"] = online.get("quant.moe_scheme", online["quant.scheme"])
    return facts.merged(Facts.from_values(values, source="user"))


def env_warnings(names: Sequence[str], policy: Policy) -> list[str]:
    """Warnings for ``VLLM_*`` variables no rule reads, with did-you-mean for misspellings: one
    line for each of the first :data:`_IGNORED_SHOWN`, one line for the rest."""
    from .pipeline import env_names

    known = env_names(policy)
    unread = [n for n in dict.fromkeys(names) if n.startswith("VLLM_") and n not in known]
    out = []
    for name in unread[:_IGNORED_SHOWN]:
        hint = did_you_mean(name, known)
        tail = f" (did you mean `{hint[0]}`?)" if hint else "; it does not change the decision"
        out.append(f"--env `{name}`: no rule reads this vLLM variable{tail}")
    rest = unread[_IGNORED_SHOWN:]
    if rest:  # 20,000 of them were 20,000 lines
        shown = ", ".join(f"`{n[:_FLAG_SHOWN]}`" for n in rest[:_IGNORED_SHOWN])
        more = f" and {len(rest) - _IGNORED_SHOWN:,} more" if len(rest) > _IGNORED_SHOWN else ""
        out.append(
            f"--env: {len(rest):,} more vLLM variables no rule reads: {shown}{more}; they do not change the decision"
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


def check_engine(version: str) -> None:
    """:raises UsageError: *version* is not a vLLM release kernelpolicy knows."""
    from ..releases.vllm.versions import SUPPORTED, patch_points_for

    if patch_points_for(version.strip()) is None:
        known = ", ".join(SUPPORTED)
        raise UsageError(f"--engine `vllm=={version.strip()}`: not a vLLM release kernelpolicy knows (known: {known})")
