"""The human rendering of a decision: per path, what was chosen and why every other candidate
was not, the assumptions it rests on, and the engine settings that reproduce it."""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..facts.keys import DECIDED_PATHS
from ..releases import DEFAULT, spec, specs

if TYPE_CHECKING:
    from ..decision import Candidate, Decision, PathDecision
    from ..deployment.serve import LaunchLine
    from ..facts import Facts
    from ..policy import Policy

__all__ = ["NOTES_WIDTH", "render", "render_notes"]

#: The columns ``explain --explain=notes`` (the default) fits in.
NOTES_WIDTH = 80

_MARK = {"chosen": ">", "rejected": "x", "refused": "!", "viable": " "}


def _where(rule: str, policy: Policy | None) -> str | None:
    from ..decision import rule_origin

    return None if policy is None else rule_origin(policy, rule)


def _plugin(policy: Policy | None, engine: str) -> str | None:
    """How to enable *engine*'s plugin, its install line as it works from where this
    kernelpolicy was installed (the tables write it as from the package index)."""
    from .._install import with_install_commands

    plugin = _plugin_text(policy, engine)
    return with_install_commands(plugin) if plugin else None


def _plugin_text(policy: Policy | None, engine: str) -> str | None:
    return policy.engines[engine].plugin if policy is not None and engine in policy.engines else None


def _plugin_notes(text: str) -> list[str]:
    """*text* (an engine's ``plugin``) in :data:`NOTES_WIDTH` columns: its install command whole
    (continued with `` \\``, never broken inside a word), the prose around it wrapped."""
    from .._install import split_install

    before, command, comment, after = split_install(text)
    if not command:
        return _wrap(text, "  ", "    ")
    out = _wrap(before.strip(), "  ", "    ") if before.strip() else []
    out += _command_lines(command.split(" "))
    if comment:
        out += _wrap(comment, "    # ", "    # ")
    if after.strip():
        out += _wrap(after.strip(), "    ", "    ")
    return out


def _candidate_lines(c: Candidate, policy: Policy | None, width: int) -> list[str]:
    mark = _MARK[c.verdict]
    head = f"  {mark} {c.backend:<{width}}  "
    pad = " " * len(head)
    if c.verdict == "chosen":
        text = "chosen"
        if c.overridden:
            text += " by an explicit choice, overriding " + ", ".join(f"`{r}`" for r in c.overridden)
        if c.assumptions:
            text += " (assuming " + ", ".join(f"`{a}`" for a in c.assumptions) + ")"
        return [head + text]
    if c.verdict == "viable":
        return []
    rule = c.rules[0] if c.rules else "?"
    sev = f" ({c.severity})" if c.severity and c.severity != "catalog" else ""
    verb = "refused: " if c.verdict == "refused" else ""
    lines = [head + f"{verb}{rule}{sev}: {c.reason}"]
    extra = []
    if len(c.rules) > 1:
        extra.append("also " + ", ".join(c.rules[1:]))
    if c.assumptions:
        extra.append("applied because " + ", ".join(f"`{a}`" for a in c.assumptions) + " is unknown")
    if c.refs:
        extra.append("refs " + ", ".join(c.refs))
    where = _where(rule, policy)
    if where:
        extra.append(where)
    if extra:
        lines.append(pad + "; ".join(extra))
    return lines


def _dashed(token: str) -> str:
    name, eq, value = token.partition("=")
    return (name.replace("_", "-") if name.startswith("--") else name) + eq + value


def _with_flag(words: list[str], flag: str, value: str) -> list[str]:
    """*words* with *flag* set to *value*: each place it is given (``--flag V``, ``--flag=V``,
    ``--flag_name V``) takes the new value, else it is added at the end."""
    out: list[str] = []
    found = False
    i = 0
    while i < len(words):
        name, eq, _ = _dashed(words[i]).partition("=")
        if name != flag:
            out.append(words[i])
            i += 1
            continue
        found = True
        if eq:
            out.append(f"{words[i].partition('=')[0]}={value}")
            i += 1
        else:
            out += [words[i], value]
            i += 2 if i + 1 < len(words) and not words[i + 1].startswith("-") else 1
    return out if found else [*out, flag, value]


def _launch(
    flags: Mapping[str, Any], engine: str, launch: str, model: str | None, line: LaunchLine | None
) -> tuple[list[str], bool]:
    """The launch line that gets the decision without the plugin, as shell words, and whether it
    is a whole line (else: the settings to add to the user's own line, which is another engine's).

    With the user's line (a serve line after ``--``, or vLLM flags given as options) of this
    engine, it is that line with the decision's variables and flags set, nothing of it dropped."""
    if line is None or line.engine == engine:
        env = {**(dict(line.env) if line is not None else {}), **flags["env"]}
        if line is not None:
            words = list(line.rest)
            for i in range(0, len(flags["args"]) - 1, 2):
                words = _with_flag(words, flags["args"][i], flags["args"][i + 1])
            command = list(line.command)
        else:
            words = [model or "MODEL", *flags["args"]]
            command = launch.split()
        return [*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *command, *map(shlex.quote, words)], True
    return [*(f"{k}={shlex.quote(v)}" for k, v in flags["env"].items()), *map(shlex.quote, flags["args"])], False


def render(
    decision: Decision, policy: Policy | None = None, *, model: str | None = None, line: LaunchLine | None = None
) -> str:
    """The explain text for *decision* (rule places are shown when *policy* is given; *line*:
    the user's launch line, printed back with the decision's settings)."""
    out = [*_header(decision.facts, model), ""]
    for name in DECIDED_PATHS:
        out += _path_lines(decision.paths[name], policy)
    out += _warmup_lines(decision.paths["warmup"])
    if decision.assumptions:
        out += ["", "assumed (facts not known; settle them with --fact KEY=VALUE):"]
        out += [f"  - {a}" for a in decision.assumptions]
    if decision.warnings:
        out += ["", "warnings:"]
        out += [f"  - {w_}" for w_ in decision.warnings]
    for engine in specs():
        flags = decision.engine.get(engine.name)
        if flags is None:
            continue
        out += _engine_lines(flags, engine.title, engine.launch, model, line)
        plugin = _plugin(policy, engine.name)
        if plugin:
            out.append(f"{engine.plugin_does}:  {plugin}")
    out += ["", f"fingerprint {decision.fingerprint}"]
    return "\n".join(out)


def _header(f: Facts, model: str | None) -> list[str]:
    gpu = [str(f.get("gpu.sm", "?"))]
    extras = [
        str(x)
        for x in (
            f.get("gpu.name"),
            f.get("gpu.family") and f"family {f.get('gpu.family')}",
            f.get("host.machine"),
        )
        if x
    ]
    if extras:
        gpu.append("(" + ", ".join(extras) + ")")
    desc = [str(f.get("model.type", "?")), str(f.get("quant.scheme", "?"))]
    if f.get("quant.moe_scheme") and f.get("quant.moe_scheme") != f.get("quant.scheme"):
        desc.append(f"experts {f.get('quant.moe_scheme')}")
    if f.get("quant.block"):
        desc.append("block " + "x".join(map(str, f.get("quant.block"))))
    if f.get("quant.scale_fmt"):
        desc.append(f"scales {f.get('quant.scale_fmt')}")
    if f.get("model.num_experts"):
        desc.append(f"{f.get('model.num_experts')} experts")
    return ["gpu     " + " ".join(gpu), "model   " + (f"{model}: " if model else "") + ", ".join(desc)]


def _prefer_lines(p: PathDecision, policy: Policy | None, *, notes: bool) -> list[str]:
    """``^`` lines: each ``prefer`` rule that reordered *p*'s candidates, what it put first and
    why (none where an explicit choice decided the path)."""
    if not p.preferred_by or (p.explicit and not p.explicit_refused):
        return []
    out: list[str] = []
    for rid in p.preferred_by:
        r = policy.by_id.get(rid) if policy is not None else None
        if r is None:
            text = f"^ {rid} (prefer)"
        else:
            front = ", ".join(r.backends)
            text = f"^ {front} first: {rid} (prefer)" + (f": {r.because}" if r.because else "")
        if notes:
            out += _wrap(text, "  ", "      ")
            continue
        out.append("  " + text)
        where = _where(rid, policy)
        if where or (r is not None and r.refs):
            extra = [f"refs {', '.join(r.refs)}"] if r is not None and r.refs else []
            out.append("      " + "; ".join([*extra, *([where] if where else [])]))
    return out


def _path_lines(p: PathDecision, policy: Policy | None) -> list[str]:
    name = p.path
    if not p.applicable:
        return [f"{name:<7} n/a: {p.reason}"]
    head = f"{name:<7} {p.backend or 'NO VALID BACKEND'}"
    if p.explicit and p.explicit_refused:
        head += f"   explicit `{p.explicit}` REFUSED (" + ", ".join(p.rules or ("?",)) + ")"
    elif p.explicit:
        head += f"   explicit: `{p.explicit}`"
    elif p.rules:
        head += "   decided by " + ", ".join(p.rules)
    out = [head, *_prefer_lines(p, policy, notes=False)]
    if p.backend is None and p.rule and len(p.candidates) > 1 and all(c.rules == (p.rule,) for c in p.candidates):
        # one entry took every backend out (an engine that refuses the deployment): say it once
        out.append("  x every backend: " + ", ".join(c.backend for c in p.candidates))
        if p.candidates[0].refs:
            out.append("    refs " + ", ".join(p.candidates[0].refs))
        return [*out, f"  = {p.reason}"] if p.reason else out
    width = max(len(c.backend) for c in p.candidates)
    after = False
    for c in p.candidates:
        lines = _candidate_lines(c, policy, width)
        out += lines[:1] if after else lines  # below the chosen one: the verdict alone
        after = after or c.verdict == "chosen"
    if p.backend is None and p.reason:
        out.append(f"  = {p.reason}")
    viable = [c.backend for c in p.candidates if c.verdict == "viable"]
    if viable:
        out.append(f"    {'':<{width}}  also valid, lower priority: " + ", ".join(viable))
    return out


def _warmup_lines(w: PathDecision) -> list[str]:
    out = ["warmup  " + ", ".join(w.kernels) if w.kernels else "warmup  nothing to JIT-warm"]
    out += [f"  x {c.backend}: {c.reason}" for c in w.candidates if c.verdict != "chosen"]
    return out


def _engine_lines(
    flags: Mapping[str, Any], engine: str, launch: str, model: str | None, line: LaunchLine | None
) -> list[str]:
    words, whole = _launch(flags, engine.lower(), launch, model, line)
    label = "where flags can:" if whole else "add these to its launch line, where flags can:"
    return [
        "",
        f"on {engine} without the plugin, {label}",
        f"  {' '.join(words)}" if words else "  (nothing to add)",
        *(f"  ({n})" for n in flags.get("notes", ())),
    ]


# -- explain --explain=notes: the chosen backends and the rules that decided them ----------------


def _wrap(text: str, first: str, rest: str, width: int = NOTES_WIDTH) -> list[str]:
    """*text* wrapped to *width* columns, *first* before its first line and *rest* before the
    others (words longer than a line stay whole)."""
    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    ) or [first.rstrip()]


def _command_lines(words: list[str], width: int = NOTES_WIDTH) -> list[str]:
    """A shell command over lines of at most *width* columns, continued with `` \\``."""
    lines: list[str] = []
    line = " "
    for word in words:
        if len(line) + 1 + len(word) + 2 > width and line.strip():
            lines.append(line + " \\")
            line = "   "
        line += " " + word
    return [*lines, line]


def _notes_path(p: PathDecision, shown: set[str], policy: Policy | None = None) -> list[str]:
    name = p.path
    if not p.applicable:
        return _wrap(f"n/a: {p.reason}", f"{name:<7} ", " " * 8)
    head = f"{name:<7} {p.backend or 'NO VALID BACKEND'}"
    if p.explicit and p.explicit_refused:
        head += f"   (`{p.explicit}` REFUSED)"
    elif p.explicit:
        head += f"   (explicit: `{p.explicit}`)"
    out = [head, *_prefer_lines(p, policy, notes=True)]
    above: list[Candidate] = []
    for c in p.candidates:
        if c.verdict == "chosen":
            break
        above.append(c)
    for rule in p.rules:
        hit = [c for c in above if rule in c.rules] or [c for c in p.candidates if rule in c.rules]
        if not hit:
            continue
        first = hit[0]
        mark = "!" if any(c.verdict == "refused" for c in hit) else "x"
        sev = f" ({first.severity})" if first.severity and first.severity != "catalog" else ""
        backends = ", ".join(c.backend for c in hit)
        if len(hit) > 1 and len(hit) == len(p.candidates):
            backends = f"every backend ({len(hit)})"
        why = "as above" if rule in shown else first.reason
        if p.backend is None and p.reason and first.reason and first.reason in p.reason:
            why = "as below"  # the path's reason says it
        shown.add(rule)
        out += _wrap(f"{mark} {backends}: {rule}{sev}: {why}", "  ", "      ")
    if p.backend is None and p.reason:
        out += _wrap(p.reason, "  = ", "    ")
    return out


def render_notes(
    decision: Decision, policy: Policy | None = None, *, model: str | None = None, line: LaunchLine | None = None
) -> str:
    """The explain text at its middle level (``--explain=notes``, the default): each path's
    backend and the rules that decided it, the assumptions, the warnings and the deployment's
    engine line, within :data:`NOTES_WIDTH` columns; :func:`render` has every candidate."""
    gpu, desc = _header(decision.facts, model)
    out = [*_wrap(gpu[8:], "gpu     ", " " * 8), *_wrap(desc[8:], "model   ", " " * 8), ""]
    shown: set[str] = set()
    for name in DECIDED_PATHS:
        out += _notes_path(decision.paths[name], shown, policy)
    w = decision.paths["warmup"]
    out += _wrap(", ".join(w.kernels) if w.kernels else "nothing to JIT-warm", "warmup  ", " " * 8)
    if decision.assumptions:
        out += ["", "assumed (settle with --fact KEY=VALUE):"]
        for a in decision.assumptions:
            out += _wrap(f"{a.effect} (rule `{a.rule}`)", "  - ", "    ")
    if decision.warnings:
        out += ["", "warnings:"]
        for warning in decision.warnings:
            out += _wrap(warning, "  - ", "    ")
    engine = spec(str(decision.facts.get("deploy.engine") or DEFAULT))
    flags = decision.engine.get(engine.name)
    if flags is not None:
        words, whole = _launch(flags, engine.name, engine.launch, model, line)
        where = "where flags can:" if whole else "add these to its launch line, where flags can:"
        out += ["", f"{engine.title} without the plugin, {where}", *_command_lines(words)]
        plugin = _plugin_text(policy, engine.name)
        if plugin:
            out += ["with the plugin, every path follows this decision:", *_plugin_notes(plugin)]
    out += [
        "",
        f"fingerprint {decision.fingerprint[:19]}  (--json: all of it)",
        "every candidate, its refs and rule places: --explain=full",
    ]
    return "\n".join(out)
