"""vLLM's spec: its launch line, how its parser reads it, its ``--config`` file, its online
quantization, its releases, and a decision as vLLM's own flags and environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ...errors import UsageError
from ..engine import EngineSpec, FactView, deep_gemm_use
from ..line import LineValues, check_config_value, config_file, flag_tokens, parse_known, serve_parser
from ..table import full_spellings
from .flags import FLAGS, JSON_FLAGS, facts_of, fold_dotted

if TYPE_CHECKING:
    from ...decision import PathDecision
    from ...policy import EngineMap

__all__ = ["VLLM", "VllmSpec"]

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


def _dashes(token: str) -> str:
    """vLLM's spelling rule: ``--tensor_parallel_size`` is ``--tensor-parallel-size``."""
    if not token.startswith("--"):
        return token
    name, eq, value = token.partition("=")
    return name.replace("_", "-") + eq + value


def _config_flag(key: str, value: object) -> list[str]:
    """One ``key: value`` of a vLLM YAML config (``key`` is a long flag name, ``_`` or ``-``)."""
    return flag_tokens("--" + key.replace("_", "-"), value, kept={*_CONFIG_FLAGS, *JSON_FLAGS})


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


def _attention_flag(paths: Mapping[str, PathDecision], facts: FactView | None, out: dict[str, Any]) -> None:
    """``--attention-backend NAME`` where vLLM's own order would not pick the decided backend: a
    rule moved the path, or the deployment chose it. The catalog's requirements are vLLM's own
    checks, so elsewhere vLLM picks the decided backend itself and the line stays as it is."""
    from .attention import vllm_names

    p = paths.get("attention")
    if p is None or p.backend is None or not (p.rules or p.preferred_by or p.explicit):
        return
    mla = facts is not None and facts.get("model.mla") is True
    family = facts.get("gpu.family") if facts is not None else None
    names = vllm_names(p.backend, mla=mla, family=str(family) if family else None)
    if names:
        out["args"] += ["--attention-backend", names[0]]
    else:
        out["notes"].append(f"vLLM has no `--attention-backend` value for `{p.backend}`")


class VllmSpec(EngineSpec):
    """vLLM."""

    name: ClassVar[str] = "vllm"
    title: ClassVar[str] = "vLLM"
    flags: ClassVar = FLAGS
    commands: ClassVar = (("vllm", "serve"),)
    modules: ClassVar = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
    usage: ClassVar[str] = "vllm serve MODEL [FLAGS]"
    launch: ClassVar[str] = "vllm serve"
    plugin_does: ClassVar[str] = "with the plugin every path follows this decision"
    env_prefix: ClassVar[str] = "VLLM_"
    env_complete: ClassVar[bool] = True
    requirement: ClassVar[str] = "vllm=={version}"
    online: ClassVar[Mapping[str, Mapping[str, object]]] = {
        "fp8": {"quant.scheme": "fp8_tensor", "quant.activation_scheme": "dynamic", "quant.scale_fmt": "fp32"},
        "ptpc_fp8": {"quant.scheme": "fp8_channel", "quant.activation_scheme": "dynamic", "quant.scale_fmt": "fp32"},
        "mxfp8": {"quant.scheme": "mxfp8", "quant.scale_fmt": "ue8m0"},
    }

    def read_line(
        self, rest: list[str], positional: str | None, env: dict[str, str], release: str | None
    ) -> LineValues:
        """vLLM *release*'s reading: ``_`` is ``-`` in a long flag, then an unambiguous prefix
        of one of the release's options is that option (``--tensor-parallel 2``; a prefix of
        several is refused, as vLLM refuses it); a ``--config`` file first, then the line (the
        line wins); flags that rewrite the model config are refused."""
        rest = self.spelled(fold_dotted([_dashes(t) for t in rest]), release)
        parser = serve_parser(self.flags, "vllm serve")
        values, unknown = parse_known(parser, rest)
        if "vllm_config" in values:
            from_file, unknown_file = parse_known(
                parser, self.spelled(self.config_tokens(values["vllm_config"]), release)
            )
            values = {**from_file, **values}
            unknown += unknown_file
        if positional is not None and values.setdefault("model", positional) != positional:
            raise UsageError(f"serve line: two models, `{positional}` and `--model {values['model']}`")
        _refuse_config_flags(unknown)
        ignored = tuple(t for t in unknown if t.startswith("-") and t.partition("=")[0] not in _CONFIG_FLAGS)
        return LineValues(values, env, ignored, self.name)

    def spelled_flag(self, token: str) -> str:
        return _dashes(token)

    def spelled(self, tokens: list[str], release: str | None) -> list[str]:
        """*tokens* with each abbreviated option written out as *release*'s parser reads it
        (the newest release with scanned options when None; :mod:`.options`)."""
        from .options import options_for

        found = options_for(release)
        if found is None:
            return tokens
        version, options = found
        # the table's own names are read as written: `--config FILE` is taken by vLLM's
        # FlexibleArgumentParser before argparse sees the line, so it is no prefix of `--config-format`
        own = {name: flag.dest for flag in self.flags for name in flag.names}
        return full_spellings(tokens, {**options, **own}, f"vLLM {version}")

    def config_tokens(self, path: str) -> list[str]:
        """A vLLM YAML ``--config`` file as flags (``key: value`` is ``--key value``)."""

        def flag_of(key: str, value: object) -> list[str]:
            if not ("--" + key.replace("_", "-") in JSON_FLAGS and isinstance(value, Mapping)):
                check_config_value(path, key, value, self.flags)  # a JSON flag takes a mapping
            return _config_flag(key, value)

        return config_file(path, self.title, flag_of)

    def facts_of(self, values: Mapping[str, Any], vocabulary: EngineMap | None) -> dict[str, Any]:
        return facts_of(values)

    def unread_env(self, version: str, names: Sequence[str]) -> Mapping[str, str]:
        from .versions import unread_env

        return unread_env(version, names)

    def env_value(self, name: str, raw: str, version: str | None) -> str:
        from .env import engine_env_value

        return engine_env_value(name, raw, version)

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
        """vLLM's switches: DeepGEMM off where no path runs it (or off for MoE alone), warmup
        skipped where no DeepGEMM kernel the paths run is warmed, the dense kernels ahead of
        the choice disabled by class name, and ``--moe-backend``."""
        env: dict[str, str] = {}
        args: list[str] = []
        notes: list[str] = []
        dense, moe, router = paths["dense"], paths["moe"], paths["router"]
        dg_dense, dg_moe, unwarmed = deep_gemm_use(paths)
        if not dg_dense and not dg_moe:
            env["VLLM_USE_DEEP_GEMM"] = "0"
        elif dg_dense and not dg_moe and moe.applicable:
            env["VLLM_MOE_USE_DEEP_GEMM"] = "0"
        if unwarmed:
            env["VLLM_DEEP_GEMM_WARMUP"] = "skip"
        disabled: list[str] = []
        for c in dense.candidates:
            if c.verdict == "chosen":
                break
            if c.verdict != "rejected" or any(r.startswith("catalog.") for r in c.rules):
                continue  # the engine's own checks reject what the catalog rejects
            if c.backend in ("deep_gemm", "flashinfer_deep_gemm") and env.get("VLLM_USE_DEEP_GEMM") == "0":
                continue
            disabled += list(vocabulary.dense_kernels.get(c.backend, ()))
        if disabled:
            env["VLLM_DISABLED_KERNELS"] = ",".join(dict.fromkeys(disabled))
        if moe.backend is not None:
            flag = vocabulary.moe_flag.get(moe.backend)
            if flag:
                args += ["--moe-backend", flag]
            else:
                notes.append(f"vLLM has no `--moe-backend` value for `{moe.backend}`")
        if router.backend is not None:
            notes.append("no vLLM flag selects the router kernel: the plugin applies it")
        out = {"env": env, "args": args, "notes": notes}
        _attention_flag(paths, facts, out)
        return out


VLLM: Final = VllmSpec()
