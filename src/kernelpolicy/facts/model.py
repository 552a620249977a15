"""Model facts from a local checkpoint, the Hugging Face cache or Hub, or the shipped catalog.

A model is found as vLLM finds it: a local folder or config.json; else a Hub id in the local
Hugging Face cache; else the shipped catalog (``rules/models.yaml``, config.json excerpts of
well-known checkpoints, the offline fallback); else its metadata files fetched from the Hub
(unless ``HF_HUB_OFFLINE``). Every config goes through one typed parser (``_quant``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from .._files import ReadError, read_bounded
from .._paths import expand_user
from ..errors import UnknownModelError
from .hub import HubOptions, cached_revisions, fetch_metadata, is_repo_id, read_cached
from .quant import ModelConfigError, config_facts

__all__ = [
    "CatalogModel",
    "ModelConfigError",
    "ModelSource",
    "facts_from_config",
    "find_model",
    "locate_model",
    "parse_catalog",
    "typo_of",
]

#: config files larger than this are refused (real config.json files are a few kB)
MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True)
class CatalogModel:
    """One entry of the shipped model catalog."""

    id: str
    source: str
    config: Mapping[str, Any]
    facts: Mapping[str, Any] = field(default_factory=dict)
    refs: tuple[str, ...] = ()


def parse_catalog(entries: Sequence[Mapping[str, Any]]) -> tuple[CatalogModel, ...]:
    """Catalog entries (already schema-checked) as :class:`CatalogModel` values."""
    return tuple(
        CatalogModel(
            id=e["id"],
            source=e.get("source", ""),
            config=e["config"],
            facts=e.get("facts") or {},
            refs=tuple(e.get("refs") or ()),
        )
        for e in entries
    )


@dataclass(frozen=True)
class ModelSource:
    """Where a model's config came from, and what it says."""

    config: Mapping[str, Any]
    source: str  #: ``config.json`` (a local path), ``hf-cache``, ``hub`` or ``catalog``
    file: str  #: the config's path (or catalog id), for messages
    quant_file: Mapping[str, Any] | None = None  #: ModelOpt's hf_quant_config.json
    quant_file_name: str = "hf_quant_config.json"
    facts: Mapping[str, Any] = field(default_factory=dict)  #: the catalog's extra facts

    def model_facts(self) -> dict[str, object]:
        """``model.*`` and ``quant.*`` facts of the config (and its hf_quant_config.json)."""
        return config_facts(
            self.config, file=self.file, quant_file=self.quant_file, quant_file_name=self.quant_file_name
        )


def facts_from_config(config: Mapping[str, Any], *, file: str = "config.json") -> dict[str, object]:
    """``model.*`` and ``quant.*`` facts from a Hugging Face config.json mapping.

    :raises ModelConfigError: a field kernelpolicy reads has the wrong type or value.
    """
    return config_facts(config, file=file)


def read_json(path: Path) -> Mapping[str, Any]:
    """A JSON object from *path*; one clear error naming the file otherwise."""

    name = str(path)
    try:  # bounded: a FIFO or a device is refused at once, not waited on or read forever
        data = json.loads(read_bounded(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except ReadError as exc:
        if exc.too_large:
            raise ModelConfigError(name, "", f"larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB") from None
        raise ModelConfigError(name, "", f"cannot be read ({exc.reason})") from None
    except UnicodeDecodeError:
        raise ModelConfigError(name, "", "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(name, "", f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise ModelConfigError(name, "", "nested too deeply to be a model config") from None
    except ValueError:  # an integer of more digits than Python converts
        raise ModelConfigError(name, "", "holds a number too large to be a model's") from None
    if not isinstance(data, Mapping):
        raise ModelConfigError(name, "", "not a JSON object")
    return data


def _from_files(files: Mapping[str, str], source: str) -> ModelSource:
    config_path = Path(files["config.json"])
    quant = files.get("hf_quant_config.json")
    return ModelSource(
        config=read_json(config_path),
        source=source,
        file=str(config_path),
        quant_file=read_json(Path(quant)) if quant else None,
        quant_file_name=str(quant or "hf_quant_config.json"),
    )


#: What a local checkpoint without a Hugging Face config.json is, and what to do about it.
_MISTRAL: Final = (
    "a Mistral-format folder (`params.json`, no `config.json`): vLLM reads it with"
    " `--config-format mistral`, which kernelpolicy does not; give the checkpoint's Hugging Face"
    " folder (with `config.json`), or its id"
)
_GGUF: Final = (
    "a GGUF file: vLLM runs GGUF weights with its own GGUF kernels, outside the FP8/FP4 paths kernelpolicy decides"
)


def _local(path: Path, spec: str) -> ModelSource:
    if path.suffix.lower() == ".gguf":
        raise UnknownModelError(spec, _GGUF)
    if path.is_dir():
        if not (path / "config.json").is_file():
            if (path / "params.json").is_file():
                raise UnknownModelError(spec, _MISTRAL)
            if any(p.suffix.lower() == ".gguf" for p in _first_entries(path)):
                raise UnknownModelError(spec, "the folder has no `config.json`; it holds GGUF files, " + _GGUF[8:])
            raise UnknownModelError(spec, "the folder has no `config.json` (a Hugging Face checkpoint folder has one)")
        files = {name: str(path / name) for name in ("config.json", "hf_quant_config.json") if (path / name).is_file()}
        return _from_files(files, "config.json")
    return _from_files({"config.json": str(path)}, "config.json")


def _first_entries(path: Path, limit: int = 200) -> list[Path]:
    """At most *limit* entries of the folder *path* (none when it cannot be listed)."""
    out: list[Path] = []
    try:
        for entry in path.iterdir():
            out.append(entry)
            if len(out) >= limit:
                break
    except OSError:
        return []
    return out


def _distance(a: str, b: str) -> int:
    """Optimal-string-alignment edit distance (a transposition counts once)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def typo_of(spec: str, names: Sequence[str]) -> list[str]:
    """Known *names* that *spec* is a typo of: one edit, or two with the same numbers; an id
    written without its organisation (``Qwen3.6-35B-A3B-FP8``) is a typo of the full id.

    ``Qwen/Qwen3.6-35B-A3B-FP8`` is not suggested for ``Qwen/Qwen3-30B-A3B-FP8``: different
    numbers name a different model, not a misspelling. *spec* itself is never suggested.
    """
    digits = re.findall(r"\d+", spec)
    low = spec.strip().lower()
    out = []
    for n in names:
        name = n.lower()
        if name == low:
            continue
        d = min(_distance(low, name), _distance(low, name.split("/", 1)[-1]))
        if d <= 1 or (d <= 2 and re.findall(r"\d+", n) == digits):
            out.append(n)
    return out


def locate_model(spec: str, catalog: Sequence[CatalogModel], hub: HubOptions | None = None) -> ModelSource:
    """The config of *spec*: a folder, a config.json, or a Hub id (cache, catalog, then the Hub).

    The catalog answers for its ids without the network (so tools and golden cases decide the
    same everywhere); an explicit ``hub.revision`` skips it and reads the real files.

    :raises UnknownModelError: *spec* cannot be found (one line saying where it was looked for).
    :raises ModelConfigError: its config cannot be read or has a wrong field.
    """
    path = expand_user(spec)  # `~nouser/x` stays as written (no such home folder)
    if path.exists() or path.suffix.lower() == ".gguf":
        return _local(path, spec)
    hub = hub or HubOptions.from_env()
    if hub.modelscope:
        raise UnknownModelError(
            spec,
            "VLLM_USE_MODELSCOPE is set, so vLLM downloads it from ModelScope, which kernelpolicy does"
            " not read (give the folder vLLM downloaded it to, or unset VLLM_USE_MODELSCOPE)",
        )
    by_id = {m.id.lower(): m for m in catalog}
    hit = by_id.get(spec.lower())  # as written: an id with a blank or a newline is no id
    extra = hit.facts if hit is not None else {}
    repo = is_repo_id(spec)
    if repo:
        cached = read_cached(spec, hub)
        if cached is not None:
            return replace(_from_files(cached, "hf-cache"), facts=extra)
    if hit is not None and hub.revision is None:  # an explicit --revision asks for the real files
        return ModelSource(config=hit.config, source="catalog", file=f"rules/models.yaml: {hit.id}", facts=extra)
    typos = typo_of(spec, [m.id for m in catalog])
    if not repo:
        raise UnknownModelError(spec, "no such folder or config.json, and not a Hugging Face id (`org/name`)", typos)
    if hit is not None:
        typos = []  # a catalog id: the revision is what is missing, not the spelling
    cached_refs = cached_revisions(spec, hub) if hub.revision is not None else []
    if hub.offline:
        if hub.revision is not None and (cached_refs or hit is not None):
            have = f" (cached: {', '.join(f'`{r}`' for r in cached_refs)})" if cached_refs else ""
            also = "; without --revision the shipped catalog answers" if hit is not None else ""
            raise UnknownModelError(
                spec,
                f"revision `{hub.revision}` is not in the Hugging Face cache `{hub.cache_dir}`{have}"
                f" and HF_HUB_OFFLINE is set{also}",
            )
        raise UnknownModelError(
            spec,
            f"not in the Hugging Face cache `{hub.cache_dir}` and HF_HUB_OFFLINE is set"
            f" (fetch it once online, or give a local folder)",
            typos,
        )
    try:
        files = fetch_metadata(spec, hub)
    except UnknownModelError as exc:
        reason = exc.reason
        if hit is not None and hub.revision is not None and "revision" in reason:
            reason += "; without --revision the shipped catalog answers"
        raise UnknownModelError(spec, reason, typos) from None
    return replace(_from_files(files, "hub"), facts=extra)


def find_model(spec: str, catalog: Sequence[CatalogModel]) -> tuple[Mapping[str, Any], Mapping[str, Any], str]:
    """``(config, extra_facts, source)`` of *spec* (see :func:`locate_model`)."""
    found = locate_model(spec, catalog)
    return found.config, found.facts, found.source
