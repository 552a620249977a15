"""Shell completion for bash, zsh and fish (``kernelpolicy completion SHELL``).

The script is generated from the command line's own parser, so every subcommand and option is
completed as it is defined, with nothing added to the start-up of ``kernelpolicy`` itself
(no import hook; nothing runs until TAB is pressed). Values come from
``kernelpolicy completion --list KIND`` at TAB time, so they follow the installed rules:

``gpus``      catalog product names and aliases, and ``sm`` values;
``models``    catalog model ids and the models in the local Hugging Face cache;
``backends``  backend ids (``moe-backends``, ``dense-backends``: one path's);
``facts``     fact keys (``KEY=``); ``rules`` rule ids;
``engines``   ``vllm==X.Y.Z`` and ``sglang==X.Y.Z`` of the scanned releases;
``quantizations`` vLLM ``--quantization`` methods; ``sizes`` parallel sizes (``-tp``, ``-dp``).

Values are data, never shell code: the bash (and zsh) script reads them line by line, keeps
those that start with the typed word (a plain string comparison) and inserts each quoted
(``printf %q``: ``RTX\\ 5090``), so no value is expanded by the shell. Model ids from the
Hugging Face cache are listed only when their folder name is a repo id (letters, digits,
``-``, ``_``, ``.``): a folder named ``models--a--b$(touch x)`` is not a model.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["KINDS", "OPTION_VALUES", "SHELLS", "hf_cache_models", "is_repo_id", "script", "values"]

SHELLS: Final = ("bash", "zsh", "fish")
KINDS: Final = (
    "gpus",
    "models",
    "backends",
    "moe-backends",
    "dense-backends",
    "facts",
    "rules",
    "schemas",
    "engines",
    "quantizations",
    "sizes",
)
#: Which values each option takes (options not named here complete files or nothing).
OPTION_VALUES: Final[Mapping[str, str]] = {
    "--gpu": "gpus",
    "--model": "models",
    "--moe-backend": "moe-backends",
    "--linear-backend": "dense-backends",
    "--fact": "facts",
    "--allow": "rules",
    "--engine": "engines",
    "--quantization": "quantizations",
    "-q": "quantizations",
    "--tensor-parallel-size": "sizes",
    "-tp": "sizes",
    "--data-parallel-size": "sizes",
    "-dp": "sizes",
}
#: one part of a Hugging Face repo id (the hub's own rule: letters, digits, ``-``, ``_``, ``.``;
#: no ``--`` or ``..``; at most 96 characters)
_REPO_PART: Final = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HUB_DIR: Final = re.compile(rf"models--(?:({_REPO_PART})--)?({_REPO_PART})\Z", re.ASCII)
_PARALLEL_SIZES: Final = ("1", "2", "4", "8", "16")


def is_repo_id(text: str) -> bool:
    """*text* is a Hugging Face repo id (``org/name`` or ``name``) and nothing else."""
    parts = text.split("/")
    return (
        0 < len(parts) <= 2
        and all(re.fullmatch(_REPO_PART, p, re.ASCII) for p in parts)
        and not any("--" in p or ".." in p for p in parts)
    )


def hf_cache_models(env: Mapping[str, str] | None = None) -> list[str]:
    """Model ids in the local Hugging Face hub cache (``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or
    ``~/.cache/huggingface/hub``), from its ``models--ORG--NAME`` folder names."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        hub = Path(env["HF_HUB_CACHE"])
    elif env.get("HF_HOME"):
        hub = Path(env["HF_HOME"]) / "hub"
    else:
        hub = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface" / "hub"
    try:
        names = sorted(p.name for p in hub.iterdir() if p.is_dir())
    except OSError:
        return []
    ids = (f"{m.group(1)}/{m.group(2)}" if m.group(1) else m.group(2) for n in names if (m := _HUB_DIR.match(n)))
    return [i for i in ids if is_repo_id(i)]


def values(kind: str) -> list[str]:
    """The completions of one kind of value (see the module docstring)."""
    from ..facts.keys import BACKENDS, FACT_KEYS, GPU_SMS

    if kind == "backends":
        return sorted({b for per_path in BACKENDS.values() for b in per_path})
    if kind in ("moe-backends", "dense-backends"):
        return sorted(BACKENDS["moe" if kind == "moe-backends" else "dense"])
    if kind == "facts":
        return [f"{k}=" for k in sorted(FACT_KEYS)]
    if kind == "schemas":
        from .schemas import SCHEMA_NAMES

        return list(SCHEMA_NAMES)
    if kind == "sizes":
        return list(_PARALLEL_SIZES)
    if kind == "engines":
        from ..releases import specs

        return [f"{engine.name}=={v}" for engine in specs() for v in engine.releases()]
    if kind == "quantizations":
        from ..deployment.serve import quantization_methods

        return list(quantization_methods())
    from ..dsl.loader import load_policy

    policy = load_policy(environ=False)
    if kind == "gpus":
        names = [n for g in policy.gpus for n in (g.name, *g.aliases)]
        return list(dict.fromkeys([*GPU_SMS, *names, "auto"]))
    if kind == "models":
        return list(dict.fromkeys([*(m.id for m in policy.models if is_repo_id(m.id)), *hf_cache_models()]))
    if kind == "rules":
        return sorted(policy.by_id)
    raise ValueError(f"no completion kind `{kind}` (one of: {', '.join(KINDS)})")


# ----------------------------------------------------------------------------- the scripts


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, tuple[list[str], str]]:
    """``"vllm audit"`` -> (its options, its help), for every (sub)command of *parser*."""
    out: dict[str, tuple[list[str], str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                key = f"{prefix} {name}".strip()
                opts = [
                    o
                    for a in sub._actions
                    if a.help != argparse.SUPPRESS
                    for o in a.option_strings
                    if o.startswith("--") or len(o) > 2  # -tp, -dp, -ep: vLLM's spellings
                ]
                out[key] = (opts, helps.get(name, ""))
                out.update(_commands(sub, key))
    return out


def _positional_values(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Commands whose positional argument has fixed choices (``schema NAME``, ``completion SHELL``)."""
    out: dict[str, list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for a in sub._actions:
                    if not a.option_strings and a.choices and not isinstance(a, argparse._SubParsersAction):
                        out[name] = [str(c) for c in a.choices]
    return out


def _option_choices(parser: argparse.ArgumentParser, prefix: str = "") -> dict[tuple[str, str], list[str]]:
    """(command, option) -> the option's fixed choices (``check --format``: text, json, ...)."""
    out: dict[tuple[str, str], list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                key = f"{prefix} {name}".strip()
                for a in sub._actions:
                    if a.option_strings and a.choices and a.help != argparse.SUPPRESS:
                        for o in a.option_strings:
                            out[(key, o)] = [str(c) for c in a.choices]
                out.update(_option_choices(sub, key))
    return out


def _serve_commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """The commands that take a launch line after ``--`` (``explain``, ``bench``)."""
    out: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                key = f"{prefix} {name}".strip()
                if any(not a.option_strings and str(a.metavar or "").startswith("-- ") for a in sub._actions):
                    out.append(key)
                out += _serve_commands(sub, key)
    return out


def _line_flags() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The engines' launch-line flags that take a known kind of value (``--tp-size``: sizes) and
    those with fixed values (SGLang's ``--moe-runner-backend``: the newest release's choices)."""
    from ..releases import specs

    kinds: dict[str, str] = {}
    fixed: dict[str, list[str]] = {}
    for engine in specs():
        newest = engine.records()[engine.releases()[-1]] if engine.releases() else {}
        accepted = newest.get("flags") or {}
        for flag in engine.flags:
            if flag.store_true:
                continue
            for name in flag.names:
                if name in OPTION_VALUES:
                    kinds[name] = OPTION_VALUES[name]
                elif flag.dest.endswith("_size"):
                    kinds[name] = "sizes"
                elif flag.dest == "quantization":
                    kinds[name] = "quantizations"
                elif accepted.get(flag.names[0]):
                    fixed[name] = [str(v) for v in accepted[flag.names[0]]]
    return kinds, fixed


def _option_kinds(parser: argparse.ArgumentParser, prefix: str = "") -> dict[tuple[str, str], str]:
    """(command, option) -> the kind of value it takes (:data:`OPTION_VALUES`), for options that
    take a value in that command (``test -q`` is a switch, ``explain -q`` a method)."""
    out: dict[tuple[str, str], str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                key = f"{prefix} {name}".strip()
                for a in sub._actions:
                    if a.nargs == 0 or a.help == argparse.SUPPRESS:
                        continue
                    for o in a.option_strings:
                        if o in OPTION_VALUES:
                            out[(key, o)] = OPTION_VALUES[o]
                out.update(_option_kinds(sub, key))
    return out


def _with_line_flags(
    parser: argparse.ArgumentParser,
) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], list[str]]]:
    """:func:`_option_kinds` and :func:`_option_choices`, with the engines' launch-line flags
    for every command that takes a launch line (their own options win)."""
    kinds, choices = _option_kinds(parser), _option_choices(parser)
    line_kinds, line_fixed = _line_flags()
    for command in _serve_commands(parser):
        for name, kind in line_kinds.items():
            kinds.setdefault((command, name), kind)
        for name, values_ in line_fixed.items():
            if (command, name) not in kinds:
                choices.setdefault((command, name), values_)
    return kinds, choices


def _bash(parser: argparse.ArgumentParser) -> str:
    cmds = _commands(parser)
    kinds, choices = _with_line_flags(parser)
    top = " ".join(k for k in cmds if " " not in k)
    cases = []
    for key, (opts, _) in cmds.items():
        subs = " ".join(k.split()[-1] for k in cmds if k.startswith(key + " ") and k.count(" ") == key.count(" ") + 1)
        cases.append(f"        {shlex.quote(key)}) opts={shlex.quote(' '.join(opts))}; subs={shlex.quote(subs)} ;;")
    prev = "\n".join(
        f"        {shlex.quote(c + '|' + o)}) _kernelpolicy_values {k}; return ;;" for (c, o), k in kinds.items()
    )
    fixed = "\n".join(
        f'        {shlex.quote(c)}) [[ -z "$pos" ]] && fixed={shlex.quote(" ".join(v))} ;;'
        for c, v in _positional_values(parser).items()
    )
    chosen = "\n".join(
        f'        {shlex.quote(c + "|" + o)}) COMPREPLY=($(compgen -W {shlex.quote(" ".join(v))} -- "$cur")); return ;;'
        for (c, o), v in choices.items()
    )
    return f"""# bash completion for kernelpolicy (generated by `kernelpolicy completion bash`)
_kernelpolicy_values() {{
    # values are data: compared as strings and inserted quoted, never expanded by the shell
    local v q c="${{cur//\\\\/}}"
    c=${{c#[\\\"\\\']}}
    COMPREPLY=()
    while IFS= read -r v; do
        [[ "$v" == "$c"* ]] || continue
        printf -v q '%q' "$v"
        COMPREPLY+=("$q")
    done < <(kernelpolicy completion --list "$1" 2>/dev/null)
    [[ "$1" == facts ]] && compopt -o nospace 2>/dev/null
    return 0
}}
_kernelpolicy() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    # `--explain=no<TAB>`: bash splits at `=`; the option is the word before it
    [[ "$cur" == "=" ]] && {{ prev="${{COMP_WORDS[COMP_CWORD-1]}}"; cur=""; }}
    [[ "$prev" == "=" ]] && prev="${{COMP_WORDS[COMP_CWORD-2]}}"
    local cmd="" pos="" opts="" subs={shlex.quote(top)} fixed="" i w
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        [[ "$w" == -* ]] && continue
        case " $subs " in
            *" $w "*) cmd="${{cmd:+$cmd }}$w"
                case "$cmd" in
{chr(10).join(cases)}
                    *) subs="" ;;
                esac ;;
            *) pos="$w" ;;
        esac
    done
    case "$cmd|$prev" in
{prev}
{chosen}
    esac
    case "$cmd" in
{fixed}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
    elif [[ -n "$subs" ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    elif [[ -n "$fixed" ]]; then
        COMPREPLY=($(compgen -W "$fixed" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o default -F _kernelpolicy kernelpolicy
"""


def _fish(parser: argparse.ArgumentParser) -> str:
    cmds = _commands(parser)
    kinds, choices = _with_line_flags(parser)
    lines = [
        "# fish completion for kernelpolicy (generated by `kernelpolicy completion fish`)",
        "complete -c kernelpolicy -f",
    ]
    for key, (opts, help_) in cmds.items():
        words = key.split()
        if len(words) == 1:
            cond = "__fish_use_subcommand"
        else:
            siblings = " ".join(k.split()[-1] for k in cmds if k.startswith(words[0] + " "))
            cond = f"__fish_seen_subcommand_from {words[0]}; and not __fish_seen_subcommand_from {siblings}"
        lines.append(
            f"complete -c kernelpolicy -n {shlex.quote(cond)} -a {shlex.quote(words[-1])} -d {shlex.quote(help_[:60])}"
        )
        seen = f"__fish_seen_subcommand_from {words[-1]}"
        shorts = [o for (c, o) in kinds if c == key and len(o) == 2 and o not in opts]
        for o in [*opts, *shorts]:
            kind = kinds.get((key, o))
            extra = f" -x -a {shlex.quote(f'(kernelpolicy completion --list {kind} 2>/dev/null)')}" if kind else ""
            if (key, o) in choices:
                extra = f" -x -a {shlex.quote(' '.join(choices[(key, o)]))}"
            flag = f"-l {o[2:]}" if o.startswith("--") else f"-o {o[1:]}" if len(o) > 2 else f"-s {o[1:]}"
            lines.append(f"complete -c kernelpolicy -n {shlex.quote(seen)} {flag}{extra}")
    for cmd, fixed in _positional_values(parser).items():
        lines.append(
            f"complete -c kernelpolicy -n {shlex.quote('__fish_seen_subcommand_from ' + cmd)}"
            f" -a {shlex.quote(' '.join(fixed))}"
        )
    lines.append("complete -c kernelpolicy -n " + shlex.quote("not __fish_use_subcommand") + " -F")
    return "\n".join(lines) + "\n"


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for *shell*, from *parser* (the ``kernelpolicy`` parser)."""
    if shell == "bash":
        return _bash(parser)
    if shell == "zsh":
        return (
            "# zsh completion for kernelpolicy (generated by `kernelpolicy completion zsh`): zsh runs the\n"
            "# bash completion through bashcompinit. In ~/.zshrc: source <(kernelpolicy completion zsh)\n"
            "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + _bash(parser)
        )
    if shell == "fish":
        return _fish(parser)
    raise ValueError(f"no completion for shell `{shell}` (one of: {', '.join(SHELLS)})")
