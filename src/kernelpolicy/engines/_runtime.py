"""What both engine plugins share: the lifecycle of a plugin in an engine's process.

Each plugin's state is a :class:`Runtime` (its subclass adds what the plugin caches): the state
every plugin has (registered or not, the engine release found, the deployment's environment at
start-up, the warnings said and the per-layer fallbacks seen, the multi-rank agreement done, a
test's resolver, one lock), and what every plugin does with it: it reads
``KERNELPOLICY_DISABLE`` and ``KERNELPOLICY_STRICT``, says a problem once (a warning, or with
strict an :class:`AdapterError`), loads the rule tables once (a load failure is one line naming
``KERNELPOLICY_POLICY``), builds the facts through the one pipeline
(:func:`kernelpolicy.deployment.pipeline.engine_built`), resolves and records the conflicts, and
turns an exception into one lowercase line. Each plugin keeps only its hooks and what it caches
of its engine's decisions.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ..deployment.pipeline import is_strict

if TYPE_CHECKING:
    import logging

    from ..deployment.pipeline import BuiltFacts

__all__ = ["DISABLE_ENV", "AdapterError", "PolicyLoadError", "Runtime", "core_policy", "message"]

DISABLE_ENV: Final = "KERNELPOLICY_DISABLE"


class AdapterError(RuntimeError):
    """A plugin could not apply the decision and ``KERNELPOLICY_STRICT=1`` is set."""


class PolicyLoadError(RuntimeError):
    """The rule tables (shipped, or named by ``KERNELPOLICY_POLICY``) did not load."""


def message(exc: BaseException) -> str:
    """One lowercase line for *exc*: kernelpolicy's own wording, else the exception's text with its
    class after it (``no module named `vllm.x` (ModuleNotFoundError)``), never a repr."""
    from ..errors import KernelPolicyError

    text = str(exc).strip().splitlines()
    if isinstance(exc, (KernelPolicyError, PolicyLoadError)):
        return text[0] if text else type(exc).__name__
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return f"no module named `{exc.name}` ({type(exc).__name__})"
    if not text:
        return f"({type(exc).__name__})"
    line = text[0]
    return f"{line[:1].lower()}{line[1:]} ({type(exc).__name__})"  # the class last: one lowercase line


@functools.lru_cache(maxsize=1)
def core_policy() -> Any:
    """The rule tables a plugin decides with (loaded once per process)."""
    import kernelpolicy as kp

    return kp.load_policy()


@dataclasses.dataclass
class Runtime:
    """One plugin's state in this process, and the lifecycle every plugin shares. A plugin
    subclasses it, setting :attr:`engine` and :attr:`stands` and adding its own caches."""

    #: the engine's name (its spec in :mod:`kernelpolicy.releases`; the logger ``kernelpolicy.<engine>``)
    engine: ClassVar[str] = ""
    #: what a non-strict problem leaves in place, after the message (``leaving vLLM's own choice in place``)
    stands: ClassVar[str] = "the engine's own choice stands"
    registered: bool = False
    version: str | None = None  #: the engine release found in this process
    environ: dict[str, str] | None = None  #: the deployment's environment at start-up
    agreed: bool = False  #: the ranks' fingerprints were compared
    resolver: Callable[[Any], Any] | None = None  #: how facts become a decision (tests); None: the core
    warnings: list[str] = dataclasses.field(default_factory=list)
    fallbacks: list[dict[str, str]] = dataclasses.field(default_factory=list)
    lock: threading.RLock = dataclasses.field(default_factory=threading.RLock)

    def logger(self) -> logging.Logger:
        """The plugin's logger (``logging`` is imported on first use: ``explain`` imports the
        plugin packages for their tables, not logging)."""
        import logging

        return logging.getLogger(f"kernelpolicy.{self.engine}")

    # -- the switches

    def strict(self) -> bool:
        """``KERNELPOLICY_STRICT`` is on; a value that is neither on nor off (``2``, ``enabled``)
        was meant to turn it on: read as on (the plugin stops rather than guess)."""
        from ..errors import UsageError

        try:
            return is_strict(os.environ)
        except UsageError:
            return True

    def disabled(self) -> bool:
        """``KERNELPOLICY_DISABLE`` is on; a value that is neither on nor off is said, and read as off."""
        from .._flags import env_flag
        from ..errors import UsageError

        try:
            return env_flag(os.environ, DISABLE_ENV)
        except UsageError as exc:
            self.logger().warning("kernelpolicy: %s; the plugin runs", exc)
            return False

    def start_environ(self) -> dict[str, str]:
        """The deployment's environment as this process sees it at start-up (``os.environ``; a
        plugin whose engine passes the plugin's own settings on to child processes leaves them out)."""
        return dict(os.environ)

    # -- saying things once

    def warn(self, text: str) -> None:
        """*text* as one warning, said once per process."""
        if text not in self.warnings:
            self.warnings.append(text)
            self.logger().warning("kernelpolicy: %s", text)

    def fail(self, text: str) -> None:
        """A problem applying the decision: a warning (the engine's own choice stands), or with
        ``KERNELPOLICY_STRICT=1`` an :class:`AdapterError`."""
        if self.strict():
            raise AdapterError(f"kernelpolicy: {text}")
        self.warn(f"{text}; {self.stands}")

    def unknown_release(self, text: str) -> None:
        """The engine release is not one the plugin knows: *text* said once (strict: raised)."""
        if self.strict():
            raise AdapterError(text)
        self.logger().warning(text)
        if text not in self.warnings:
            self.warnings.append(text)

    # -- deciding

    def policy(self) -> Any:
        """The rule tables, or one line naming ``KERNELPOLICY_POLICY`` when they do not load."""
        try:
            return core_policy()
        except Exception as exc:
            from .._files import shown_name
            from ..dsl.loader import POLICY_ENV

            named = os.environ.get(POLICY_ENV)
            where = f" (with {POLICY_ENV}=`{shown_name(named)}`)" if named else ""
            raise PolicyLoadError(f"could not load the rule tables{where}: {message(exc)}") from None

    def built(self, values: Mapping[str, object]) -> BuiltFacts:
        """The facts of the deployment from what the plugin read of its engine (*values*), through
        the one fact pipeline, with the start-up environment; each warning said once."""
        from ..deployment.pipeline import engine_built

        environ = self.environ if self.environ is not None else self.start_environ()
        built = engine_built(self.policy(), values, self.engine, environ)
        for warning in built.warnings:
            self.warn(warning)
        return built

    def resolve(self, facts: Any) -> Any:
        """A decision for *facts*: the test's resolver when one is set, else the core's."""
        if self.resolver is not None:
            return self.resolver(facts)
        import kernelpolicy as kp

        return kp.resolve(facts, self.policy())

    def decide(self, built: BuiltFacts) -> Any:
        """The decision for *built*, with the stated facts the engine's config contradicted among
        its warnings (as ``explain`` records them); a test resolver's result as it is."""
        from ..decision import Decision

        decision = self.resolve(built.facts)
        if built.conflicts and isinstance(decision, Decision):
            decision = dataclasses.replace(decision, warnings=(*decision.warnings, *built.conflicts))
        return decision

    def reset(self) -> None:
        """Forget everything this process did (tests; the lock stays)."""
        self.registered = False
        self.version = None
        self.environ = None
        self.agreed = False
        self.warnings.clear()
        self.fallbacks.clear()
