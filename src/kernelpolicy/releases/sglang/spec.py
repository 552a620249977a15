"""SGLang's spec: its launch line, read as SGLang's own parser reads it (per release, with
abbreviations), its ``--config`` file, its online quantization, its releases, and a decision as
SGLang's own flags and environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ...errors import UsageError, did_you_mean
from ..engine import EngineSpec, FactView, deep_gemm_use
from ..line import LineValues, check_config_value, config_file, flag_tokens, parse_known, serve_parser, unknown_note
from .flags import FLAGS, LAUNCHERS, facts_of, parser_release, read_spellings

if TYPE_CHECKING:
    from ...decision import PathDecision
    from ...policy import EngineMap

__all__ = ["SGLANG", "SglangSpec"]

#: A backend value shown in a refusal is cut to this many characters.
_VALUE_SHOWN: Final = 40


def _check_choices(values: Mapping[str, Any]) -> None:
    """:raises UsageError: a backend flag's value no known SGLang release accepts (SGLang's
    parser refuses it: ``invalid choice``)."""
    from .versions import known_releases

    for flag in FLAGS:
        value = values.get(flag.dest)
        choices = sorted({c for r in known_releases().values() for c in r.flags.get(flag.names[0], ())})
        if value is None or not choices or str(value) in choices:
            continue
        hint = did_you_mean(str(value), choices)
        raise UsageError(
            f"serve line: {flag.names[0]} `{str(value)[:_VALUE_SHOWN]}`: not a value SGLang accepts"
            + (f" (did you mean `{hint[0]}`?)" if hint else f" ({', '.join(choices)})")
        )


class SglangSpec(EngineSpec):
    """SGLang."""

    name: ClassVar[str] = "sglang"
    title: ClassVar[str] = "SGLang"
    flags: ClassVar = FLAGS
    commands: ClassVar = (("sglang", "serve"),)
    modules: ClassVar = LAUNCHERS
    usage: ClassVar[str] = "sglang serve --model-path MODEL [FLAGS]"
    launch: ClassVar[str] = "python -m sglang.launch_server --model-path"
    plugin_does: ClassVar[str] = "the plugin sets these at start-up, checks them per rank and names per-layer fallbacks"
    env_prefix: ClassVar[str] = "SGLANG_"
    #: the rules read one SGLang variable; its other switches are checked by the plugin at start-up
    env_complete: ClassVar[bool] = False
    requirement: ClassVar[str] = "sglang=={version}"
    #: ``--quantization fp8`` of an unquantized checkpoint: per-channel dense weights
    #: (``Fp8LinearMethod.process_weights_after_loading``: CUTLASS and Marlin take only per-channel
    #: scales), one scale per expert (``Fp8MoEMethod``), dynamic activations.
    online: ClassVar[Mapping[str, Mapping[str, object]]] = {
        "fp8": {
            "quant.scheme": "fp8_channel",
            "quant.moe_scheme": "fp8_tensor",
            "quant.activation_scheme": "dynamic",
            "quant.scale_fmt": "fp32",
        },
    }

    def read_line(
        self, rest: list[str], positional: str | None, env: dict[str, str], release: str | None
    ) -> LineValues:
        """SGLang *release*'s reading: a ``--config FILE.yaml`` merged first, every option
        written out as its argparse parser reads it (an unambiguous prefix is the option), its
        backend values checked; the ignored and unknown flags named as the line wrote them."""
        rel = parser_release(release)
        rest = self._with_config(rest)
        spelled = read_spellings(rest, rel)
        written = {
            new.partition("=")[0]: old.partition("=")[0] for new, old in zip(spelled, rest, strict=True) if new != old
        }
        values, unread = parse_known(serve_parser(self.flags, "sglang serve"), spelled)
        _check_choices(values)
        model = values.pop("model_path", None)
        if positional is not None and model is not None and model != positional:
            raise UsageError(f"serve line: two models, `{positional}` and `--model-path {model}`")
        if model or positional:
            values["model"] = model or positional
        flags = [t.partition("=")[0] for t in unread if t.startswith("-")]
        ignored = tuple(written.get(f, f) for f in flags if f in rel.options)
        unknown = [f for f in flags if f not in rel.options]
        notes = (unknown_note(unknown, f"SGLang {rel.version}", rel.options),) if unknown else ()
        return LineValues(values, env, ignored, self.name, notes)

    def _with_config(self, tokens: list[str]) -> list[str]:
        """*tokens* with a ``--config FILE`` (that exact token, as ``prepare_server_args`` looks
        for it) replaced by the file's flags before the line's (the line wins)."""
        at = [i for i, t in enumerate(tokens) if t == "--config"]
        if len(at) > 1:
            raise UsageError("serve line: `--config` twice: SGLang takes one config file")
        if not at:
            return tokens
        i = at[0]
        if i + 1 >= len(tokens):
            raise UsageError("serve line: `--config` without a file")
        path = tokens[i + 1]
        if not path.lower().endswith((".yaml", ".yml")):
            raise UsageError(f"serve line: --config `{path}`: SGLang reads only a .yaml or .yml file")

        def flag_of(key: str, value: object) -> list[str]:  # the key as written, as its merger keeps it
            check_config_value(path, key, value, self.flags)
            return flag_tokens("--" + key, value)

        return [*config_file(path, self.title, flag_of), *tokens[:i], *tokens[i + 2 :]]

    def facts_of(self, values: Mapping[str, Any], vocabulary: EngineMap | None) -> dict[str, Any]:
        if vocabulary is None:
            raise UsageError("serve line: an SGLang line needs the SGLang vocabulary (rules/engines/sglang.yaml)")
        return facts_of(values, vocabulary)

    def records(self) -> Mapping[str, Mapping[str, Any]]:
        from .versions import release_records

        return release_records()

    def render(
        self,
        paths: Mapping[str, PathDecision],
        vocabulary: EngineMap,
        release: str | None,
        facts: FactView | None,
    ) -> dict[str, Any]:
        """SGLang's switches: JIT DeepGEMM off where no path runs it, its precompile off where
        nothing it runs is warmed, the GEMM flag of the checkpoint's format where the release
        accepts the value (or the environment switch that takes FP8 linears),
        ``--moe-runner-backend`` and ``--attention-backend`` (issue #39)."""
        from .versions import latest_release, release_for

        rel = release_for(release) if release else latest_release()
        if rel is None:
            return {"env": {}, "args": [], "notes": [f"sglang `{release}` is not a release kernelpolicy has scanned"]}
        env: dict[str, str] = {}
        args: list[str] = []
        notes: list[str] = []
        dense, moe, router = paths["dense"], paths["moe"], paths["router"]
        dg_dense, dg_moe, unwarmed = deep_gemm_use(paths)
        if not dg_dense and not dg_moe:
            env["SGLANG_ENABLE_JIT_DEEPGEMM"] = "0"
            notes.append("SGL_ENABLE_JIT_DEEPGEMM, when set, wins over SGLANG_ENABLE_JIT_DEEPGEMM: leave it unset")
        if unwarmed:
            env["SGLANG_JIT_DEEPGEMM_PRECOMPILE"] = "0"
        if dense.applicable and dense.backend is not None:
            name = (vocabulary.dense_kernels.get(dense.backend) or ("",))[0]
            scheme = str(facts.get("quant.scheme") or "") if facts is not None else ""
            fp4, fp8 = scheme == "nvfp4", scheme in ("fp8_block", "mxfp8")
            # per-tensor and per-channel FP8 linears run what `apply_fp8_linear` picks per call; the
            # FP8 GEMM flag does not steer them, yet SGLang still validates it for every FP8 linear
            per_tensor = scheme in ("fp8_tensor", "fp8_channel")
            wanted = [f for f, of in (("--fp8-gemm-backend", not fp4), ("--fp4-gemm-backend", not fp8)) if of]
            flags = [f for f in wanted if name and rel.accepts(f, name) and not per_tensor]
            for f in flags:
                args += [f, name]
            if len(flags) > 1:
                notes.append("only the GEMM flag of the checkpoint's format (FP8 or NVFP4) takes effect")
            fp8_linears = fp8 or per_tensor or not scheme  # the variables name FP8 linears only
            if not flags and fp8_linears and dense.backend in vocabulary.dense_env:
                env.update(vocabulary.dense_env[dense.backend])
            elif not flags and not per_tensor:
                notes.append(f"SGLang {rel.version} has no dense GEMM flag value for `{dense.backend}`")
            notes.append(
                "the GEMM flags act on block-FP8, MXFP8 and NVFP4 linears; per-tensor and per-channel FP8 "
                "linears have no SGLang flag"
            )
        if moe.applicable and moe.backend is not None:
            moe_scheme = facts.get("quant.moe_scheme") if facts is not None else None
            flag = vocabulary.moe_flag_for(moe.backend, moe_scheme)
            if flag and rel.accepts("--moe-runner-backend", flag):
                args += ["--moe-runner-backend", flag]
            else:
                notes.append(f"SGLang {rel.version} has no `--moe-runner-backend` value for `{moe.backend}`")
        _attention_args(paths, facts, rel, args, notes)
        if router.applicable and router.backend is not None:
            holds = "router_tier" in rel.selection_points
            notes.append(
                "no SGLang flag selects the router kernel: "
                + (
                    "the plugin holds the DeepSeek gate's tier"
                    if holds
                    else f"on SGLang {rel.version} the gate picks it"
                )
            )
        notes.append(
            "SGLang falls back to Triton per layer for shapes a backend cannot run; the plugin names such layers"
        )
        return {"env": env, "args": args, "notes": notes}


def _attention_args(
    paths: Mapping[str, PathDecision], facts: FactView | None, rel: Any, args: list[str], notes: list[str]
) -> None:
    """``--attention-backend`` for the decided attention backend (issue #39), where the release
    takes a value for it (FlashAttention is ``fa4`` on SM100, ``fa3`` elsewhere)."""
    from .names import attention_name

    attention = paths.get("attention")
    if attention is None or not attention.applicable or attention.backend is None:
        return
    family = facts.get("gpu.family") if facts is not None else None
    value = attention_name(attention.backend, family)
    if value and rel.accepts("--attention-backend", value):
        args += ["--attention-backend", value]
    else:
        notes.append(f"SGLang {rel.version} has no `--attention-backend` value for `{attention.backend}`")


SGLANG: Final = SglangSpec()
