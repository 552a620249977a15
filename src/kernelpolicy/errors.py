"""Errors kernelpolicy raises, each carrying structured causes; ``str()`` derives from them.

Messages follow one style: lowercase, no final period, user values in backticks, help text
kept apart from the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ._args import check_arg, check_strs

__all__ = [
    "Diagnostic",
    "FactError",
    "KernelPolicyError",
    "PolicyError",
    "UnknownGPUError",
    "UnknownModelError",
    "UsageError",
    "did_you_mean",
]

Level = Literal["error", "warning"]
#: The characters of a source line a diagnostic keeps (and shows under its caret).
_LINE_SHOWN = 160


@dataclass(frozen=True)
class Diagnostic:
    """One finding about a rule or policy file, with its place in the source."""

    message: str
    file: str = "<input>"
    line: int = 0  #: 1-based; 0 when the finding has no place in a file
    column: int = 0  #: 1-based
    level: Level = "error"
    rule: str | None = None  #: the id of the rule the finding is about
    help: str | None = None
    code: str = "schema"  #: a short stable name of the kind of finding
    source_line: str | None = field(default=None, compare=False)
    span: int = field(default=1, compare=False)  #: width of the caret underline

    def __post_init__(self) -> None:
        # a long line (a 900 kB rule file on one line) is kept as a window around the column:
        # every diagnostic held the whole line, 9,000 of them gigabytes (and the compiled cache
        # wrote them all)
        text = self.source_line
        if text is None or len(text) <= _LINE_SHOWN:
            return
        start = max(0, min(self.column - 1 - _LINE_SHOWN // 4, len(text) - _LINE_SHOWN))
        head = "..." if start else ""
        window = head + text[start : start + _LINE_SHOWN] + ("..." if start + _LINE_SHOWN < len(text) else "")
        object.__setattr__(self, "source_line", window)
        object.__setattr__(self, "column", max(self.column - start + len(head), 1) if self.column else 0)
        object.__setattr__(self, "span", max(1, min(self.span, _LINE_SHOWN)))

    @property
    def location(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file

    def one_line(self) -> str:
        """``file:line:col: error: message (rule `id`)``, on one line."""
        rule = f" (rule `{self.rule}`)" if self.rule else ""
        return f"{self.location}: {self.level}: {self.message}{rule}"

    def render(self) -> str:
        """The one-line form, then the source line with a caret span and the help text."""
        out = [self.one_line()]
        if self.source_line is not None and self.line:
            gutter = f"{self.line:>5} | "
            out.append(gutter + self.source_line.rstrip("\n"))
            pad = " " * (len(gutter) - 2) + "| " + " " * max(self.column - 1, 0)
            out.append(pad + "^" + "~" * max(self.span - 1, 0))
        if self.help:
            out.append(f"  = help: {self.help}")
        return "\n".join(out)


class KernelPolicyError(Exception):
    """Base of every error kernelpolicy raises on bad input."""

    def one_line(self) -> str:
        """The error as one line for a terminal: ``error: ...``."""
        return f"error: {self}"


class PolicyError(KernelPolicyError, ValueError):
    """Rule or policy files that do not load: every problem found, not only the first."""

    def __init__(self, diagnostics: Sequence[Diagnostic] | Diagnostic | str) -> None:
        # a message or one diagnostic is accepted too (an API caller's `PolicyError("...")`)
        if not isinstance(diagnostics, (str, Diagnostic, list, tuple)):
            check_arg("PolicyError", "diagnostics", diagnostics, str, Diagnostic, list, tuple)
        items = [diagnostics] if isinstance(diagnostics, (str, Diagnostic)) else list(diagnostics)
        for item in items:
            if not isinstance(item, (str, Diagnostic)):
                raise TypeError(
                    "kernelpolicy.PolicyError: `diagnostics` must be a message, a Diagnostic or a list of them,"
                    f" not a list holding {type(item).__name__}"
                )
        found = [d if isinstance(d, Diagnostic) else Diagnostic(str(d)) for d in items] or [
            Diagnostic("invalid policy")
        ]
        self.diagnostics: tuple[Diagnostic, ...] = tuple(sorted(found, key=lambda d: (d.file, d.line, d.column)))
        super().__init__(self.diagnostics)

    def one_line(self) -> str:
        return str(self)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.level == "error")

    def __str__(self) -> str:
        first = (self.errors or self.diagnostics)[0].one_line()
        more = len(self.errors) - 1
        if more > 0:
            first += f" (and {more} more: run `kernelpolicy check`)"
        return first

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


class UsageError(KernelPolicyError, ValueError):
    """A command line or call that cannot be carried out as given."""

    def __init__(self, message: str, help: str | None = None) -> None:
        check_arg("UsageError", "message", message, str)
        check_arg("UsageError", "help", help, str, type(None))
        self.message = message
        self.help = help
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message} ({self.help})" if self.help else self.message


class FactError(KernelPolicyError, ValueError):
    """A fact key that does not exist or a value that does not fit its key."""

    def __init__(self, key: str, message: str, *, help: str | None = None) -> None:
        check_arg("FactError", "key", key, str)
        check_arg("FactError", "message", message, str)
        check_arg("FactError", "help", help, str, type(None))
        self.key = key
        self.message = message
        self.help = help
        super().__init__(key, message)

    def __str__(self) -> str:
        text = f"fact `{self.key}`: {self.message}"
        return f"{text} ({self.help})" if self.help else text


class UnknownGPUError(KernelPolicyError, ValueError):
    """A GPU spec that names no known compute capability or product."""

    def __init__(self, spec: str, suggestions: Iterable[str] = (), *, reason: str | None = None) -> None:
        check_arg("UnknownGPUError", "spec", spec, str)
        check_strs("UnknownGPUError", "suggestions", suggestions)
        check_arg("UnknownGPUError", "reason", reason, str, type(None))
        self.spec = spec
        self.suggestions = tuple(suggestions)
        self.reason = reason
        super().__init__(spec)

    def __str__(self) -> str:
        if self.reason:
            return f"unknown GPU `{self.spec}`: {self.reason}"
        text = f"unknown GPU `{self.spec}`: expected a compute capability such as `sm121` or `12.1`, or a product name"
        if self.suggestions:
            text += f" (did you mean `{self.suggestions[0]}`?)"
        return text


class UnknownModelError(KernelPolicyError, ValueError):
    """A model that is neither a local config.json nor in the shipped catalog."""

    def __init__(self, model: str, reason: str, suggestions: Iterable[str] = ()) -> None:
        check_arg("UnknownModelError", "model", model, str)
        check_arg("UnknownModelError", "reason", reason, str)
        check_strs("UnknownModelError", "suggestions", suggestions)
        self.model = model
        self.reason = reason
        self.suggestions = tuple(suggestions)
        super().__init__(model, reason)

    def __str__(self) -> str:
        text = f"unknown model `{self.model}`: {self.reason}"
        if self.suggestions:
            text += f" (did you mean `{self.suggestions[0]}`?)"
        return text


def did_you_mean(word: str, choices: Iterable[str], n: int = 1) -> list[str]:
    """The closest *choices* to a misspelt *word*."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)
