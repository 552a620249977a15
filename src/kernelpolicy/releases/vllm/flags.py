"""vLLM's one flag table: each vLLM flag that bears on a kernel decision, its spellings, where
``VllmConfig`` holds it, and the facts it sets (:func:`facts_of`).

``kernelpolicy explain`` reads these flags from its options, a serve line or a vLLM ``--config``
file (:mod:`kernelpolicy.deployment.serve`); the plugin reads the same entries from the live
``VllmConfig`` (:func:`kernelpolicy.releases.table.config_values`). Both turn the values into facts
here, so the two cannot read a flag differently. Data and pure functions: no vLLM import.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ..._numbers import ascii_int, flag_int
from ...errors import UsageError, did_you_mean
from ..table import Flag

__all__ = [
    "DTYPES",
    "FLAGS",
    "JSON_FLAGS",
    "SERVE_DEFAULTS",
    "facts_of",
    "fold_dotted",
    "human_readable_int",
    "kv_role",
    "speculative_method",
]

_HUMAN_INT: Final = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])", re.ASCII)  # `１６k` is no number
_DECIMAL: Final = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY: Final = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    """An integer as vLLM's ``human_readable_int`` reads one (``--max-num-batched-tokens``):
    ``16k`` is 16,000, ``16K`` 16,384, ``25.6k`` 25,600; a decimal with a binary suffix
    (``1.5K``) is refused, as vLLM refuses it (vllm/utils/argparse_utils.py, 0.26 to 0.34).

    :raises argparse.ArgumentTypeError: for a value vLLM would refuse.
    """
    text = value.strip()
    match = _HUMAN_INT.fullmatch(text)
    if match is not None:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise argparse.ArgumentTypeError(
                f"decimals are not allowed with binary suffixes like {suffix}: did you mean `{number}{suffix.lower()}`?"
            )
        return int(number) * _BINARY[suffix]
    try:
        return ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid integer `{value}` (an integer, or one with a k/m/g/t (x1000) or K/M/G/T (x1024) suffix)"
        ) from None


def _torch_dtype(value: Any) -> str | None:
    """``torch.bfloat16`` (vLLM resolves ``--dtype`` to a torch dtype) as ``bfloat16``."""
    return None if value is None else str(value).removeprefix("torch.")


# --- serving modes (issue #35): speculative decoding, decode context parallel, P/D roles ---
#: vLLM's MTP method names (``deepseek_mtp``, ``qwen3_next_mtp``, ...): vLLM reads each as ``mtp``
#: (``SpeculativeConfig.__post_init__``, 0.26 to 0.34), as does this.
_SPEC_METHODS: Final = frozenset(
    {"eagle", "eagle3", "mtp", "ngram", "draft_model", "suffix", "medusa", "mlp_speculator", "dflash", "dspark"}
)
#: ``deploy.speculative`` when the draft's own config decides the method (a draft ``model`` and no
#: ``method``): speculation is on, by a method kernelpolicy does not read from the draft checkpoint.
SPEC_DETECTED: Final = "other"
#: vLLM's ``kv_role`` values as ``deploy.disaggregation`` (``kv_both``: either role, ``both``).
_KV_ROLES: Final = {"kv_producer": "prefill", "kv_consumer": "decode", "kv_both": "both"}


def _json_object(value: Any) -> Mapping[str, Any]:
    """A JSON flag's value (a mapping from a YAML ``--config``, else JSON text) as a mapping.

    :raises argparse.ArgumentTypeError: text that is not a JSON object.
    """
    if isinstance(value, Mapping):
        return value
    try:
        data = json.loads(str(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{str(value)[:60]}` is not a JSON object") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(f"`{str(value)[:60]}` is not a JSON object")
    return data


def _method_name(method: Any, model: Any) -> str:
    """vLLM's reading of a speculative ``method`` (and draft ``model``) as ``deploy.speculative``."""
    if method is None:
        if model in ("ngram", "[ngram]"):
            return "ngram"
        return "draft_model" if model is None else SPEC_DETECTED
    name = str(method).strip().lower()
    if name in {"[ngram]", "ngram_gpu"}:
        return "ngram"
    if name == "mtp" or name.endswith("_mtp"):
        return "mtp"
    return name if name in _SPEC_METHODS else "other"


def speculative_method(value: Any) -> str:
    """``--speculative-config`` (JSON: ``method``, or a draft ``model``) as ``deploy.speculative``:
    an MTP method of any model is ``mtp``; a draft model with no method (the draft's checkpoint
    decides) and a method vLLM does not name are ``other``.

    :raises argparse.ArgumentTypeError: a value that is not a JSON object.
    """
    data = _json_object(value)
    return _method_name(data.get("method"), data.get("model"))


def kv_role(value: Any) -> str:
    """``--kv-transfer-config`` (JSON) as its role: ``prefill`` (``kv_producer``), ``decode``
    (``kv_consumer``), ``both`` (``kv_both``) or ``none`` (no ``kv_role``).

    :raises argparse.ArgumentTypeError: not a JSON object, or a ``kv_role`` vLLM does not have.
    """
    data = _json_object(value)
    role = data.get("kv_role")
    if role is None:
        return "none"
    if role not in _KV_ROLES:
        raise argparse.ArgumentTypeError(f"kv_role `{str(role)[:40]}` is not a vLLM role ({', '.join(_KV_ROLES)})")
    return _KV_ROLES[str(role)]


def _speculative_of_config(config: Any) -> str:
    """The live ``speculative_config`` (None: no speculation) as ``deploy.speculative``."""
    if config is None:
        return "none"
    return _method_name(getattr(config, "method", None), getattr(config, "model", None))


def _kv_role_of_config(config: Any) -> str:
    """The live ``kv_transfer_config`` (None: no KV transfer) as its role."""
    role = getattr(config, "kv_role", None) if config is not None else None
    return "none" if role is None else _KV_ROLES.get(str(role), "both")


#: vLLM's JSON flags whose keys a line may also give one by one (``--speculative-config.method
#: mtp``, vLLM's ``FlexibleArgumentParser``), or a YAML ``--config`` as a mapping.
JSON_FLAGS: Final = ("--speculative-config", "--kv-transfer-config")


def fold_dotted(tokens: list[str]) -> list[str]:
    """*tokens* (``_`` already read as ``-`` in flag names) with each ``--FLAG.KEY VALUE`` of a
    :data:`JSON_FLAGS` flag folded into one ``--FLAG {JSON}`` where its first key was, over a
    JSON value given whole (vLLM merges them so). A key's value is kept as text, but for whole
    numbers, which the facts do not read."""
    out: list[str] = []
    folded: dict[str, dict[str, Any]] = {}
    at: dict[str, int] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, value = token.partition("=")
        flag = next((f for f in JSON_FLAGS if name.startswith(f + ".")), None)
        if flag is None:
            out.append(token)
            i += 1
            continue
        key = name[len(flag) + 1 :].replace("-", "_")
        if not eq:
            value = tokens[i + 1] if i + 1 < len(tokens) else ""
            i += 1
        i += 1
        if flag not in at:
            at[flag] = len(out)
            out += [flag, ""]
        folded.setdefault(flag, {})[key] = value
    for flag, data in folded.items():
        base: dict[str, Any] = {}
        # a whole JSON value of the same flag earlier on the line is merged under the keys
        for j in range(len(out) - 1):
            if out[j] == flag and j != at[flag] and out[j + 1]:
                try:
                    loaded = json.loads(out[j + 1])
                except ValueError:
                    continue
                if isinstance(loaded, dict):
                    base.update(loaded)
        out[at[flag] + 1] = json.dumps({**base, **data})
    return out


# --- end of serving modes


#: vLLM's flags that bear on a kernel decision, with vLLM's spellings.
FLAGS: Final = (
    Flag(
        ("--quantization", "-q"),
        "quantization",
        "vLLM `--quantization`: the checkpoint's method, or online",
        metavar="METHOD",
        config="model_config.quantization",
        sample="fp8",
    ),
    Flag(
        ("--tensor-parallel-size", "-tp"),
        "tensor_parallel_size",
        "tensor-parallel size (`deploy.tp`)",
        flag_int,
        metavar="N",
        config="parallel_config.tensor_parallel_size",
        default=1,
        sample="2",
    ),
    Flag(
        ("--data-parallel-size", "-dp"),
        "data_parallel_size",
        "data-parallel size (with expert parallel)",
        flag_int,
        metavar="N",
        config="parallel_config.data_parallel_size",
        default=1,
        sample="2",
    ),
    Flag(
        ("--enable-expert-parallel", "-ep"),
        "enable_expert_parallel",
        "experts sharded over TP x DP ranks (`deploy.ep`)",
        store_true=True,
        config="parallel_config.enable_expert_parallel",
        default=False,
    ),
    Flag(
        ("--kv-cache-dtype",),
        "kv_cache_dtype",
        "vLLM `--kv-cache-dtype` (`deploy.kv_cache_dtype`)",
        metavar="DTYPE",
        config="cache_config.cache_dtype",
        default="auto",
        sample="fp8",
    ),
    Flag(
        ("--max-num-batched-tokens",),
        "max_num_batched_tokens",
        "vLLM `--max-num-batched-tokens` (`deploy.max_num_batched_tokens`; `16k`, `16K` as vLLM reads them)",
        human_readable_int,
        metavar="N",
        config="scheduler_config.max_num_batched_tokens",
        sample="32768",
    ),
    Flag(
        ("--enable-lora",),
        "enable_lora",
        "LoRA adapters are served (`deploy.lora`)",
        store_true=True,
        config="lora_config",
        from_config=lambda lora: lora is not None,
        default=False,
    ),
    Flag(
        ("--enforce-eager",),
        "enforce_eager",
        "no CUDA graphs (`deploy.cuda_graphs` false)",
        store_true=True,
        config="model_config.enforce_eager",
        default=False,
    ),
    Flag(
        ("--dtype",),
        "dtype",
        "vLLM `--dtype`: the activation dtype (`model.activation_dtype`)",
        metavar="DTYPE",
        config="model_config.dtype",
        from_config=_torch_dtype,
        sample="float16",
    ),
    Flag(
        ("--revision",), "revision", "the model revision (branch, tag or commit) to read config.json at", metavar="REV"
    ),
    Flag(
        ("--download-dir",),
        "download_dir",
        "vLLM `--download-dir`: the Hugging Face cache folder to use",
        metavar="DIR",
    ),
    Flag(
        ("--config",),
        "vllm_config",
        "a vLLM YAML `--config` file (its keys are vLLM's long flag names)",
        metavar="FILE",
    ),
    Flag(("--model",), "model", "the model (vLLM's flag)", native=False),
    Flag(
        ("--moe-backend",),
        "moe_backend",
        "vLLM `--moe-backend` (`auto`: vLLM's own choice)",
        native=False,
        config="kernel_config.moe_backend",
        sample="triton",
    ),
    Flag(
        ("--linear-backend",),
        "linear_backend",
        "vLLM `--linear-backend`",
        native=False,
        config="kernel_config.linear_backend",
        sample="triton",
    ),
    # --- attention (issue #39): the attention path's flags --------------------------------
    Flag(
        ("--attention-backend",),
        "attention_backend",
        "vLLM `--attention-backend` (`deploy.attention_backend`; vLLM's enum names, e.g. `FLASHINFER`)",
        native=False,
        # no config path: vLLM's own model code sets `attention_config.backend` (gemma-4 on sm12x:
        # TRITON_ATTN), which the plugin could not tell from the operator's choice; read from the
        # launch line only, as the block size
        sample="FLASHINFER",
    ),
    Flag(
        ("--block-size",),
        "block_size",
        "vLLM `--block-size`: tokens per KV-cache block (`deploy.block_size`)",
        flag_int,
        native=False,
        metavar="N",
        # no config path: vLLM fills `cache_config.block_size` itself from the attention backend
        # it picks (16, 64 for the MLA kernels), so the running value is a consequence of the
        # decision, not a fact of the deployment; the plugin reads a stated block size only
        sample="32",
    ),
    # --- end of attention ------------------------------------------------------------------
    # --- serving modes (issue #35) ---------------------------------------------------------
    Flag(
        ("--speculative-config", "-sc"),
        "speculative_config",
        "vLLM `--speculative-config` JSON: its `method` (or draft `model`) as `deploy.speculative`",
        speculative_method,
        native=False,
        metavar="JSON",
        config="speculative_config",
        from_config=_speculative_of_config,
        default="none",
        sample='{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 2}',
    ),
    Flag(
        ("--decode-context-parallel-size", "-dcp"),
        "decode_context_parallel_size",
        "vLLM decode context-parallel size (`deploy.dcp`)",
        flag_int,
        native=False,
        metavar="N",
        config="parallel_config.decode_context_parallel_size",
        default=1,
        sample="1",  # a size above 1 needs a TP size it divides: the parity lines carry no -tp
    ),
    Flag(
        ("--kv-transfer-config",),
        "kv_transfer_config",
        "vLLM `--kv-transfer-config` JSON: its `kv_role` as `deploy.disaggregation`",
        kv_role,
        native=False,
        metavar="JSON",
        config="kv_transfer_config",
        from_config=_kv_role_of_config,
        default="none",
        sample='{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}',
    ),
    # --- end of serving modes --------------------------------------------------------------
)
#: ``--dtype`` values as ``model.activation_dtype`` (``auto``: the checkpoint's dtype).
DTYPES: Final = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
    "float32": "float32",
    "float": "float32",
}
#: What a whole serve line means by leaving a flag out (vLLM's defaults), as flag values.
SERVE_DEFAULTS: Final = {f.dest: f.default for f in FLAGS if f.default is not None}


def backend_name(value: Any) -> str | None:
    """vLLM's reading of ``--moe-backend`` / ``--linear-backend`` (``auto``: vLLM's own choice)."""
    if value is None:
        return None
    name = str(value).lower().replace("-", "_")
    return None if name == "auto" else name


def facts_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """The facts vLLM's flag *values* (by ``dest``) set: parallelism, KV-cache dtype, batch size,
    LoRA, CUDA graphs, activation dtype and the explicit backends. ``--quantization`` is applied to
    the model's facts afterwards (:func:`kernelpolicy.deployment.serve.apply_quantization`).

    :raises UsageError: a size below 1, or a ``--dtype`` vLLM does not have.
    """
    out: dict[str, Any] = {}
    tp, dp = values.get("tensor_parallel_size"), values.get("data_parallel_size")
    for name, value in (("--tensor-parallel-size", tp), ("--data-parallel-size", dp)):
        if value is not None and value < 1:
            raise UsageError(f"{name} `{value}`: expected a positive size")
    if tp is not None:
        out["deploy.tp"] = tp
    ep = values.get("enable_expert_parallel")
    if ep is not None:
        out["deploy.ep"] = (tp or 1) * (dp or 1) if ep else 1  # vLLM shards experts over every TP x DP rank
    if values.get("kv_cache_dtype") is not None:
        out["deploy.kv_cache_dtype"] = values["kv_cache_dtype"]
    if values.get("max_num_batched_tokens") is not None:
        out["deploy.max_num_batched_tokens"] = values["max_num_batched_tokens"]
    if values.get("enable_lora") is not None:
        out["deploy.lora"] = bool(values["enable_lora"])
    if values.get("enforce_eager") is not None:
        out["deploy.cuda_graphs"] = not values["enforce_eager"]
    dtype = values.get("dtype")
    if dtype is not None and dtype != "auto":
        if dtype not in DTYPES:
            hint = did_you_mean(str(dtype), [*DTYPES, "auto"])
            raise UsageError(
                f"--dtype `{dtype}`: not a vLLM dtype", help=f"did you mean `{hint[0]}`?" if hint else None
            )
        out["model.activation_dtype"] = DTYPES[dtype]
    out.update(_attention_facts(values))
    out.update(_serving_facts(values))
    for dest, key in (("moe_backend", "deploy.moe_backend"), ("linear_backend", "deploy.linear_backend")):
        backend = backend_name(values.get(dest))
        if backend is not None:
            out[key] = backend
    return out


# --- attention (issue #39)
def _attention_facts(values: Mapping[str, Any]) -> dict[str, Any]:
    """``--block-size`` and ``--attention-backend`` as facts (vLLM's enum name lower-cased: an
    alias of a kernelpolicy id, resolved where the facts are assembled)."""
    out: dict[str, Any] = {}
    if values.get("block_size") is not None:
        if values["block_size"] < 1:
            raise UsageError(f"--block-size `{values['block_size']}`: expected a positive size")
        out["deploy.block_size"] = values["block_size"]
    attention = backend_name(values.get("attention_backend"))
    if attention is not None:
        out["deploy.attention_backend"] = attention
    return out


# --- end of attention


# --- serving modes (issue #35)
def _serving_facts(values: Mapping[str, Any]) -> dict[str, Any]:
    """``--speculative-config``, ``--decode-context-parallel-size`` and ``--kv-transfer-config``
    as facts."""
    out: dict[str, Any] = {}
    spec = values.get("speculative_config")
    if spec is not None:
        out["deploy.speculative"] = spec
    dcp = values.get("decode_context_parallel_size")
    if dcp is not None:
        if dcp < 1:
            raise UsageError(f"--decode-context-parallel-size `{dcp}`: expected a positive size")
        out["deploy.dcp"] = dcp
    role = values.get("kv_transfer_config")
    if role is not None:
        out["deploy.disaggregation"] = role
    return out


# --- end of serving modes
