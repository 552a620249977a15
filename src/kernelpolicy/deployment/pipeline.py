"""One fact pipeline: how a deployment's inputs become :class:`Facts`, for every caller.

``kernelpolicy explain`` (and ``vllm audit``) and the vLLM plugin build their facts through
:func:`build_facts`, from the same kinds of input, in the same order (later layers win):

1. *derived* facts: what the caller reads itself (a GPU spec and a model config on the
   command line; vLLM's own config, platform and packages in the plugin);
2. the process environment (*environ*): ``deploy.env.<NAME>`` for every variable a loaded rule
   reads (:func:`env_names`, derived from the policy, not listed by hand), then the JSON object
   in ``KERNELPOLICY_FACTS``; both with source ``env``;
3. explicit choices of the caller (``--fact``, ``--env``, ``--moe-backend``; source ``user``);
4. defaults (tensor and expert parallel size 1; no speculative decoding, decode context parallel,
   two-batch overlap or disaggregation) where nothing above set them;
5. layer-shape facts derived from the model's widths and the parallelism (``_shapes``), where
   nothing above stated them.

Problems in ``KERNELPOLICY_FACTS`` are one-line :class:`~kernelpolicy.errors.UsageError` messages
that start with the variable's name. A key the vocabulary does not know is a warning (the key is ignored), or an
error with ``KERNELPOLICY_STRICT=1``; a ``null`` value is an error (it would erase a detected fact).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import FactError, UsageError, did_you_mean
from ..facts.gpu import check_gpu_facts
from ..facts.keys import BACKENDS, ENV_PREFIX, FACT_KEYS, lookup_key
from ..facts.record import Facts, normalise_value
from ..releases import DEFAULT, spec, title
from ._shapes import shape_facts

if TYPE_CHECKING:
    from ..dsl.conditions import Condition
    from ..policy import Policy
    from ..releases.engine import EngineSpec

__all__ = [
    "FACTS_ENV",
    "STRICT_ENV",
    "BuiltFacts",
    "build_facts",
    "engine_built",
    "engine_facts",
    "env_names",
    "environ_facts",
    "is_strict",
]

#: Operator facts for a deployment, as a JSON object of fact keys.
FACTS_ENV: Final = "KERNELPOLICY_FACTS"
#: Turns warnings about the inputs (and, in the plugin, about applying the decision) into errors.
STRICT_ENV: Final = "KERNELPOLICY_STRICT"
_DEFAULTS: Final = (
    ("deploy.tp", 1),
    ("deploy.ep", 1),
    ("deploy.engine", DEFAULT),
    # the serving modes both engines start in when no flag asks otherwise (issue #35)
    ("deploy.dcp", 1),
    ("deploy.speculative", "none"),
    ("deploy.two_batch_overlap", False),
    ("deploy.disaggregation", "none"),
)


@dataclass(frozen=True)
class BuiltFacts:
    """The facts of a deployment and the warnings found on the way (one line each)."""

    facts: Facts
    warnings: tuple[str, ...] = ()
    #: of *warnings*, the stated facts that contradicted the engine's config (the engine's
    #: value decided): a decision records them
    conflicts: tuple[str, ...] = ()


def is_strict(environ: Mapping[str, str]) -> bool:
    """``KERNELPOLICY_STRICT`` is set to a true value in *environ*.

    :raises UsageError: for a value that is neither on nor off (``2``, ``enabled``).
    """
    from .._flags import env_flag

    return env_flag(environ, STRICT_ENV)


def _conditions(policy: Policy) -> Iterator[Condition]:
    for by_id in policy.backends.values():
        for backend in by_id.values():
            yield backend.requires
    for orders in policy.orders.values():
        for order in orders:
            yield order.when
    for rule in policy.rules:
        yield rule.when
        yield rule.require
        if rule.until is not None:
            yield rule.until
    for imp in policy.implications:
        yield imp.when
        if imp.unless is not None:
            yield imp.unless


_ENV_NAMES: dict[str, tuple[str, ...]] = {}


def env_names(policy: Policy) -> tuple[str, ...]:
    """Every environment variable a condition of *policy* reads (its ``deploy.env.*`` keys), sorted."""
    cached = _ENV_NAMES.get(policy.digest)
    if cached is not None:
        return cached
    from ..dsl.conditions import tests_of  # the DSL imports the fact vocabulary: import late

    keys = {t.key for cond in _conditions(policy) for t in tests_of(cond)}
    keys |= {key for imp in policy.implications for key in imp.sets}
    names = {key[len(ENV_PREFIX) :] for key in keys if key.startswith(ENV_PREFIX)}
    out = tuple(sorted(n for n in names if lookup_key(ENV_PREFIX + n) is not None))
    if len(_ENV_NAMES) > 16:
        _ENV_NAMES.clear()
    _ENV_NAMES[policy.digest] = out
    return out


def _facts_json(raw: str) -> Mapping[str, Any]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise UsageError(f"{FACTS_ENV}: not valid JSON: {exc.msg.lower()} at {where}") from None
    except RecursionError:
        raise UsageError(f"{FACTS_ENV}: nested too deeply") from None
    except ValueError:  # an integer of more digits than Python converts
        raise UsageError(f"{FACTS_ENV}: a number too large") from None
    if not isinstance(data, Mapping):
        raise UsageError(f"{FACTS_ENV}: expected a JSON object of fact keys, got a JSON {_json_kind(data)}")
    return data


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _named(exc: FactError) -> UsageError:
    """*exc* with the variable it came from in front (``KERNELPOLICY_FACTS: fact `k`: ...``)."""
    return UsageError(f"{FACTS_ENV}: {exc}")


def environ_facts(
    environ: Mapping[str, str],
    policy: Policy,
    *,
    strict: bool | None = None,
) -> BuiltFacts:
    """``deploy.env.*`` (variables the policy reads) and ``KERNELPOLICY_FACTS`` from *environ*.

    :param strict: unknown keys in ``KERNELPOLICY_FACTS`` are errors; default: :func:`is_strict`.
    :raises UsageError: ``KERNELPOLICY_FACTS`` is not a JSON object, holds a ``null``, a value
        of the wrong kind, or (strict) a key the vocabulary does not know; the message names it.
    """
    strict = is_strict(environ) if strict is None else strict
    values: dict[str, Any] = {}
    for name in env_names(policy):
        if name in environ:
            values[ENV_PREFIX + name] = str(environ[name])
    warnings: list[str] = []
    raw = environ.get(FACTS_ENV, "")
    for raw_key, value in (_facts_json(raw) if raw.strip() else {}).items():
        key = str(raw_key)
        if lookup_key(key) is None:
            hint = did_you_mean(key, FACT_KEYS)
            exc = FactError(key, "unknown fact key", help=f"did you mean `{hint[0]}`?" if hint else None)
            if strict:
                raise _named(exc)
            warnings.append(f"{FACTS_ENV}: {exc}; ignored")
            continue
        if value is None:
            raise _named(FactError(key, "`null` is not a value (leave the key out to keep the detected value)"))
        try:
            _case_typo(key, policy)
            values[key] = normalise_value(key, value)
        except FactError as exc:
            raise _named(exc) from None
    return BuiltFacts(Facts.from_values(values, source="env"), tuple(warnings))


def _backend_id(path: str, name: str, policy: Policy) -> str:
    """A backend id for *path*, accepting engine names as aliases (vLLM `cutlass` for MoE)."""
    if name in BACKENDS[path]:
        return name
    for engine in policy.engines.values():
        alias = engine.aliases.get(path, {}).get(name)
        if alias is not None:
            return alias
    hint = did_you_mean(name, BACKENDS[path])
    key = next(k for k, p in _BACKEND_KEYS if p == path)
    raise FactError(
        key,
        f"`{name}` is not {'an' if path[0] in 'aeiou' else 'a'} {path} backend",
        help=f"did you mean `{hint[0]}`?" if hint else "ids: " + ", ".join(BACKENDS[path]),
    )


_BACKEND_KEYS: Final = (
    ("deploy.moe_backend", "moe"),
    ("deploy.linear_backend", "dense"),
    ("deploy.attention_backend", "attention"),  # issue #39
)


def _with_backend_ids(facts: Facts, policy: Policy) -> Facts:
    renamed = {
        key: _backend_id(path, str(facts.values[key]), policy)
        for key, path in _BACKEND_KEYS
        if key in facts.values and facts.values[key] not in BACKENDS[path]
    }
    if not renamed:
        return facts
    return Facts(
        values={**facts.values, **renamed},
        sources={**facts.sources, **{k: facts.sources[k] for k in renamed}},
    )


def engine_facts(spec: str) -> dict[str, Any]:
    """The facts an engine release names (``sglang==0.5.23``: ``deploy.engine`` and ``sglang.version``).

    :raises UsageError: when *spec* is not ``NAME==X.Y.Z`` of an engine kernelpolicy knows.
    :raises FactError: when the version is not one.
    """
    from ..releases import parse_engine

    name, version = parse_engine(spec, known=False, where="engine")
    return {"deploy.engine": name, f"{name}.version": normalise_value(f"{name}.version", version)}


def _case_typo(key: str, policy: Policy) -> None:
    """:raises FactError: *key* names a variable (``deploy.env.vllm_use_deep_gemm``) that no rule
    reads but that one does in another case: variable names are case-sensitive, so the
    deployment's setting would be silently left unread."""
    if not key.startswith(ENV_PREFIX):
        return
    name = key[len(ENV_PREFIX) :]
    read = env_names(policy)
    if name in read:
        return
    same = [n for n in read if n.lower() == name.lower()]
    if same:
        raise FactError(
            key,
            f"no rule reads `{name}`: variable names are case-sensitive (the engine reads `{same[0]}`)",
            help=f"did you mean `{ENV_PREFIX}{same[0]}`?",
        )


def _engine_of(facts: Facts) -> tuple[EngineSpec, str | None]:
    """The deployment's engine and its stated release (``<engine>.version``), if known."""
    engine = spec(str(facts.get("deploy.engine") or DEFAULT))
    version = facts.get(f"{engine.name}.version")
    return engine, None if version is None else str(version)


def _without_unread_env(facts: Facts) -> tuple[Facts, tuple[str, ...]]:
    """*facts* without the variables the known engine release does not read (one warning each):
    the engine ignores them, so a rule must not read them as the deployment's choice."""
    engine, version = _engine_of(facts)
    env = [k[len(ENV_PREFIX) :] for k in facts.values if k.startswith(ENV_PREFIX)]
    if version is None or not env:
        return facts, ()
    unread = engine.unread_env(version, env)
    if not unread:
        return facts, ()
    drop = {ENV_PREFIX + n for n in unread}
    kept = Facts._of(
        {k: v for k, v in facts.values.items() if k not in drop},
        {k: v for k, v in facts.sources.items() if k not in drop},
    )
    name = engine.title
    return kept, tuple(
        f"`{n}` is left out: {name} {version} does not read it ({name} {readers} does)" for n, readers in unread.items()
    )


def _with_engine_env_values(facts: Facts) -> Facts:
    """*facts* with each ``deploy.env.*`` value as the engine's release parses it (vLLM: ``00``
    -> ``0`` for a ``bool(int(...))`` flag; :meth:`~kernelpolicy.releases.engine.EngineSpec.env_value`).

    :raises FactError: naming the variable, for a value the release refuses (the engine stops there).
    """
    keys = [k for k in facts.values if k.startswith(ENV_PREFIX)]
    if not keys:
        return facts
    engine, version = _engine_of(facts)
    changed: dict[str, str] = {}
    for key in keys:
        raw = str(facts.values[key])
        try:
            value = engine.env_value(key[len(ENV_PREFIX) :], raw, version)
        except ValueError as exc:
            raise FactError(key, str(exc)) from None
        if value != facts.values[key]:
            changed[key] = value
    if not changed:
        return facts
    return Facts._of({**facts.values, **changed}, dict(facts.sources))


def build_facts(  # noqa: PLR0913 (one keyword per input layer of the pipeline, documented below)
    policy: Policy,
    *,
    derived: Facts | None = None,
    environ: Mapping[str, str] | None = None,
    facts: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    moe_backend: str | None = None,
    linear_backend: str | None = None,
    strict: bool | None = None,
    running: Mapping[str, Any] | None = None,
    runs: str = "the engine",
) -> BuiltFacts:
    """The facts of one deployment (see the module docstring for the layers and their order).

    :param derived: what the caller read itself (GPU, model, packages, engine config).
    :param environ: the process environment (``None``: none is read, as with ``--no-env``).
    :param facts: explicit ``key: value`` facts (source ``user``).
    :param env: explicit environment variables of the deployment (``--env``; source ``user``).
    :param moe_backend: an explicit MoE backend (kernelpolicy id or engine alias).
    :param linear_backend: an explicit dense backend.
    :param running: the engine's running config as facts (what a plugin read from the engine's
        config, the flags of a launch line): a ``KERNELPOLICY_FACTS`` value that contradicts one
        is a conflict, reported, and the engine's value decides.
    :param runs: the engine, as that report names it (``vLLM``, ``the launch line``).
    :raises FactError: on a bad key, value or backend name.
    """
    out = derived if derived is not None else Facts.empty()
    warnings: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    if environ is not None:
        from_env = environ_facts(environ, policy, strict=strict)
        stated, conflicts = _without_conflicts(from_env.facts, running or {}, runs)
        out = out.merged(stated)
        warnings = from_env.warnings + conflicts
    user: dict[str, Any] = {k: normalise_value(k, v) for k, v in (facts or {}).items()}
    for name, value in (env or {}).items():
        user[ENV_PREFIX + name] = str(value)
    if moe_backend is not None:
        user["deploy.moe_backend"] = moe_backend
    if linear_backend is not None:
        user["deploy.linear_backend"] = linear_backend
    for key in user:
        _case_typo(key, policy)
    if user:
        out = out.merged(Facts.from_values(user, source="user"))
    out, unread = _without_unread_env(out)
    warnings += unread
    out = _with_engine_env_values(out)
    out = _with_backend_ids(out, policy)
    defaults = {k: v for k, v in _DEFAULTS if k not in out}
    if defaults:
        out = Facts.from_values(defaults, source="default").merged(out)
    if "quant.scheme" in out and "quant.moe_scheme" not in out and out.get("model.is_moe"):
        out = out.merged(
            Facts(
                values={"quant.moe_scheme": out.get("quant.scheme")},
                sources={"quant.moe_scheme": out.sources["quant.scheme"]},
            )
        )
    shapes = shape_facts(out.values)
    if shapes:  # each derived shape fact takes the source of the width it was computed from
        width_source = out.sources.get("model.intermediate_size", "default")
        out = out.merged(Facts.from_values(shapes, source=width_source))
    check_gpu_facts(out.values, out.sources, policy.gpus)  # derived GPU facts must agree
    return BuiltFacts(out, warnings, conflicts)


def _without_conflicts(stated: Facts, running: Mapping[str, Any], runs: str) -> tuple[Facts, tuple[str, ...]]:
    """*stated* (the environment's facts) without each ``KERNELPOLICY_FACTS`` value that
    contradicts the engine's *running* config, one warning each: the engine runs with its own
    value whatever a fact says, so a decision from the stated one could pick the kernel a rule
    names for the value that runs."""
    kept = dict(stated.values)
    out: list[str] = []
    for key, value in stated.values.items():
        if key.startswith(ENV_PREFIX) or running.get(key) is None:
            continue
        engine = normalise_value(key, running[key])
        if engine != value:
            del kept[key]
            out.append(
                f"{FACTS_ENV} states `{key}` = `{_shown(value)}`, but {runs} runs with `{_shown(engine)}`:"
                f" a conflict, the engine's value decides (drop the key, or change the engine's config)"
            )
    if not out:
        return stated, ()
    return Facts(values=kept, sources={k: stated.sources[k] for k in kept}), tuple(out)


def _shown(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _running(values: Mapping[str, Any]) -> dict[str, Any]:
    """The facts of an engine's own config: a ``deploy.*`` fact a plugin read from it (not its
    environment variables, and not ``deploy.engine``, which the plugin states itself)."""
    return {
        k: v
        for k, v in values.items()
        if k.startswith("deploy.") and not k.startswith(ENV_PREFIX) and k != "deploy.engine" and v is not None
    }


def engine_built(
    policy: Policy, values: Mapping[str, Any], engine: str, environ: Mapping[str, str] | None
) -> BuiltFacts:
    """The facts of the deployment an engine's plugin runs: what it read from the engine (its
    config, platform and packages; source *engine*), then *environ* and the defaults, as above.
    A ``KERNELPOLICY_FACTS`` value that contradicts the engine's config (a ``deploy.*`` fact it
    read) is a conflict: reported, and the engine's value decides."""
    return build_facts(
        policy,
        derived=Facts.from_values(values, source=engine),
        environ=environ,
        running=_running(values),
        runs=title(engine),
    )
