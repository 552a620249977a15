"""Reporter protocol: hooks the resolver calls as it decides, all no-ops by default.

Subclass :class:`BaseReporter` and pass an instance to :func:`kernelpolicy.resolve` to follow
a resolution as it happens (a log line per rejection, a metrics counter, a test probe). The
explain output does not need one: a :class:`~kernelpolicy.decision.Decision` carries its
whole trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .decision import Candidate, Decision
    from .facts import Facts

__all__ = ["BaseReporter"]


class BaseReporter:
    """Every hook is a no-op; override the ones you need."""

    def starting(self, facts: Facts) -> None:
        """Called once, with the facts (implications applied) the decision is made from."""

    def implying(self, rule: str, fact: str, value: object) -> None:
        """Called when an ``implies`` rule sets an unknown fact."""

    def starting_path(self, path: str, order: tuple[str, ...]) -> None:
        """Called before a path's candidates are judged, with their priority order."""

    def judging(self, path: str, candidate: Candidate) -> None:
        """Called with each candidate's verdict, in priority order."""

    def ending_path(self, path: str, backend: str | None) -> None:
        """Called when a path is decided (``None``: no valid backend)."""

    def ending(self, decision: Decision) -> None:
        """Called once with the finished decision."""
