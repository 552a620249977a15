"""The facts record: typed, immutable, every value checked against the vocabulary."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from packaging.version import Version

from .._numbers import ascii_int
from ..errors import FactError, did_you_mean
from .keys import CANONICAL, FACT_KEYS, Kind, lookup_key

__all__ = [
    "SOURCES",
    "FactValue",
    "Facts",
    "check_source",
    "check_values",
    "int_list_length",
    "normalise_value",
    "parse_fact_text",
    "typed_value",
]

FactValue = str | int | bool | tuple[int, ...] | tuple[str, ...]

#: Where a fact can come from, most authoritative first.
SOURCES: Final = (
    "user",  # --fact, --env, --moe-backend, a Python caller
    "env",  # KERNELPOLICY_FACTS and the engine variables of the environment
    "vllm",  # the running vLLM's own config, platform and environment (the plugin)
    "sglang",  # the running SGLang's server arguments (the plugin)
    "probe",  # a live check on this machine's GPU
    "nvml",
    "torch",
    "metadata",  # installed package metadata and files
    "venv",  # the engine's virtual environment named by --venv
    "report",  # a pasted `vllm collect-env` / `sglang.check_env` report (--from-env-report)
    "config.json",  # a local folder or config.json
    "hf-cache",  # config.json in the local Hugging Face cache
    "hub",  # config.json fetched from the Hugging Face Hub (HF_ENDPOINT)
    "catalog",  # the shipped model or GPU catalog
    "spec",  # derived from the GPU spec given on the command line
    "implied",  # derived by an `implies` rule from other facts (`implied:<id>` names the rule)
    "default",  # the engine's default (tensor and expert parallel size 1)
)


#: The least value of an integer fact: sizes and counts are positive; a MoE layer's expert counts
#: may be 0 (a dense model's config), GPTQ's ``group_size`` -1 (one group per channel).
_INT_MIN: Final[dict[str, int]] = {
    "model.num_experts": 0,
    "model.experts_per_token": 0,
    "quant.group_size": -1,
    "model.qk_rope_head_dim": 0,  # rope-free MLA (issue #39)
}
_INT_MAX: Final = 2**63 - 1


def check_source(key: str, source: object) -> str:
    """*source* when it is one of :data:`SOURCES`.

    :raises FactError: naming *key*, for a source outside the vocabulary (a decision reports
        where each fact came from: `bogus` there would be a report nobody can act on).
    """
    if isinstance(source, str) and (source in SOURCES or (source.startswith("implied:") and len(source) > 8)):
        return source  # `implied:<rule id>`: the implication that set it
    hint = did_you_mean(source, SOURCES) if isinstance(source, str) else []
    raise FactError(
        key,
        f"source `{source}` is not one of {', '.join(SOURCES)}",
        help=f"did you mean `{hint[0]}`?" if hint else None,
    )


def _in_range(key: str, value: int) -> int:
    if value.bit_length() > 63:
        raise FactError(key, f"a number too large (more than 63 bits, {value.bit_length()} here)")
    least = _INT_MIN.get(key, 1)
    if not least <= value <= _INT_MAX:
        raise FactError(key, f"`{value}` is out of range (at least {least})")
    return value


#: Integer lists of a fixed length: a weight block is ``[n, k]``, both positive.
_INT_LIST_LEN: Final[dict[str, int]] = {"quant.block": 2}


def int_list_length(key: str) -> int | None:
    """How many items an integer-list fact holds, where that is fixed (``quant.block``: 2)."""
    return _INT_LIST_LEN.get(key)


def _int_list(key: str, value: tuple[int, ...]) -> tuple[int, ...]:
    want = _INT_LIST_LEN.get(key)
    if want is not None and len(value) != want:
        raise FactError(key, f"`{list(value)}` must hold {want} sizes (as `[128, 128]`)")
    if want is not None:
        for v in value:
            _in_range(key, v)
    return value


def normalise_value(key: str, value: Any) -> FactValue:  # noqa: PLR0912 (predates the lint; split in a follow-up)
    """Check *value* against *key*'s kind and return its canonical form.

    :raises FactError: for an unknown key or a value of the wrong kind.
    """
    fk = lookup_key(key)
    if fk is None:
        hint = did_you_mean(key, FACT_KEYS)
        raise FactError(key, "unknown fact key", help=f"did you mean `{hint[0]}`?" if hint else None)
    kind = fk.kind
    if kind is Kind.BOOL:
        if isinstance(value, bool):
            return value
    elif kind is Kind.INT:
        if isinstance(value, int) and not isinstance(value, bool):
            return _in_range(key, value)
    elif kind is Kind.INT_LIST:
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return _int_list(key, tuple(value))
    elif kind is Kind.STR_LIST:
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif kind is Kind.VERSION:
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            try:
                return str(Version(str(value)))
            except ValueError:  # InvalidVersion, or more digits than int() converts
                raise FactError(key, f"`{value}` is not a valid version") from None
    elif isinstance(value, str):
        if kind is Kind.ENUM and value not in fk.domain:
            hint = did_you_mean(value, fk.domain)
            raise FactError(
                key,
                f"`{value}` is not one of {', '.join(fk.domain)}",
                help=f"did you mean `{hint[0]}`?" if hint else None,
            )
        if key in CANONICAL:
            canon, what, _ = CANONICAL[key]
            short = canon(value)
            if short is None:
                raise FactError(key, f"`{value}` is not {what}")
            return short
        return value
    if kind is Kind.ENUM:
        raise FactError(key, f"`{value!r}` is not one of {', '.join(fk.domain)}")
    raise FactError(key, f"`{value!r}` is not a valid {kind.value}")


def check_values(values: Mapping[Any, Any]) -> dict[str, FactValue]:
    """Every key and value of *values* checked (:func:`normalise_value`), in canonical form.

    :raises FactError: for the first key that is not a fact key or value that does not fit it.
    """
    out: dict[str, FactValue] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise FactError(str(key), "a fact key is a string such as `gpu.sm`")
        if value is None:
            raise FactError(key, "`None` is not a value: leave the key out for an unknown fact")
        out[key] = normalise_value(key, value)
    return out


def typed_value(key: str, value: FactValue) -> Any:
    """*value* as conditions compare it: versions as :class:`~packaging.version.Version`."""
    fk = lookup_key(key)
    return Version(str(value)) if fk is not None and fk.kind is Kind.VERSION else value


def parse_fact_text(key: str, text: str) -> FactValue:
    """Parse a command-line ``KEY=VALUE`` value by the kind of *key*."""
    fk = lookup_key(key)
    if fk is None:
        return normalise_value(key, text)  # raises the unknown-key error
    t = text.strip()
    kind = fk.kind
    if kind is Kind.BOOL:
        low = t.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise FactError(key, f"`{text}` is not true or false")
    if kind is Kind.INT:
        try:
            return ascii_int(t)
        except ValueError:
            raise FactError(key, f"`{text}` is not an integer (ASCII digits)") from None
    if kind in (Kind.INT_LIST, Kind.STR_LIST):
        items = [p.strip() for p in t.strip("[]").split(",") if p.strip()]
        if kind is Kind.INT_LIST:
            try:
                return tuple(ascii_int(p) for p in items)
            except ValueError:
                raise FactError(key, f"`{text}` is not a list of integers") from None
        return tuple(items)
    return normalise_value(key, t)


class Facts:
    """What is known about one deployment: a value and a source per fact key.

    Immutable and hashable. Keys absent from :attr:`values` are *unknown*, which the resolver
    treats as described in docs/design.md (crash rules apply, others do not).
    """

    __slots__ = ("_hash", "_key", "_typed", "sources", "values")
    values: Mapping[str, FactValue]
    sources: Mapping[str, str]
    _typed: dict[str, Any] | None
    _key: tuple[tuple[str, FactValue], ...] | None
    _hash: int | None

    def __init__(self, *, values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        """``Facts(values=..., sources=...)``: every key and value checked against the vocabulary,
        every value given a source, and the GPU facts in agreement.

        :raises FactError: with the message the command line gives for the same input.
        """
        from .._args import check_arg

        check_arg("Facts", "values", values, Mapping)  # a caller's types are not checked statically
        check_arg("Facts", "sources", sources, Mapping)
        checked = check_values(values)
        for key in checked:
            if not isinstance(sources.get(key), str):
                raise FactError(key, "has no source", help="give `sources` a string for every key of `values`")
            check_source(key, sources[key])
        extra = [k for k in sources if k not in checked]
        if extra:
            raise FactError(str(extra[0]), "has a source but no value")
        from .gpu import check_gpu_facts

        check_gpu_facts(checked, sources)
        self._fill(checked, dict(sources))

    def _fill(self, values: dict[str, FactValue], sources: dict[str, str]) -> None:
        set_ = object.__setattr__
        set_(self, "values", values)
        set_(self, "sources", sources)
        set_(self, "_typed", None)
        set_(self, "_key", None)
        set_(self, "_hash", None)

    @classmethod
    def _of(cls, values: dict[str, FactValue], sources: dict[str, str], typed: dict[str, Any] | None = None) -> Facts:
        """Facts from values already checked against the vocabulary (kernelpolicy's own
        constructors, which normalise every value themselves); *typed*, when the caller has it,
        is :meth:`typed` of these values."""
        self = object.__new__(cls)
        self._fill(values, sources)
        if typed is not None:
            object.__setattr__(self, "_typed", typed)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Facts are immutable (cannot set `{name}`)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Facts._of, (dict(self.values), dict(self.sources)))

    @classmethod
    def from_values(cls, values: Mapping[str, Any], source: str = "user") -> Facts:
        """Facts from plain values, all from one *source* (one of :data:`SOURCES`); ``None``
        values are dropped.

        :raises FactError: for a value that does not fit its key or a source outside :data:`SOURCES`.
        """
        from .._args import check_arg, check_mapping

        check_arg("Facts.from_values", "values", values, Mapping)
        check_mapping("Facts.from_values", "values", values)
        check_arg("Facts.from_values", "source", source, str)
        checked = {k: normalise_value(k, v) for k, v in values.items() if v is not None}
        check_source(next(iter(checked), "source"), source)
        return cls._of(checked, dict.fromkeys(checked, source))

    @classmethod
    def empty(cls) -> Facts:
        return cls._of({}, {})

    def merged(self, other: Facts) -> Facts:
        """These facts with *other*'s values on top (other wins on shared keys)."""
        return Facts._of({**self.values, **other.values}, {**self.sources, **other.sources})

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.values

    @property
    def key(self) -> tuple[tuple[str, FactValue], ...]:
        """A hashable, order-independent identity of the values."""
        key = self._key
        if key is None:
            key = tuple(sorted(self.values.items()))
            object.__setattr__(self, "_key", key)
        return key

    def typed(self) -> dict[str, Any]:
        """Values as conditions compare them (versions as :class:`~packaging.version.Version`)."""
        typed = self._typed
        if typed is None:
            typed = {k: typed_value(k, v) for k, v in self.values.items()}
            object.__setattr__(self, "_typed", typed)
        return typed

    def to_json_dict(self) -> dict[str, Any]:
        """Values as JSON-ready data, keys sorted."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(self.values.items())}

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self.key)
            object.__setattr__(self, "_hash", h)
        return h

    def __eq__(self, other: object) -> bool:
        """Equal values *and* sources: a decision reports where each fact came from, so facts that
        differ only in a source must not share one (the hash, of the values, stays consistent)."""
        return self is other or (
            isinstance(other, Facts) and self.key == other.key and dict(self.sources) == dict(other.sources)
        )

    def __repr__(self) -> str:
        return f"Facts({json.dumps(self.to_json_dict(), sort_keys=True)})"
