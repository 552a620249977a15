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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NoReturn

from .._paths import expand_user
from ..errors import UsageError, did_you_mean

if TYPE_CHECKING:
    from ..facts import Facts
    from ..facts.hub import HubOptions
    from ..policy import Policy

__all__ = [
    "VLLM_FLAGS",
    "Deployment",
    "add_vllm_options",
    "apply_quantization",
    "check_allow",
    "check_engine",
    "deployment_facts",
    "env_warnings",
    "hub_options",
    "read_deployment",
]


@dataclass(frozen=True)
class _Flag:
    names: tuple[str, ...]
    dest: str
    help: str
    type: type = str
    store_true: bool = False
    native: bool = True  #: also an option of `kernelpolicy explain` (False: _common declares it)
    metavar: str = "VALUE"


#: vLLM's flags that bear on a kernel decision, with vLLM's spellings.
VLLM_FLAGS: Final = (
    _Flag(
        ("--quantization", "-q"),
        "quantization",
        "vLLM `--quantization`: the checkpoint's method, or online",
        metavar="METHOD",
    ),
    _Flag(
        ("--tensor-parallel-size", "-tp"),
        "tensor_parallel_size",
        "tensor-parallel size (`deploy.tp`)",
        int,
        metavar="N",
    ),
    _Flag(
        ("--data-parallel-size", "-dp"),
        "data_parallel_size",
        "data-parallel size (with expert parallel)",
        int,
        metavar="N",
    ),
    _Flag(
        ("--enable-expert-parallel", "-ep"),
        "enable_expert_parallel",
        "experts sharded over TP x DP ranks (`deploy.ep`)",
        store_true=True,
    ),
    _Flag(
        ("--kv-cache-dtype",), "kv_cache_dtype", "vLLM `--kv-cache-dtype` (`deploy.kv_cache_dtype`)", metavar="DTYPE"
    ),
    _Flag(
        ("--max-num-batched-tokens",),
        "max_num_batched_tokens",
        "vLLM `--max-num-batched-tokens` (`deploy.max_num_batched_tokens`)",
        int,
        metavar="N",
    ),
    _Flag(("--enable-lora",), "enable_lora", "LoRA adapters are served (`deploy.lora`)", store_true=True),
    _Flag(("--enforce-eager",), "enforce_eager", "no CUDA graphs (`deploy.cuda_graphs` false)", store_true=True),
    _Flag(("--dtype",), "dtype", "vLLM `--dtype`: the activation dtype (`model.activation_dtype`)", metavar="DTYPE"),
    _Flag(
        ("--revision",), "revision", "the model revision (branch, tag or commit) to read config.json at", metavar="REV"
    ),
    _Flag(
        ("--download-dir",),
        "download_dir",
        "vLLM `--download-dir`: the Hugging Face cache folder to use",
        metavar="DIR",
    ),
    _Flag(
        ("--config",),
        "vllm_config",
        "a vLLM YAML `--config` file (its keys are vLLM's long flag names)",
        metavar="FILE",
    ),
    _Flag(("--model",), "model", "the model (vLLM's flag)", native=False),
    _Flag(("--moe-backend",), "moe_backend", "vLLM `--moe-backend` (`auto`: vLLM's own choice)", native=False),
    _Flag(("--linear-backend",), "linear_backend", "vLLM `--linear-backend`", native=False),
)
#: ``--dtype`` values as ``model.activation_dtype`` (``auto``: the checkpoint's dtype).
_DTYPES: Final = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
    "float32": "float32",
    "float": "float32",
}
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
#: What a serve line means by leaving a flag out (vLLM's defaults), for flags whose facts rules read.
_SERVE_DEFAULTS: Final[dict[str, object]] = {"deploy.lora": False, "deploy.cuda_graphs": True}
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


def _serve_parser() -> argparse.ArgumentParser:
    p = _ServeParser(prog="vllm serve", add_help=False, allow_abbrev=False)
    for flag in VLLM_FLAGS:
        if flag.store_true:
            p.add_argument(*flag.names, dest=flag.dest, action="store_true", default=None)
        else:
            p.add_argument(*flag.names, dest=flag.dest, type=flag.type)
    return p


def _dashes(token: str) -> str:
    """vLLM's spelling rule: ``--tensor_parallel_size`` is ``--tensor-parallel-size``."""
    if not token.startswith("--"):
        return token
    name, eq, value = token.partition("=")
    return name.replace("_", "-") + eq + value


def _config_tokens(path: str) -> list[str]:
    """A vLLM YAML ``--config`` file as flags (``key: value`` is ``--key value``)."""
    import yaml

    file = expand_user(path)
    try:
        if file.stat().st_size > _MAX_CONFIG_BYTES:
            raise UsageError(f"--config `{path}`: larger than 1 MiB")
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--config `{path}`: cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    except UnicodeDecodeError:
        raise UsageError(f"--config `{path}`: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"--config `{path}`: not valid YAML{where}") from None
    if data is None:
        return []
    if not isinstance(data, Mapping):
        raise UsageError(f"--config `{path}`: expected a mapping of vLLM flag names to values")
    tokens: list[str] = []
    for key, value in data.items():
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


def _parse_serve(tokens: Sequence[str]) -> _Serve:
    """A serve line (``[VAR=VALUE ...] vllm serve MODEL [FLAGS]``) as flag values."""
    rest = list(tokens)
    if len(rest) == 1 and " " in rest[0]:
        rest = shlex.split(rest[0])  # the whole line quoted as one argument
    env: dict[str, str] = {}
    while rest and (m := _ENV_ASSIGN.match(rest[0])):
        env[m.group(1)] = m.group(2)
        rest.pop(0)
    if rest[:1] == ["vllm"]:
        if rest[1:2] != ["serve"]:
            raise UsageError("serve line: expected `vllm serve MODEL [FLAGS]`", help="the command after `--`")
        rest = rest[2:]
    elif len(rest) >= 3 and rest[0].startswith("python") and rest[1] == "-m" and rest[2] in _ENTRYPOINTS:
        rest = rest[3:]
    positional = rest.pop(0) if rest and not rest[0].startswith("-") else None  # vllm serve MODEL
    rest = [_dashes(t) for t in rest]
    parser = _serve_parser()
    ns, unknown = parser.parse_known_args(rest)
    values = {k: v for k, v in vars(ns).items() if v is not None}
    # --config first, then the line itself: the line wins, as in vLLM
    if "vllm_config" in values:
        from_file, unknown_file = parser.parse_known_args(_config_tokens(values["vllm_config"]))
        values = {**{k: v for k, v in vars(from_file).items() if v is not None}, **values}
        unknown += unknown_file
    if positional is not None and values.setdefault("model", positional) != positional:
        raise UsageError(f"serve line: two models, `{positional}` and `--model {values['model']}`")
    _refuse_config_flags(unknown)
    ignored = tuple(t for t in unknown if t.startswith("-") and t.partition("=")[0] not in _CONFIG_FLAGS)
    return _Serve(values, env, ignored)


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


def _merge(args: argparse.Namespace, serve: _Serve) -> argparse.Namespace:
    merged = argparse.Namespace(**vars(args))
    for dest, value in serve.values.items():
        if dest == "vllm_config":
            continue
        mine = getattr(merged, dest, None)
        if mine is None:
            setattr(merged, dest, value)
        elif mine != value:
            flag = next(f.names[0] for f in VLLM_FLAGS if f.dest == dest)
            raise UsageError(f"{flag} given twice: `{mine}` as an option and `{value}` in the serve line")
    merged.env = [f"{k}={v}" for k, v in serve.env.items()] + list(getattr(args, "env", []) or [])
    return merged


def deployment_facts(args: argparse.Namespace) -> dict[str, Any]:
    """The facts vLLM's flags set: parallelism, KV-cache dtype, batch size, activation dtype."""
    out: dict[str, Any] = {}
    tp = getattr(args, "tensor_parallel_size", None)
    dp = getattr(args, "data_parallel_size", None)
    for name, value in (("--tensor-parallel-size", tp), ("--data-parallel-size", dp)):
        if value is not None and value < 1:
            raise UsageError(f"{name} `{value}`: expected a positive size")
    if tp is not None:
        out["deploy.tp"] = tp
    if getattr(args, "enable_expert_parallel", None):
        out["deploy.ep"] = (tp or 1) * (dp or 1)  # vLLM shards experts over every TP x DP rank
    if getattr(args, "kv_cache_dtype", None) is not None:
        out["deploy.kv_cache_dtype"] = args.kv_cache_dtype
    tokens = getattr(args, "max_num_batched_tokens", None)
    if tokens is not None:
        out["deploy.max_num_batched_tokens"] = tokens
    if getattr(args, "enable_lora", None):
        out["deploy.lora"] = True
    if getattr(args, "enforce_eager", None):
        out["deploy.cuda_graphs"] = False
    dtype = getattr(args, "dtype", None)
    if dtype is not None and dtype != "auto":
        if dtype not in _DTYPES:
            hint = did_you_mean(dtype, [*_DTYPES, "auto"])
            raise UsageError(
                f"--dtype `{dtype}`: not a vLLM dtype", help=f"did you mean `{hint[0]}`?" if hint else None
            )
        out["model.activation_dtype"] = _DTYPES[dtype]
    return out


def _known_values(facts: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """*facts* without values outside their key's finite domain (vLLM accepts more than the
    rules name, e.g. ``--kv-cache-dtype fp8_ds_mla``): those stay unknown, with a note."""
    from ..facts import FACT_KEYS

    out = {}
    for key, value in facts.items():
        if key not in FACT_KEYS and key in _SERVE_DEFAULTS:
            continue  # a default for a key this vocabulary does not have
        domain = FACT_KEYS[key].domain if key in FACT_KEYS else ()
        if domain and value not in domain:
            notes.append(f"`{value}` is not a value of `{key}` the rules know; it is left unknown")
            continue
        out[key] = value
    return out


def read_deployment(args: argparse.Namespace) -> Deployment:
    """explain's options with the serve line (and any vLLM ``--config`` file) merged in.

    :raises UsageError: the serve line cannot be read, or says something an option contradicts.
    """
    tokens = list(getattr(args, "serve", None) or [])
    notes: list[str] = []
    serve = _Serve({}, {}, ())
    if tokens:
        serve = _parse_serve(tokens)
    elif getattr(args, "vllm_config", None):
        serve = _parse_serve(["--config", args.vllm_config])
    merged = _merge(args, serve)
    for dest in ("moe_backend", "linear_backend"):
        value = getattr(merged, dest, None)
        if value is not None:
            value = value.lower().replace("-", "_")  # vLLM's reading of both flags
            setattr(merged, dest, None if value == "auto" else value)  # auto: vLLM's own choice, explained
    facts = deployment_facts(merged)
    if tokens or getattr(args, "vllm_config", None):
        # a whole serve line: what it leaves out is vLLM's default, not unknown
        facts = {**_SERVE_DEFAULTS, **facts}
    if serve.ignored:
        notes.append("serve line: flags that decide no kernel, ignored: " + ", ".join(f"`{t}`" for t in serve.ignored))
    return Deployment(
        args=merged,
        facts=_known_values(facts, notes),
        quantization=getattr(merged, "quantization", None),
        notes=tuple(notes),
    )


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


def apply_quantization(facts: Facts, method: str | None) -> Facts:
    """*facts* with vLLM's ``--quantization`` applied, as vLLM applies it.

    A quantized checkpoint keeps its method (vLLM refuses a different one, and so does this);
    an unquantized one is quantized online (``fp8``: per-tensor weights, dynamic activations).

    :raises UsageError: the flag contradicts the checkpoint, or the quantization (the
        checkpoint's or the flag's) is outside the FP8/FP4 paths kernelpolicy decides.
    """
    out = _quantized(facts, method)
    if out.get("quant.method_known") is False:
        raise UsageError(
            f"quantization `{out.get('quant.method')}` (fact `quant.method_known` is false): kernelpolicy decides"
            " the FP8/FP4 kernels of fp8, compressed-tensors, modelopt, mxfp4, mxfp8, gptq and awq checkpoints;"
            " vLLM picks this method's kernels itself"
        )
    return out


def _quantized(facts: Facts, method: str | None) -> Facts:
    from ..facts import Facts

    if method is None:
        return facts
    method = method.lower().replace("_", "-") if method.lower() == "compressed_tensors" else method.lower()
    have = facts.get("quant.method")
    if have is not None:
        if method == have or method in _COMPATIBLE.get(str(have), ()):
            return facts
        raise UsageError(
            f"--quantization `{method}` does not match the checkpoint's quantization `{have}` (vLLM refuses it too)"
        )
    if facts.get("quant.scheme") not in (None, "none"):
        return facts
    online = _ONLINE.get(method)
    if online is None:
        return facts.merged(Facts.from_values({"quant.method": method, "quant.method_known": False}, source="user"))
    values: dict[str, object] = {"quant.method": method, "quant.method_known": True, **online}
    if facts.get("model.is_moe"):
        values["quant.moe_scheme"] = online["quant.scheme"]
    return facts.merged(Facts.from_values(values, source="user"))


def env_warnings(names: Sequence[str], policy: Policy) -> list[str]:
    """Warnings for ``VLLM_*`` variables no rule reads, with did-you-mean for misspellings."""
    from ..facts.pipeline import env_names

    known = env_names(policy)
    out = []
    for name in names:
        if not name.startswith("VLLM_") or name in known:
            continue
        hint = did_you_mean(name, known)
        tail = f" (did you mean `{hint[0]}`?)" if hint else "; it does not change the decision"
        out.append(f"--env `{name}`: no rule reads this vLLM variable{tail}")
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
    from ..adapters.vllm._versions import SUPPORTED, patch_points_for

    if patch_points_for(version.strip()) is None:
        known = ", ".join(SUPPORTED)
        raise UsageError(f"--engine `vllm=={version.strip()}`: not a vLLM release kernelpolicy knows (known: {known})")
