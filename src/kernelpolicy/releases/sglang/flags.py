"""SGLang's one flag table: each SGLang server argument that bears on a kernel decision, its
spellings on a launch line, where ``ServerArgs`` holds it, and the facts it sets (:func:`facts_of`).

``kernelpolicy explain -- python -m sglang.launch_server --model-path M ...`` reads these flags
from the line (:mod:`kernelpolicy.deployment.serve`) after :func:`read_spellings` has written each
option out as SGLang's own parser reads it (argparse with abbreviations: ``--tp 8`` is
``--tp-size 8``); the plugin reads the same entries from the live ``ServerArgs``
(:func:`kernelpolicy.releases.table.config_values`); both turn the values into facts here. Data
and pure functions: no SGLang import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..._numbers import flag_int
from ...errors import UsageError
from ..table import Flag, full_spellings

if TYPE_CHECKING:
    from ...policy import EngineMap
    from .versions import SglangRelease

__all__ = [
    "FLAGS",
    "LAUNCHERS",
    "SERVE_DEFAULTS",
    "SPEC_ALGORITHMS",
    "facts_of",
    "moe_ids_of",
    "parser_release",
    "read_spellings",
]

#: How a launch line starts: ``python -m sglang.launch_server`` (any ``python*``) or ``sglang serve``.
LAUNCHERS: Final = ("sglang.launch_server",)

FLAGS: Final = (
    Flag(("--model-path", "--model"), "model_path", "the model (SGLang's flag)", config="model_path"),
    Flag(
        ("--tensor-parallel-size", "--tp-size"),
        "tp_size",
        "tensor-parallel size (`deploy.tp`)",
        flag_int,
        config="tp_size",
        default=1,
        sample="2",
    ),
    Flag(
        ("--expert-parallel-size", "--ep-size", "--ep"),
        "ep_size",
        "expert-parallel size (`deploy.ep`)",
        flag_int,
        config="ep_size",
        default=1,
        sample="2",
    ),
    Flag(
        ("--moe-a2a-backend",),
        "moe_a2a_backend",
        "the MoE all-to-all backend (`deploy.all2all`)",
        config="moe_a2a_backend",
        default="none",
        sample="deepep",
    ),
    Flag(
        ("--moe-runner-backend",),
        "moe_runner_backend",
        "SGLang's MoE runner (`deploy.moe_backend`)",
        config="moe_runner_backend",
        default="auto",
        sample="triton",
    ),
    Flag(
        ("--fp8-gemm-backend",),
        "fp8_gemm_runner_backend",
        "SGLang's FP8 GEMM backend (`deploy.linear_backend`)",
        config="fp8_gemm_runner_backend",
        default="auto",
        sample="cutlass",
    ),
    Flag(
        ("--quantization",),
        "quantization",
        "the quantization method (an unquantized checkpoint is quantized online)",
        config="quantization",
        sample="fp8",
    ),
    Flag(
        ("--fp4-gemm-backend",),
        "fp4_gemm_runner_backend",
        "SGLang's FP4 GEMM backend (`deploy.linear_backend`)",
        config="fp4_gemm_runner_backend",
        default="auto",
    ),
    # --- attention (issue #39): the attention path's flags --------------------------------
    Flag(
        ("--attention-backend",),
        "attention_backend",
        "SGLang's attention backend (`deploy.attention_backend`; `fa3`, `flashinfer`, `trtllm_mla`, ...)",
        config="attention_backend",
        sample="triton",
    ),
    Flag(
        ("--page-size",),
        "page_size",
        "tokens per KV-cache page (`deploy.block_size`)",
        flag_int,
        # no config path: SGLang sets `page_size` itself for the attention backend it picks
        # (FlashMLA 64, TRT-LLM 32 or 64), a consequence of the decision, not a fact of it
        sample="64",
    ),
    # --- end of attention ------------------------------------------------------------------
    # --- serving modes (issue #35) ---------------------------------------------------------
    Flag(
        ("--speculative-algorithm",),
        "speculative_algorithm",
        "SGLang's speculative algorithm (`deploy.speculative`: EAGLE, EAGLE3, NEXTN as `mtp`, ...)",
        config="speculative_algorithm",
        from_config=lambda algo: "none" if algo is None else str(algo),
        default="none",
        sample="NGRAM",
    ),
    Flag(
        ("--enable-two-batch-overlap",),
        "enable_two_batch_overlap",
        "two micro-batches overlap compute and communication (`deploy.two_batch_overlap`)",
        store_true=True,
        config="enable_two_batch_overlap",
        default=False,
    ),
    Flag(
        ("--disaggregation-mode",),
        "disaggregation_mode",
        "the prefill/decode disaggregation role (`deploy.disaggregation`: `null` is `none`)",
        config="disaggregation_mode",
        default="null",
        sample="prefill",
    ),
    # --- end of serving modes --------------------------------------------------------------
)
#: SGLang's ``--speculative-algorithm`` names as ``deploy.speculative`` (``NEXTN``, an alias of
#: ``EAGLE`` in SGLang, runs the checkpoint's own MTP layers; ``STANDALONE`` a separate draft model).
SPEC_ALGORITHMS: Final = {
    "none": "none",
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "mtp",
    "FROZEN_KV_MTP": "mtp",
    "NGRAM": "ngram",
    "STANDALONE": "draft_model",
    "DFLASH": "dflash",
    "DSPARK": "dspark",
}
#: ``--disaggregation-mode`` values as ``deploy.disaggregation``.
_DISAGGREGATION: Final = {"null": "none", "prefill": "prefill", "decode": "decode"}
SERVE_DEFAULTS: Final = {f.dest: f.default for f in FLAGS if f.default is not None}


def parser_release(release: str | None = None) -> SglangRelease:
    """The SGLang release whose launch parser reads a line: *release* (``--engine sglang==X``),
    or the newest scanned one when None or not scanned."""
    from .versions import latest_release, release_for

    return (release_for(release) if release else None) or latest_release()


def read_spellings(tokens: Sequence[str], release: SglangRelease) -> list[str]:
    """A launch line's *tokens* (after the command) with each option written out as SGLang
    *release*'s launch parser reads it: argparse's, which takes an unambiguous prefix of an
    option (``--tp 8``, ``--dp=2``) for the option, against every option string of that
    release (``options.json``, scanned from its wheel). SGLang does not read ``_`` as ``-``
    (``--tp_size`` is no option of it), so neither does this.

    :raises UsageError: a prefix of several options (SGLang refuses it: "ambiguous option").
    """
    return full_spellings(tokens, release.options, f"SGLang {release.version}")


def moe_ids_of(engine: EngineMap) -> dict[str, frozenset[str]]:
    """SGLang MoE runner name -> the kernelpolicy ids it can be (the vocabulary read backwards:
    ``moe_flag``, ``moe_flag_by_scheme`` and the MoE aliases). ``flashinfer_mxfp4`` is FlashInfer's
    CUTLASS or TRT-LLM kernel, by GPU."""
    out: dict[str, set[str]] = {}
    pairs = [*engine.moe_flag.items(), *(p for m in engine.moe_flag_by_scheme.values() for p in m.items())]
    for kp, flag in pairs:
        out.setdefault(flag, set()).add(kp)
    for name, kp in engine.aliases.get("moe", {}).items():
        out.setdefault(name, set()).add(kp)
    return {name: frozenset(ids) for name, ids in out.items()}


def facts_of(values: Mapping[str, Any], engine: EngineMap) -> dict[str, Any]:
    """The facts SGLang's flag *values* (by ``dest``) set: parallelism, the all-to-all backend and
    the backends the operator named (``auto`` and names of no single kernelpolicy id are left out:
    the decision then decides that path, and the plugin leaves the operator's value alone).

    :raises UsageError: a size below 1.
    """
    out: dict[str, Any] = {}
    for dest, key, name in (("tp_size", "deploy.tp", "--tp-size"), ("ep_size", "deploy.ep", "--ep-size")):
        value = values.get(dest)
        if value is not None:
            if int(value) < 1:
                raise UsageError(f"{name} `{value}`: expected a positive size")
            out[key] = int(value)
    a2a = values.get("moe_a2a_backend")
    if a2a is not None and str(a2a) != "none":  # SGLang's name (`deepep`, `mooncake`, ...): its rules name it so
        out["deploy.all2all"] = str(a2a)
    moe = str(values.get("moe_runner_backend") or "auto")
    moe_ids = moe_ids_of(engine)
    if moe != "auto" and len(moe_ids.get(moe, ())) == 1:  # a name of two ids says neither
        (out["deploy.moe_backend"],) = moe_ids[moe]
    dense_ids = {names[0]: kp for kp, names in engine.dense_kernels.items() if names} | dict(
        engine.aliases.get("dense", {})
    )
    for dest in ("fp8_gemm_runner_backend", "fp4_gemm_runner_backend"):
        value = str(values.get(dest) or "auto")
        if value != "auto" and value in dense_ids:
            out["deploy.linear_backend"] = dense_ids[value]
    # --- attention (issue #39)
    page = values.get("page_size")
    if page is not None:
        if int(page) < 1:
            raise UsageError(f"--page-size `{page}`: expected a positive size")
        out["deploy.block_size"] = int(page)
    attention = values.get("attention_backend")
    if attention is not None:
        name = str(attention)
        out["deploy.attention_backend"] = engine.aliases.get("attention", {}).get(name, name)
    # --- end of attention
    out.update(_serving_facts(values))
    return out


# --- serving modes (issue #35)
def _serving_facts(values: Mapping[str, Any]) -> dict[str, Any]:
    """``--speculative-algorithm``, ``--enable-two-batch-overlap`` and ``--disaggregation-mode``
    as facts. SGLang reads the algorithm upper-cased; a name of no built-in algorithm (a plugin's)
    is ``other``.

    :raises UsageError: a disaggregation mode SGLang does not have.
    """
    out: dict[str, Any] = {}
    algo = values.get("speculative_algorithm")
    if algo is not None:
        name = str(algo) if str(algo) == "none" else str(algo).upper()
        out["deploy.speculative"] = SPEC_ALGORITHMS.get(name, "other")
    tbo = values.get("enable_two_batch_overlap")
    if tbo is not None:
        out["deploy.two_batch_overlap"] = bool(tbo)
    mode = values.get("disaggregation_mode")
    if mode is not None:
        if str(mode) not in _DISAGGREGATION:
            raise UsageError(f"--disaggregation-mode `{str(mode)[:40]}`: not a mode SGLang has (null, prefill, decode)")
        out["deploy.disaggregation"] = _DISAGGREGATION[str(mode)]
    return out


# --- end of serving modes
