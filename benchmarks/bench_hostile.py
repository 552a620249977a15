"""Print the scale figures of hostile input (issue 26, N16) and, per class of hostile round four
(issue 38), the inputs tried with the worst time and memory; no assertions: figures, not tests.

    python benchmarks/bench_hostile.py [--round-four [--jobs N] [--only WORDS]]

- a serve line of N ignored ``--foo 1`` pairs, parsed (``_parse_serve``) and its warning's length;
- ``kernelpolicy fmt`` and ``fmt --check`` of a 1,500-rule file (fmt lays out at most 20,000 values);
- ``kernelpolicy explain`` with a 7,000-rule operator policy, the rule cache off.

tests/hostile/test_scale.py bounds the work (flags per argparse call, finding comparisons, layout
passes); this prints the time it takes on this machine.

``--round-four`` generates the inputs of the 15 classes of the round-four report (variables x
values, YAML constructs x every command that reads YAML, locales x file names, every path option
x stdin, ...: over a thousand) and runs each as a user would: a new process in its own folder
with its own cache folder, killed after 60 s of wall time. Per class it prints the inputs, the exit statuses
seen, how many kept the contract, the worst wall time, the worst CPU time and the worst peak
memory of the child (``wait4``'s own rusage), then every input that broke the contract: a status
docs/design.md does not document, a traceback, a refusal of more than one line on stderr, over
5 s of CPU or 1 GB, a file named ``PWN`` made by something planted (a venv's python, a YAML tag,
a shell expansion), or a file that was there before lost or changed (an output the command failed
to write included). tests/hostile/test_round_four_bench.py runs a sample of each class through
the same generators.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared helpers, imported from tests too
from _figures import Recorder, add_record_option

from kernelpolicy.deployment.serve import _parse_serve, ignored_note


def _cli(*argv: str) -> float:
    env = {**os.environ, "KERNELPOLICY_NO_CACHE": "1", "HF_HUB_OFFLINE": "1"}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kernelpolicy", *argv], check=False, capture_output=True, env=env)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round-four", action="store_true", help="only the round-four classes")
    ap.add_argument("--jobs", type=int, default=2, help="inputs run at once (default 2)")
    ap.add_argument("--only", metavar="WORDS", help="only the classes whose name holds WORDS")
    ap.add_argument("--label", metavar="WORDS", help="only the inputs whose label holds WORDS")
    add_record_option(ap)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(
        f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {load:.1f}"
    )
    if args.round_four:
        sys.exit(1 if round_four(args.jobs, args.only, args.label) else 0)
    fig = Recorder("benchmarks/bench_hostile.py", record=args.record)
    scale(fig)
    fig.save()


def scale(fig: Recorder) -> None:
    for pairs in (4_000, 16_000, 50_000):
        tokens = ["vllm", "serve", "m", *["--foo", "1"] * pairs]
        t = time.perf_counter()
        serve = _parse_serve(tokens)
        took = time.perf_counter() - t
        fig.add(f"hostile.serve_{pairs}", took, "s", f"serve line, {pairs} ignored pairs")
        print(f"serve line, {pairs:>6} ignored pairs: {took:6.2f} s, warning {len(ignored_note(serve.ignored))} chars")
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "r3000.yaml"
        rules.write_text(
            "rules:\n"
            + "".join(
                f"  - id: op-r{i}\n    when: {{gpu.sm: sm90, model.type: m{i}}}\n    deny: marlin\n"
                f"    severity: perf\n    because: reason {i}\n    refs: [vllm#{i}]\n"
                for i in range(1_500)
            ),
            encoding="utf-8",
        )
        took = fig.add("hostile.fmt_1500", _cli("fmt", str(rules)), "s", "fmt, 1,500 rules")
        print(f"fmt, 1,500 rules: {took:6.2f} s")
        print(f"fmt --check, 1,500 rules (laid out): {_cli('fmt', '--check', str(rules)):6.2f} s")
        policy = Path(tmp) / "r7000.yaml"
        policy.write_text(
            "rules:\n"
            + "".join(
                f"  - {{id: r{i}, when: {{model.type: m{i}}}, deny: marlin, severity: perf, because: b, refs: [x]}}\n"
                for i in range(7_000)
            ),
            encoding="utf-8",
        )
        seed = ("explain", "--gpu", "H100", "--model", "deepseek-ai/DeepSeek-V3", "--no-env")
        took = fig.add("hostile.policy_7000", _cli(*seed, "--policy", str(policy)), "s", "explain, 7,000-rule policy")
        print(f"explain, 7,000-rule policy, uncached: {took:6.2f} s")


# -- round four: the inputs of each class, generated --------------------------------------------

#: The exit statuses docs/design.md documents (0 done, 1 findings, 2 bad input, 3 no backend,
#: 4 a node without a decision, 5 an explicit choice refused).
DOCUMENTED: Final = (0, 1, 2, 3, 4, 5)
#: The contract of issue 38: every input ends in under 5 s of CPU and 1 GB of memory.
LIMIT_CPU_S: Final = 5.0
LIMIT_MB: Final = 1024.0
#: An input still running after this many seconds of wall time is a hang: it is killed.
KILL_S: Final = 60.0
#: The marker a planted program or an expanded name would create: its existence is "executed".
PWN: Final = "PWN"
MODEL: Final = "deepseek-ai/DeepSeek-V3"
SEED: Final = ["explain", "--gpu", "H200", "--model", MODEL, "--no-env"]
GB10: Final = ["explain", "--gpu", "GB10", "--model", MODEL, "--no-env"]
ROOT: Final = Path(__file__).resolve().parents[1]
REPORT: Final = ROOT / "docs" / "measurements" / "2026-12-04-h200-bench" / "Qwen3-32B-FP8.json"
#: A one-rule operator file (the example policy's first rule, "no Marlin MoE on GB10").
OP: Final = """rules:
  - id: ops-no-marlin-moe-on-gb10
    when: {gpu.sm: sm121, triton.version: ">=3.6", triton.sm121a_ok: true, deploy.lora: false}
    paths: [moe]
    deny: marlin
    severity: accuracy
    because: not yet validated on our GB10 fleet (café)
    refs: [vllm#49546]
"""
CASE: Final = f"name: a case\ngiven: {{gpu: H200, model: {MODEL}}}\nexpect: {{moe: deep_gemm}}\n"

Setup = Callable[[Path], None]


@dataclass
class Outcome:
    """What one input did: its status, wall and CPU seconds, peak memory (MB), stderr, breaches."""

    code: int
    wall: float
    cpu: float
    mb: float
    err: str
    breaches: list[str] = field(default_factory=list)


@dataclass
class Input:
    """One hostile input, run as a user runs it: ``kernelpolicy ARGV`` (or ``python -c SCRIPT``)
    in a new process whose working folder is the input's own folder ``@D`` (every ``@D`` in the
    argv, the environment, the files and the wrapper is that folder), with its own cache folder."""

    label: str
    argv: list[str]
    env: dict[str, str | None] = field(default_factory=dict)
    #: bytes piped in, ``"idle"`` (a pipe nobody writes), or None (/dev/null)
    stdin: bytes | str | None = None
    #: files to make in ``@D`` before the run: text or bytes (``@D`` replaced)
    files: dict[str, str | bytes] = field(default_factory=dict)
    setup: Setup | None = None
    #: a check after the run: a breach's words, or None
    after: Callable[[Path, Outcome], str | None] | None = None
    #: processes or state the setup started, ended after the run
    cleanup: Setup | None = None
    rlimits: tuple[tuple[int, int], ...] = ()
    #: a ``sh -c`` line that runs ``"$@"`` (the command): closed descriptors, a deleted folder
    wrap: str | None = None
    script: str | None = None
    codes: tuple[int, ...] = DOCUMENTED
    #: files of ``@D`` that the command may change when it succeeds (exit 0 or 1)
    writes: tuple[str, ...] = ()
    #: a refusal (exit 2) is one line on stderr (off where stderr is closed)
    one_line: bool = True
    #: copy the warm cache (the shipped tables' certificate and compiled policy) into its cache
    warm: bool = False


def _fifo(name: str) -> Setup:
    def make(d: Path) -> None:
        os.mkfifo(d / name)

    return make


def _both(*steps: Setup | None) -> Setup:
    def make(d: Path) -> None:
        for step in steps:
            if step is not None:
                step(d)

    return make


def _yaml_files() -> dict[str, bytes]:
    """The 18 YAML files of the report's YAML class (bombs, nesting, tags, encodings)."""

    def bomb(levels: int) -> str:
        names = "abcdefghij"[: levels + 1]
        return "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in itertools.pairwise(names)
        )

    return {
        "alias bomb 9x9": bomb(8).encode(),
        "alias bomb 7 levels": bomb(6).encode(),
        "10,000-deep flow list": ("rules: " + "[" * 10_000 + "]" * 10_000 + "\n").encode(),
        "1,000-deep block mapping": ("".join("  " * i + "a:\n" for i in range(1_000)) + "  " * 1_000 + "b\n").encode(),
        "a NUL byte": b"rules:\n  - id: x\x00\n",
        "60,000 top-level keys": "".join(f"k{i}: {i}\n" for i in range(60_000)).encode(),
        "100,000 CR-only lines": ("rules: []" + "\r" * 100_000).encode(),
        "a python tag": f"rules: !!python/object/apply:os.system ['touch @D/{PWN}']\n".encode(),
        "merge keys": b"base: &b {deny: triton, paths: [moe], severity: perf, because: x}\n"
        b"rules:\n  - <<: *b\n    id: ops-merged\n    when: {gpu.sm: sm90}\n",
        "5,000 documents": ("rules: []\n---\n" * 5_000).encode(),
        "a byte-order mark": "\ufeffrules: []\n".encode(),
        "UTF-16": "rules: []\n".encode("utf-16"),
        "a byte that is not UTF-8": b"rules:\n  - id: caf\xe9\n",
        "tab indentation": b"rules:\n\t- id: x\n",
        "a 1 MB scalar": b"rules: []\nnote: " + b"y" * 1_000_000 + b"\n",
        "a duplicate key": b"rules: []\nrules: []\n",
        "40,000 entries on one line": ("rules: [" + ", ".join(["{id: x, deny: triton}"] * 40_000) + "]\n").encode(),
        "an empty file": b"",
    }


#: The commands that read a YAML file (F), and how each is given it.
_YAML_COMMANDS: Final[dict[str, tuple[list[str], dict[str, str | None]]]] = {
    "explain --policy": ([*SEED, "--policy", "@D/f.yaml"], {}),
    "KERNELPOLICY_POLICY": (SEED, {"KERNELPOLICY_POLICY": "@D/f.yaml"}),
    "check": (["check", "--no-coverage", "@D/f.yaml"], {}),
    "matrix --policy": (["matrix", "--format", "json", "--policy", "@D/f.yaml"], {}),
    "knowledge stale --policy": (["knowledge", "stale", "--policy", "@D/f.yaml"], {}),
    "test": (["test", "@D/f.yaml"], {}),
    "diff": (["diff", "@D/f.yaml", "@D/f.yaml"], {}),
    "explain --config": ([*SEED, "--config", "@D/f.yaml"], {}),
    "fmt --check": (["fmt", "--check", "@D/f.yaml"], {}),
    "fmt (in place)": (["fmt", "@D/f.yaml"], {}),
}


def yaml_inputs() -> list[Input]:
    return [
        Input(
            f"{command} of {what}",
            argv,
            env=dict(env),
            files={"f.yaml": content},
            writes=("f.yaml",) if command == "fmt (in place)" else (),
            warm=command in ("check", "diff", "matrix --policy"),
        )
        for what, content in _yaml_files().items()
        for command, (argv, env) in _YAML_COMMANDS.items()
    ]


#: The variables the report set (12), and the 20 values each was given.
_VARIABLES: Final = (
    "KERNELPOLICY_CACHE_DIR",
    "KERNELPOLICY_CACHE",
    "KERNELPOLICY_POLICY",
    "KERNELPOLICY_FACTS",
    "KERNELPOLICY_DEBUG",
    "KERNELPOLICY_STRICT",
    "KERNELPOLICY_NO_CACHE",
    "KERNELPOLICY_DISABLE",
    "XDG_CACHE_HOME",
    "HOME",
    "HF_HOME",
    "HF_HUB_CACHE",
)
_VALUES: Final = (
    "",
    " ",
    "\n",
    "x" * 100_000,
    "\u202erlo",
    "rel",
    "~",
    "~nouser",
    "/dev/zero",
    "@D/fifo",
    "/proc/self/mem",
    "/",
    "..",
    "yes",
    "2",
    "-1",
    "::",
    os.fsdecode(b"caf\xe9"),
    "@D/file",
    "@D/open",
)


def _variable_setup(d: Path) -> None:
    os.mkfifo(d / "fifo")
    (d / "file").write_text("rules: []\n", encoding="utf-8")
    (d / "open").mkdir()
    (d / "open").chmod(0o777)


def environment_inputs() -> list[Input]:
    inputs = [
        Input(f"{var}={value[:12]!r}", list(SEED), env={var: value}, setup=_variable_setup)
        for var in _VARIABLES
        for value in _VALUES
    ]
    inputs += [
        Input(f"check with KERNELPOLICY_NO_CACHE={v!r}", ["check", "--no-coverage"], env={"KERNELPOLICY_NO_CACHE": v})
        for v in ("false", "no", "off", "maybe", "1", "0")
    ]

    def toolkit(version: Setup | None, nvcc: str) -> Setup:
        def make(d: Path) -> None:
            (d / "cuda" / "bin").mkdir(parents=True)
            tool = d / "cuda" / "bin" / "nvcc"
            tool.write_text("#!/bin/sh\n" + nvcc, encoding="utf-8")
            tool.chmod(0o755)
            if version is not None:
                version(d)

        return make

    def at(name: str, how: Callable[[Path], None]) -> Setup:
        return lambda d: how(d / "cuda" / name)

    plain = "echo 'Cuda compilation tools, release 12.8, V12.8.93'\n"
    toolkits: dict[str, Setup] = {
        "version.json a FIFO": toolkit(at("version.json", os.mkfifo), plain),
        "version.json a link to /dev/zero": toolkit(at("version.json", lambda p: p.symlink_to("/dev/zero")), plain),
        "version.json 100,000 deep": toolkit(
            at("version.json", lambda p: p.write_text("[" * 100_000 + "]" * 100_000)), plain
        ),
        "version.json of 5,000 digits": toolkit(
            at("version.json", lambda p: p.write_text('{"cuda": {"version": "' + "9" * 5_000 + '"}}')), plain
        ),
        "version.json a folder": toolkit(at("version.json", lambda p: p.mkdir()), plain),
        "version.json a link loop": toolkit(at("version.json", lambda p: p.symlink_to(p)), plain),
        "an nvcc that never returns": toolkit(None, "sleep 60\n"),
        "an nvcc that prints 50 MB": toolkit(None, "head -c 50000000 /dev/zero | tr '\\0' x\n"),
        "an nvcc that prints nothing": toolkit(None, "exit 0\n"),
        "an nvcc that fails": toolkit(None, "echo boom >&2; exit 3\n"),
    }
    for what, make in toolkits.items():
        for argv in (["facts", "--json"], ["explain", "--gpu", "auto", "--model", MODEL, "--no-env"]):
            inputs.append(Input(f"CUDA_HOME with {what}: {argv[0]}", argv, env={"CUDA_HOME": "@D/cuda"}, setup=make))
    return inputs


#: The locales tried, None for none set at all.
_LOCALES: Final = ("C.UTF-8", "C", "POSIX", "tr_TR.UTF-8", None, "en_US.ISO-8859-1", "ja_JP.eucJP", "de_DE.UTF-8")
#: File names that are not UTF-8, or that a terminal shows as something else.
_NAMES: Final = (b"pol\xff.yaml", b"r\xe9gles.yaml", "\u202elmay.yaml".encode())


def _locale_env(loc: str | None) -> dict[str, str | None]:
    if loc is None:
        return {"LC_ALL": None, "LANG": None, "LANGUAGE": None, "LC_CTYPE": None}
    return {"LC_ALL": loc, "LANG": loc}


def _named(name: bytes, content: str) -> Setup:
    def make(d: Path) -> None:
        with open(os.fsencode(d) + b"/" + name, "wb") as f:
            f.write(content.encode())

    return make


def locale_inputs() -> list[Input]:
    inputs: list[Input] = []
    for loc in _LOCALES:
        for raw in _NAMES:
            path = "@D/" + os.fsdecode(raw)
            commands: dict[str, tuple[list[str], dict[str, str | None], str]] = {
                "explain --policy": ([*SEED, "--policy", path], {}, OP),
                "KERNELPOLICY_POLICY": (list(GB10), {"KERNELPOLICY_POLICY": path}, OP),
                "check": (["check", "--no-coverage", path], {}, OP),
                "fmt --check": (["fmt", "--check", path], {}, OP + "\n\n"),
                "test": (["test", path], {}, CASE),
            }
            for command, (argv, env, content) in commands.items():
                inputs.append(
                    Input(
                        f"{command} of {raw!r} under {loc}",
                        argv,
                        env={**_locale_env(loc), **env},
                        setup=_named(raw, content),
                        warm=command == "check",
                    )
                )
    odd = "@D/" + os.fsdecode(b"pol\xff.yaml")
    for encoding in ("ascii", "latin-1", "cp437"):
        env: dict[str, str | None] = {"PYTHONIOENCODING": encoding}
        inputs += [
            Input(
                f"explain with a non-ASCII reason, {encoding}",
                [*GB10, "--policy", "@D/op.yaml"],
                env,
                files={"op.yaml": OP},
            ),
            Input(
                f"explain --json, a non-ASCII reason, {encoding}",
                [*GB10, "--json", "--policy", "@D/op.yaml"],
                env,
                files={"op.yaml": OP},
            ),
            Input(
                f"fmt --check of a \\xff name, {encoding}",
                ["fmt", "--check", odd],
                env,
                setup=_named(b"pol\xff.yaml", OP + "\n\n"),
            ),
            Input(f"test of a \\xff name, {encoding}", ["test", odd], env, setup=_named(b"pol\xff.yaml", CASE)),
        ]
    return inputs


def _report_text(edit: Callable[[dict[str, Any]], object] | None = None) -> str:
    data: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    if edit is not None:
        edit(data)
    return json.dumps(data)


def _set(keys: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], object]:
    def edit(data: dict[str, Any]) -> None:
        node: Any = data
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


def _no_live_yaml(d: Path, out: Outcome) -> str | None:
    """The emitted policy holds no section the report's strings wrote (a live ``implies:``)."""
    import yaml

    emitted = d / "out.yaml"
    if not emitted.is_file() or out.code != 0:
        return None
    try:
        data = yaml.safe_load(emitted.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return f"the emitted policy is not YAML: {exc}"
    extra = set(data or {}) - {"rules"}
    return f"the emitted policy has sections {sorted(extra)}" if extra else None


def bench_inputs() -> list[Input]:
    good = _report_text()
    inputs: list[Input] = []
    keys = list(json.loads(good))
    for key in keys:
        for value in (None, [1, 2], "text", 5, {"a": {"b": []}}):
            inputs.append(
                Input(
                    f"report with {key}: {json.dumps(value)}",
                    ["bench", "--report", "@D/r.json"],
                    files={"r.json": _report_text(_set((key,), value))},
                )
            )
    cell = ("cells", 0)
    for keys_, value in (
        ((*cell, "m"), "x"),
        ((*cell, "m"), -1),
        ((*cell, "outcomes"), "x"),
        ((*cell, "outcomes", 0, "us"), -5.0),
        ((*cell, "outcomes", 0, "us"), "fast"),
        ((*cell, "outcomes", 0, "spread"), "wide"),
        ((*cell, "outcomes", 0, "error"), "small"),
        ((*cell, "loss"), None),
        (("failures", 0), "x"),
        (("candidates", "dense"), {"a": 1}),
    ):
        for json_ in ([], ["--json"]):
            inputs.append(
                Input(
                    f"report with {'.'.join(map(str, keys_))}: {value!r} {' '.join(json_)}",
                    ["bench", "--report", "@D/r.json", *json_],
                    files={"r.json": _report_text(_set(keys_, value))},
                )
            )
    texts = {
        "empty": "",
        "not JSON": "{nope",
        "100,000 deep": "[" * 100_000 + "]" * 100_000,
        "Infinity": good.replace('"n": 10240', '"n": Infinity', 1),
        "NaN": good.replace('"n": 10240', '"n": NaN', 1),
        "1e999": good.replace('"us": 26.544', '"us": 1e999', 1),
        "5,000 digits": good.replace('"n": 10240', '"n": ' + "9" * 5_000, 1),
        "a JSON list": "[1, 2]",
        "another schema": good.replace("kernelpolicy.bench/1", "kernelpolicy.bench/99"),
    }
    for what, text in texts.items():
        inputs.append(
            Input(
                f"report {what}",
                ["bench", "--report", "@D/r.json", "--emit-policy", "@D/out.yaml"],
                files={"r.json": text},
            )
        )
    for where, make, stdin in (
        ("a FIFO", _fifo("r.json"), None),
        ("/dev/zero", lambda d: (d / "r.json").symlink_to("/dev/zero"), None),
        ("/dev/stdin on an idle pipe", lambda d: (d / "r.json").symlink_to("/dev/stdin"), "idle"),
    ):
        inputs.append(Input(f"report on {where}", ["bench", "--report", "@D/r.json"], setup=make, stdin=stdin))
    for field_ in ("model", "machine", "date"):
        injected = _report_text(_set((field_,), "x\nimplies:\n  - id: evil\n    when: {}\n    then: {}"))
        inputs.append(
            Input(
                f"report whose {field_} holds YAML",
                ["bench", "--report", "@D/r.json", "--emit-policy", "@D/out.yaml"],
                files={"r.json": injected},
                writes=("out.yaml",),
                after=_no_live_yaml,
            )
        )
    emit = ["bench", "--report", "@D/r.json", "--emit-policy"]
    old = "# an existing policy\nrules: []\n" + "# keep\n" * 5_000
    for kib in (0, 1, 8):
        inputs.append(
            Input(
                f"--emit-policy over an existing file under a {kib} KiB file-size limit",
                [*emit, "@D/out.yaml"],
                files={"r.json": good, "out.yaml": old},
                writes=("out.yaml",),
                after=_whole("out.yaml", "yaml"),
                rlimits=((resource.RLIMIT_FSIZE, kib * 1024),),
            )
        )
    inputs += [
        Input("--emit-policy the report itself", [*emit, "@D/r.json"], files={"r.json": good}),
        Input("--emit-policy ''", [*emit, ""], files={"r.json": good}),
        Input("--emit-policy a FIFO", [*emit, "@D/fifo"], files={"r.json": good}, setup=_fifo("fifo")),
        Input("--emit-policy a folder", [*emit, "@D"], files={"r.json": good}),
        Input(
            "--emit-policy with a negative time",
            [*emit, "@D/out.yaml"],
            files={"r.json": _report_text(_set(("cells", 0, "outcomes", 0, "us"), -1.0))},
            writes=("out.yaml",),
        ),
    ]
    for threshold in ("nan", "-1", "inf", "x", "1e999", "0"):
        inputs.append(
            Input(
                f"--threshold {threshold}",
                [*emit, "@D/out.yaml", "--threshold", threshold],
                files={"r.json": good},
                writes=("out.yaml",),
            )
        )
    return inputs


def _path_options() -> list[tuple[tuple[str, ...], str | None, str]]:
    """(subcommand, option or None for a positional, dest) of every argument that takes a path,
    from the command line's own parser (as tests/hostile/test_path_options.py finds them)."""
    import argparse

    from kernelpolicy.cli import _parser

    pathlike = ("FILE", "DIR", "PATH", "PYTHON", "FILES", "CASE", "OLD", "NEW")
    found: set[tuple[tuple[str, ...], str | None, str]] = set()

    def walk(prefix: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk((*prefix, name), sub)
                continue
            metavar = action.metavar if isinstance(action.metavar, str) else ""
            if not any(m in metavar.upper() for m in pathlike) and action.dest != "model":
                continue
            option = max(action.option_strings, key=len) if action.option_strings else None
            found.add((prefix, option, action.dest))

    walk((), _parser())
    return sorted(found, key=lambda o: (o[0], o[1] or "", o[2]))


_PATH_BASE: Final[dict[str, list[str]]] = {
    "explain": ["--gpu", "H200", "--model", MODEL, "--no-env"],
    "bench": ["--gpu", "H200", "--model", MODEL, "--plan"],
    "fleet": ["--model", MODEL],
    "vllm": ["--gpu", "H200", "--model", MODEL],
    "sglang": ["--gpu", "H200", "--model", MODEL],
}


def _with_path(prefix: tuple[str, ...], option: str | None, dest: str, path: str) -> list[str]:
    base = list(_PATH_BASE.get(prefix[0], [])) if prefix[1:2] in ((), ("audit",)) else []
    if option == "--model":
        base = [a for a in base if a not in (MODEL, "--model")]
    if prefix == ("diff",) and option is None:
        return [*prefix, path, path]
    if dest == "emit_policy":
        base += ["--report", path]
    return [*prefix, *base, *([option, path] if option else [path])]


def stdin_inputs() -> list[Input]:
    piped = b"rules: []\n"
    inputs: list[Input] = []
    for prefix, option, dest in _path_options():
        name = f"{' '.join(prefix)} {option or dest}"
        if ("venv" in prefix and option == "--python") or (prefix, option) in ((("facts",), "--cache-dir"),):
            continue
        for path, stdin, how in (
            ("-", piped, "piped"),
            ("/dev/stdin", piped, "piped"),
            ("/dev/stdin", "idle", "an idle pipe"),
        ):
            inputs.append(Input(f"{name} {path} ({how})", _with_path(prefix, option, dest, path), stdin=stdin))
    return inputs


_SGLANG: Final = ["--", "python3", "-m", "sglang.launch_server", "--model-path", MODEL]
_VLLM: Final = ["--", "vllm", "serve", MODEL]


def launch_inputs() -> list[Input]:
    lines: dict[str, list[str]] = {}
    for engine, head in (("sglang", _SGLANG), ("vllm", _VLLM)):
        flags: dict[str, list[str]] = {
            "an unclosed quote in one string": [" ".join(head[1:]) + " --tp '2"],
            "the whole line as one string": [" ".join(head[1:]) + " --tensor-parallel-size 8"],
            "$()": ["--served-model-name", f"$(touch @D/{PWN})"],
            "backticks": ["--served-model-name", f"`touch @D/{PWN}`"],
            "; and &&": ["--port", "1;", "touch", f"@D/{PWN}", "&&", "true"],
            "a pipe": ["|", "sh", "-c", f"touch @D/{PWN}"],
            "a newline in a value": ["--served-model-name", "a\nb"],
            "Unicode quotes": ["--served-model-name", "\u201cx\u201d"],
            "10,000 flags": [a for i in range(5_000) for a in (f"--foo{i}", "1")],
            "a 100 KB flag value": ["--served-model-name", "x" * 100_000],
            "an ESC in a value": ["--served-model-name", "\x1b[31mred"],
            "full-width digits": ["--tp", "\uff18"],
            "a 5,000-digit size": ["--tp", "9" * 5_000],
            "an equals sign and no value": ["--quantization="],
            "-- twice": ["--", "--tp", "2"],
        }
        if engine == "sglang":
            flags |= {
                "--tp 8 (an abbreviation)": ["--tp", "8"],
                "--tp-s 8": ["--tp-s", "8"],
                "--moe-runner deep_gemm": ["--moe-runner", "deep_gemm"],
                "--moe-runner-backend garbage": ["--moe-runner-backend", "garbage"],
                "--quantization fp8": ["--quantization", "fp8"],
                "an ambiguous prefix --t": ["--t", "8"],
                "--config FILE": ["--config", "@D/c.yaml"],
                "--config of a FIFO": ["--config", "@D/fifo"],
                "--config of an alias bomb": ["--config", "@D/bomb.yaml"],
                "--attention-backend x": ["--attention-backend", "x"],
                "--kv-cache-dtype fp8_e4m3": ["--kv-cache-dtype", "fp8_e4m3"],
                "--ep-size 0": ["--ep-size", "0"],
            }
        else:
            flags |= {
                "--tensor-parallel 8 (an abbreviation)": ["--tensor-parallel", "8"],
                "-tp 8": ["-tp", "8"],
                "--quantization=fp8": ["--quantization=fp8"],
                "--moe-backend garbage": ["--moe-backend", "garbage"],
                "--kv-cache-dtype fp8": ["--kv-cache-dtype", "fp8"],
                "--enable-expert-parallel=maybe": ["--enable-expert-parallel=maybe"],
                "-tp ''": ["-tp", ""],
                "VAR=1 prefixes": ["VLLM_USE_DEEP_GEMM=1"],
                "--config FILE": ["--config", "@D/c.yaml"],
                "--config of a FIFO": ["--config", "@D/fifo"],
                "--attention-backend x": ["--attention-backend", "x"],
                "-O 3": ["-O", "3"],
            }
        for what, extra in flags.items():
            if what in ("an unclosed quote in one string", "the whole line as one string"):
                lines[f"{engine}: {what}"] = ["--", *extra]
            elif what == "VAR=1 prefixes":
                lines[f"{engine}: {what}"] = ["--", "VLLM_USE_DEEP_GEMM=1", *head[1:]]
            else:
                lines[f"{engine}: {what}"] = [*head, *extra]
    config = "tp-size: 8\nmoe-runner-backend: deep_gemm\ntensor-parallel-size: 8\n"

    def files(d: Path) -> None:
        (d / "c.yaml").write_text(config, encoding="utf-8")
        (d / "bomb.yaml").write_bytes(_yaml_files()["alias bomb 9x9"])
        os.mkfifo(d / "fifo")

    return [Input(what, ["explain", "--gpu", "H200", "--no-env", *line], setup=files) for what, line in lines.items()]


def process_inputs() -> list[Input]:
    commands: dict[str, tuple[list[str], bool]] = {
        "explain": (list(SEED), False),
        "check": (["check", "--no-coverage", "@D/op.yaml"], True),
        "fmt --check": (["fmt", "--check", "@D/op.yaml"], False),
        "facts": (["facts", "--json"], False),
    }
    mb = 1024 * 1024
    states: dict[str, dict[str, Any]] = {
        "a deleted working folder": {"wrap": 'mkdir @D/gone && cd @D/gone && rmdir @D/gone && exec "$@"'},
        "16 open files at most": {"rlimits": ((resource.RLIMIT_NOFILE, 16),)},
        "400 MB of address space": {"rlimits": ((resource.RLIMIT_AS, 400 * mb),)},
        "a 256 KB stack": {"rlimits": ((resource.RLIMIT_STACK, 256 * 1024),)},
        "one process at most": {"rlimits": ((resource.RLIMIT_NPROC, 1),)},
        "PYTHONWARNINGS=error": {"env": {"PYTHONWARNINGS": "error"}},
        "PYTHONWARNINGS=error and a deprecated variable": {
            "env": {"PYTHONWARNINGS": "error", "KERNELPOLICY_CACHE": "@D/old"}
        },
        "stdin closed": {"wrap": 'exec "$@" <&-'},
        "stdout closed": {"wrap": 'exec "$@" >&-'},
        "stderr closed": {"wrap": 'exec "$@" 2>&-', "one_line": False},
        "stdout on /dev/full": {"wrap": 'exec "$@" >/dev/full'},
        "umask 0777": {"wrap": 'umask 0777; exec "$@"'},
        "TMPDIR that does not exist": {"env": {"TMPDIR": "@D/none"}},
        "PYTHONOPTIMIZE=2": {"env": {"PYTHONOPTIMIZE": "2"}},
        "no HOME": {"env": {"HOME": None, "XDG_CACHE_HOME": None, "KERNELPOLICY_CACHE_DIR": None}},
    }
    inputs: list[Input] = []
    for state, how in states.items():
        for command, (argv, warm) in commands.items():
            inputs.append(Input(f"{command} with {state}", list(argv), files={"op.yaml": OP}, warm=warm, **how))
    for jobs in ("0", "-1", "1", "x", "99999", "1e3"):
        inputs.append(
            Input(
                f"check --jobs {jobs}",
                ["check", "--no-coverage", "--jobs", jobs, "@D/op.yaml"],
                files={"op.yaml": OP},
                warm=True,
            )
        )
    return inputs


def _planted_venv(engine: str, version: str, *, link: bool = False) -> Setup:
    """A venv another user could have planted: a world-writable cache folder whose python
    creates ``PWN`` when run, marked built."""

    def make(d: Path) -> None:
        venvs = d / "cache" / "venvs"
        target = d / "elsewhere" if link else venvs
        bindir = target / f"{engine}-{version}" / "bin"
        bindir.mkdir(parents=True)
        (bindir / "python").write_text(f"#!/bin/sh\ntouch {d}/{PWN}\n", encoding="utf-8")
        (target / f"{engine}-{version}" / ".kernelpolicy-ok").write_text("", encoding="utf-8")
        for p in (target, *target.rglob("*")):
            p.chmod(0o777)
        if link:
            venvs.symlink_to(target)
        (d / "cache").chmod(0o777)

    return make


def _victim_link(engine: str, version: str) -> Setup:
    def make(d: Path) -> None:
        venvs = d / "cache" / "venvs"
        venvs.mkdir(parents=True)
        (d / "victim").write_text("precious\n", encoding="utf-8")
        (venvs / f".{engine}-{version}.constraints.txt").symlink_to(d / "victim")
        venvs.chmod(0o777)

    return make


def venv_inputs() -> list[Input]:
    strings = (
        "0.34.0..",
        "\uff10.\uff13\uff14.\uff10",
        "0.34.0-",
        "0.34.0+cpu",
        "/",
        "..",
        " ",
        f"0.34.0;touch @D/{PWN}",
        f"$(touch @D/{PWN})",
        "https://example.invalid/vllm.whl",
        "0.34.0@x",
        "#",
        ">=0.34",
        "\u202e0.34.0",
        "",
        "9" * 5_000,
    )
    inputs = [Input(f"{engine} venv {s[:16]!r}", [engine, "venv", s]) for engine in ("vllm", "sglang") for s in strings]
    inputs += [
        Input(f"{engine} venv --python ''", [engine, "venv", "--python", "", "0.0.1"]) for engine in ("vllm", "sglang")
    ]
    for engine, version in (("vllm", "0.34.0"), ("sglang", "0.5.23")):
        flag = f"--{engine}"
        audit = [engine, "audit", "--gpu", "H200", "--model", MODEL, flag, version]
        inputs += [
            Input(
                f"{engine} venv {version}, a planted venv",
                [engine, "venv", version],
                setup=_planted_venv(engine, version),
            ),
            Input(f"{engine} audit, a planted venv", audit, setup=_planted_venv(engine, version)),
            Input(
                f"{engine} venv {version}, venvs a link",
                [engine, "venv", version],
                setup=_planted_venv(engine, version, link=True),
            ),
            Input(f"{engine} audit, venvs a link", audit, setup=_planted_venv(engine, version, link=True)),
            Input(
                f"{engine} venv {version}, a constraints link",
                [engine, "venv", version],
                setup=_victim_link(engine, version),
            ),
        ]
    return inputs


def _node_base() -> dict[str, Any]:
    """A node file as ``facts --json`` writes it, on GB10."""
    from kernelpolicy.dsl.loader import load_policy
    from kernelpolicy.facts.gpu import facts_from_spec

    gb10 = dict(facts_from_spec("GB10", load_policy().gpus))
    return {
        "schema": "kernelpolicy.machine/1",
        "gpu": {"name": "NVIDIA GB10", "sm": "sm121", "cc": "12.1", "count": 1, "source": "nvml"},
        "facts": {"host.machine": "aarch64", "host.system": "Linux", **gb10},
        "sources": {},
        "notes": [],
    }


def fleet_inputs() -> list[Input]:
    base = _node_base()

    def node(**change: Any) -> str:
        data = json.loads(json.dumps(base))
        for key, value in change.items():
            if key.startswith("f_"):
                data["facts"][key[2:].replace("__", ".")] = value
            else:
                data[key] = value
        return json.dumps(data)

    variants: dict[str, str] = {
        "deploy.moe_backend": node(f_deploy__moe_backend="deep_gemm"),
        "deploy.linear_backend": node(f_deploy__linear_backend="cutlass"),
        "deploy.allow_rules": node(f_deploy__allow_rules=["x"]),
        "deploy.env.VLLM_USE_DEEP_GEMM": json.dumps(
            {**base, "facts": {**base["facts"], "deploy.env.VLLM_USE_DEEP_GEMM": "1"}}
        ),
        "deploy.tp": node(f_deploy__tp=8),
        "an H200 gpu block over GB10 facts": node(
            gpu={"name": "NVIDIA H200", "sm": "sm90", "cc": "9.0", "count": 8, "source": "nvml"}
        ),
        "GB10 on x86_64": node(f_host__machine="x86_64"),
        "torch.cuda_archs sm_999": node(f_torch__cuda_archs=["sm_999"]),
        "gpu.count 0": node(f_gpu__count=0),
        "gpu.count -1": node(f_gpu__count=-1),
        "gpu.sm sm999": node(f_gpu__sm="sm999"),
        "gpu.sm null": node(f_gpu__sm=None),
        "a bogus source": node(sources={"gpu.sm": "bogus"}),
        "another schema": node(schema="kernelpolicy.machine/9"),
        "5,000 digits": node(f_gpu__count=1234567).replace("1234567", "9" * 5_000),
        "100,000 deep": "[" * 100_000 + "]" * 100_000,
        "a JSON list": "[]",
        "NaN": node(f_gpu__count=float("nan")),
        "an unknown fact": node(f_gpu__smm="sm121"),
        "a 1 MB name": node(gpu={**base["gpu"], "name": "x" * 1_000_000}),
        "an ESC in the name": node(gpu={**base["gpu"], "name": "\x1b[31mGB10"}),
        "empty": "",
        "no gpu": node(gpu=None, gpu_reason="NVML library not found"),
        "facts a list": node(facts=[]),
    }
    inputs = [
        Input(f"node file with {what}", ["fleet", "--model", MODEL, "--from", "@D/n.json"], files={"n.json": text})
        for what, text in variants.items()
    ]
    good = node()
    inputs += [
        Input(
            "a good node and --fact deploy.moe_backend=deep_gemm",
            ["fleet", "--model", MODEL, "--from", "@D/n.json", "--fact", "deploy.moe_backend=deep_gemm"],
            files={"n.json": good},
        ),
        Input(
            "a good node and --env VLLM_USE_DEEP_GEMM=1",
            ["fleet", "--model", MODEL, "--from", "@D/n.json", "--env", "VLLM_USE_DEEP_GEMM=1"],
            files={"n.json": good},
        ),
        Input(
            "one node file twice",
            ["fleet", "--model", MODEL, "--from", "@D/n.json", "@D/n.json"],
            files={"n.json": good},
        ),
        Input("a node file on a FIFO", ["fleet", "--model", MODEL, "--from", "@D/fifo"], setup=_fifo("fifo")),
        Input(
            "two nodes that disagree",
            ["fleet", "--model", MODEL, "--from", "@D/n.json", "@D/m.json"],
            files={
                "n.json": good,
                "m.json": node(
                    gpu={"name": "NVIDIA H200", "sm": "sm90", "cc": "9.0", "count": 8, "source": "nvml"}, facts={}
                ),
            },
        ),
        Input(
            "a node file --json", ["fleet", "--model", MODEL, "--json", "--from", "@D/n.json"], files={"n.json": good}
        ),
    ]
    return inputs


def _kp(d: Path, *argv: str, **popen: Any) -> subprocess.Popen[bytes]:
    """A kernelpolicy command started in the background (the other side of a race or a kill)."""
    env = {**_base_env(), "KERNELPOLICY_CACHE_DIR": str(d / "cache")}
    return subprocess.Popen(
        [sys.executable, "-m", "kernelpolicy", *argv],
        cwd=d,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        **popen,
    )


_BACKGROUND: dict[Path, subprocess.Popen[bytes]] = {}


def _started(after_s: float, sig: int | None, *, wait: bool) -> Setup:
    """A check of ``op.yaml`` started before the input, sent *sig* after *after_s* seconds."""

    def make(d: Path) -> None:
        proc = _kp(d, "check", str(d / "op.yaml"))
        time.sleep(after_s)
        if sig is not None and proc.poll() is None:
            os.killpg(proc.pid, sig)
        if wait:
            proc.wait()
        else:
            _BACKGROUND[d] = proc

    return make


def _stop_background(d: Path) -> None:
    proc = _BACKGROUND.pop(d, None)
    if proc is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _tamper(how: str) -> Setup:
    """Every certificate of the cache (after a check of ``op.yaml`` made one) tampered *how*."""

    def make(d: Path) -> None:
        _kp(d, "check", str(d / "op.yaml")).wait()
        for entry in sorted((d / "cache" / "check").glob("certificate-*")):
            data = entry.read_bytes()
            if how == "truncated":
                entry.write_bytes(data[: len(data) // 2])
            elif how == "empty":
                entry.write_bytes(b"")
            elif how == "world-writable":
                entry.chmod(0o666)
            elif how == "a link to /dev/zero":
                entry.unlink()
                entry.symlink_to("/dev/zero")
            elif how == "a folder":
                entry.unlink()
                entry.mkdir()
            elif how == "a FIFO":
                entry.unlink()
                os.mkfifo(entry)
            elif how == "70 MB sparse":
                with entry.open("r+b") as f:
                    f.truncate(70_000_000)
            elif how == "its findings edited":
                entry.write_bytes(data.replace(b'"findings": [', b'"findings": [{"code": "hole"}, ', 1))
            elif how == "another format":
                entry.write_bytes(data.replace(b"kernelpolicy.certificate/", b"kernelpolicy.certificate/9", 1))

    return make


def _folder_mode(mode: int | None, *, link: bool = False) -> Setup:
    def make(d: Path) -> None:
        check = d / "cache" / "check"
        if link:
            (d / "away").mkdir()
            shutil.rmtree(check, ignore_errors=True)
            check.symlink_to(d / "away")
        elif mode is not None:
            check.mkdir(parents=True, exist_ok=True)
            check.chmod(mode)

    return make


def _planted(name: str, kind: str) -> Setup:
    def make(d: Path) -> None:
        where = d / "cache" / "check"
        where.mkdir(parents=True, exist_ok=True)
        path = where / name
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        elif kind == "link":
            path.symlink_to("/dev/zero")
        else:
            path.write_bytes(b"\x00" * 64)

    return make


#: A rule file that leaves every dense layer on sm90 without a backend (check: a hole, exit 1).
HOLE: Final = (
    "rules:\n  - {id: ops-no-dense-on-hopper, when: {gpu.sm: sm90}, paths: [dense], severity: crash,"
    " because: x, deny: [b12x, cutlass, deep_gemm, emulation, flashinfer_cutedsl, flashinfer_cutlass,"
    " flashinfer_deep_gemm, flashinfer_trtllm, humming, marlin, torch, triton]}\n"
)
EMPTY: Final = "rules: []\n"


def _race(last: str) -> Setup:
    """R2's race: ``op.yaml`` rewritten every 3 ms between two contents while checks run; it is
    left as *last*."""

    def make(d: Path) -> None:
        op = d / "op.yaml"
        stop = threading.Event()

        def flip() -> None:
            i = 0
            while not stop.is_set():
                tmp = d / f".op-{i % 2}"
                tmp.write_text(HOLE if i % 2 else EMPTY, encoding="utf-8")
                tmp.replace(op)
                i += 1
                time.sleep(0.003)

        flipper = threading.Thread(target=flip)
        flipper.start()
        try:
            for _ in range(4):
                _kp(d, "check", str(op)).wait()
        finally:
            stop.set()
            flipper.join()
        op.write_text(last, encoding="utf-8")

    return make


def _truth(other: str, code: int) -> Callable[[Path, Outcome], str | None]:
    """After the race: the content left gave its true result (the input's codes), and the other
    content, checked with the same cache, gives *code*."""

    def check(d: Path, out: Outcome) -> str | None:
        (d / "op.yaml").write_text(other, encoding="utf-8")
        got = _kp(d, "check", str(d / "op.yaml")).wait()
        return None if got == code else f"the other content's check said {got}, truth {code}"

    return check


def _no_leftovers(d: Path, out: Outcome) -> str | None:
    left = [p.name for p in (d / "cache").rglob("*") if p.name.endswith(".tmp") or ".lock" in p.name]
    return f"left behind: {left[:3]}" if left else None


def proof_inputs() -> list[Input]:
    check = ["check", "@D/op.yaml"]
    inputs = [
        Input(f"a certificate {how}", check, files={"op.yaml": OP}, setup=_tamper(how), warm=True, codes=(0,))
        for how in (
            "truncated",
            "empty",
            "world-writable",
            "a link to /dev/zero",
            "a folder",
            "a FIFO",
            "70 MB sparse",
            "its findings edited",
            "another format",
        )
    ]
    for what, make in (
        ("check/ at 0777", _folder_mode(0o777)),
        ("check/ at 0770", _folder_mode(0o770)),
        ("check/ a link", _folder_mode(None, link=True)),
        ("a planted lock FIFO", _planted(".lock-x", "fifo")),
        ("a planted lock folder", _planted(".lock-x", "folder")),
        ("a planted lock link", _planted(".lock-x", "link")),
        ("a planted temp file", _planted(".certificate-x.json.tmp", "file")),
    ):
        inputs.append(Input(f"check with {what}", check, files={"op.yaml": OP}, setup=make, warm=True, codes=(0,)))
    for what, sig in (("SIGKILL", signal.SIGKILL), ("SIGTERM", signal.SIGTERM), ("SIGINT", signal.SIGINT)):
        for after_s in (0.4, 1.0):
            inputs.append(
                Input(
                    f"check again after a {what} {after_s} s into one",
                    check,
                    files={"op.yaml": OP},
                    setup=_started(after_s, sig, wait=True),
                    after=_no_leftovers,
                    codes=(0,),
                )
            )
    inputs += [
        Input(
            "two checks at once",
            check,
            files={"op.yaml": OP},
            setup=_started(0.0, None, wait=False),
            cleanup=_stop_background,
            codes=(0,),
        ),
        Input(
            "a check while another is stopped (Ctrl-Z)",
            check,
            files={"op.yaml": OP},
            setup=_started(0.6, signal.SIGSTOP, wait=False),
            cleanup=_stop_background,
            codes=(0,),
        ),
        Input(
            "a check while another is stopped at once",
            check,
            files={"op.yaml": OP},
            setup=_started(0.05, signal.SIGSTOP, wait=False),
            cleanup=_stop_background,
            codes=(0,),
        ),
        Input(
            "a file saved while checks run, left empty",
            check,
            setup=_race(EMPTY),
            after=_truth(HOLE, 1),
            warm=True,
            codes=(0,),
            writes=("op.yaml",),
        ),
        Input(
            "a file saved while checks run, left with a hole",
            check,
            setup=_race(HOLE),
            after=_truth(EMPTY, 0),
            warm=True,
            codes=(1,),
            writes=("op.yaml",),
        ),
    ]
    return inputs


def scoped_inputs() -> list[Input]:
    files: dict[str, str] = {}
    for sm, path, backend in (
        ("sm90", "dense", "cutlass"),
        ("sm121", "dense", "marlin"),
        ("sm90", "moe", "deep_gemm"),
        ("sm100", "moe", "triton"),
        ("sm121", "moe", "marlin"),
        ("sm90", "dense", "deep_gemm"),
        ("sm100", "dense", "cutlass"),
        ("sm120", "moe", "vllm_cutlass"),
    ):
        files[f"deny {backend} {path} {sm}"] = (
            f"rules:\n  - {{id: ops-x, when: {{gpu.sm: {sm}}}, paths: [{path}], deny: {backend},"
            " severity: perf, because: x}\n"
        )
    files["deny deep_gemm for vllm >=0.30"] = (
        'rules:\n  - {id: ops-x, when: {vllm.version: ">=0.30"}, deny: deep_gemm, severity: perf, because: x}\n'
    )
    files["prefer triton on moe everywhere"] = (
        "rules:\n  - {id: ops-x, when: {model.is_moe: true}, paths: [moe], prefer: [triton], because: x}\n"
    )
    files["an order entry"] = (
        "order:\n  - id: ops-order\n    path: moe\n    when: {gpu.sm: sm90}\n"
        "    backends: [triton, deep_gemm, marlin]\n    because: ours\n"
    )
    types = ("deepseek_v3", "qwen3", "qwen3_moe", "llama", "gpt_oss")
    for n in (50, 200, 800, 2_000):
        anys = ", ".join(
            f"{{all: [{{gpu.sm: sm90}}, {{model.type: {types[i % 5]}}}, {{deploy.tp: {i % 64 + 1}}}]}}"
            for i in range(n)
        )
        files[f"any of {n} conjunctions"] = (
            f"rules:\n  - {{id: ops-x, when: {{any: [{anys}]}}, paths: [moe], deny: triton,"
            " severity: perf, because: x}\n"
        )
    names = list(files)
    inputs = [
        Input(f"check {what}", ["check", "@D/f.yaml"], files={"f.yaml": text}, warm=True)
        for what, text in files.items()
    ]
    for a, b in zip(names, names[1:] + names[:1], strict=True):
        if len(inputs) >= 29:
            break
        inputs.append(
            Input(
                f"diff {a} / {b}",
                ["diff", "@D/a.yaml", "@D/b.yaml"],
                files={"a.yaml": files[a], "b.yaml": files[b]},
                warm=True,
            )
        )
    inputs += [
        Input("check of the shipped tables, cold", ["check"]),
        Input("check --no-coverage, warm", ["check", "--no-coverage"], warm=True),
    ]
    return inputs


def _many(pattern: str, count: int, text: str) -> Setup:
    def make(d: Path) -> None:
        for i in range(count):
            (d / pattern.format(i)).write_text(text, encoding="utf-8")

    return make


def argv_inputs() -> list[Input]:
    big = "x" * 120_000
    node = json.dumps(_node_base())
    return [
        Input("20,000 --fact", [*SEED, *[a for i in range(20_000) for a in ("--fact", f"deploy.env.X{i}=1")]]),
        Input("20,000 --allow", [*SEED, *[a for i in range(20_000) for a in ("--allow", f"r{i}")]]),
        Input("20,000 --env", [*SEED, *[a for i in range(20_000) for a in ("--env", f"VLLM_X{i}=1")]]),
        Input("20,000 equal --fact", [*SEED, *["--fact", "deploy.tp=2"] * 20_000]),
        Input(
            "5,000 policy files",
            [*SEED, *[a for i in range(5_000) for a in ("--policy", f"@D/p{i}.yaml")]],
            setup=_many("p{}.yaml", 5_000, EMPTY),
        ),
        Input(
            "5,000 files to check",
            ["check", "--no-coverage", *[f"@D/p{i}.yaml" for i in range(5_000)]],
            setup=_many("p{}.yaml", 5_000, EMPTY),
            warm=True,
        ),
        Input(
            "5,000 case files", ["test", *[f"@D/c{i}.yaml" for i in range(5_000)]], setup=_many("c{}.yaml", 5_000, CASE)
        ),
        Input(
            "5,000 node files",
            ["fleet", "--model", MODEL, "--from", *[f"@D/n{i}.json" for i in range(5_000)]],
            setup=_many("n{}.json", 5_000, node),
        ),
        Input(
            "5,000 files to fmt --check",
            ["fmt", "--check", *[f"@D/p{i}.yaml" for i in range(5_000)]],
            setup=_many("p{}.yaml", 5_000, EMPTY),
        ),
        Input("a 120 KB --model", ["explain", "--gpu", "H200", "--no-env", "--model", big]),
        Input("a 120 KB --policy", [*SEED, "--policy", big]),
        Input("a 120 KB --fact value", [*SEED, "--fact", "model.type=" + big]),
        Input("a 120 KB --gpu", ["explain", "--gpu", big, "--model", MODEL, "--no-env"]),
        Input("a 120 KB --engine", [*SEED, "--engine", "vllm==" + big]),
        Input("a 120 KB file name to check", ["check", "--no-coverage", "@D/" + "y" * 200 + "/" * 1 + big[:200]]),
        Input("a 50,000-token serve line", [*SEED[:5], "--", "vllm", "serve", MODEL, *["--foo", "1"] * 25_000]),
        Input(
            "20,000 VAR=1 prefixes on a serve line",
            [
                "explain",
                "--gpu",
                "H200",
                "--no-env",
                "--",
                *[f"VLLM_X{i}=1" for i in range(20_000)],
                "vllm",
                "serve",
                MODEL,
            ],
        ),
        Input(
            "a 50,000-token SGLang line", ["explain", "--gpu", "H200", "--no-env", *_SGLANG, *["--foo", "1"] * 25_000]
        ),
        Input(
            "20,000 --fact on fleet",
            ["fleet", "--model", MODEL, "--from", "@D/n.json", *["--fact", "deploy.tp=2"] * 20_000],
            files={"n.json": node},
        ),
    ]


def _whole(name: str, kind: str) -> Callable[[Path, Outcome], str | None]:
    """An output left after a success is whole: it parses (a file-size limit cut it, exit 0)."""

    def check(d: Path, out: Outcome) -> str | None:
        import yaml

        path = d / name
        if out.code not in (0, 1) or not path.exists():
            return None
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        for f in files:
            try:
                text = f.read_text(encoding="utf-8")
                if text != "OLD":
                    json.loads(text) if kind == "json" else yaml.safe_load(text)
            except (ValueError, yaml.YAMLError) as exc:
                return f"`{f.name}` cut short after exit {out.code}: {str(exc)[:60]}"
        return None

    return check


def disk_inputs() -> list[Input]:
    unformatted = OP.replace("    paths: [moe]\n", "    paths:   [ moe ]\n") + "\n\n\n"
    writes: dict[
        str, tuple[list[str], dict[str, str], tuple[str, ...], Callable[[Path, Outcome], str | None] | None]
    ] = {
        "explain (its caches)": (list(SEED), {}, (), None),
        "facts --json (its cache)": (["facts", "--json"], {}, (), None),
        "check (the certificate)": (["check", "@D/op.yaml"], {"op.yaml": OP}, (), None),
        "fmt in place": (["fmt", "@D/op.yaml"], {"op.yaml": unformatted}, ("op.yaml",), _whole("op.yaml", "yaml")),
        "matrix --out over a file": (
            ["matrix", "--format", "json", "--out", "@D/out.json"],
            {"out.json": "OLD"},
            ("out.json",),
            _whole("out.json", "json"),
        ),
        "schema --write over a folder": (
            ["schema", "--write", "@D/schemas"],
            {"schemas/rules.schema.json": "OLD"},
            ("schemas/rules.schema.json",),
            _whole("schemas", "json"),
        ),
        "check --sarif-file over a file": (
            ["check", "--no-coverage", "--sarif-file", "@D/s.sarif", "@D/op.yaml"],
            {"s.sarif": "OLD", "op.yaml": OP},
            ("s.sarif",),
            _whole("s.sarif", "json"),
        ),
    }
    return [
        Input(
            f"{what} under a {kib} KiB file-size limit",
            argv,
            files=dict(files),
            writes=written,
            after=after,
            rlimits=((resource.RLIMIT_FSIZE, kib * 1024),),
        )
        for what, (argv, files, written, after) in writes.items()
        for kib in (0, 1, 16)
    ]


_PLUGIN: Final = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
from kernelpolicy.engines.{engine} import plugin
from kernelpolicy.engines._runtime import AdapterError, PolicyLoadError
try:
    plugin.register()
    try:
        plugin._STATE.policy()
    except PolicyLoadError as exc:
        plugin._STATE.fail(str(exc))
except AdapterError as exc:
    print(str(exc).splitlines()[0], file=sys.stderr)
    sys.exit(2)
"""


def plugin_inputs() -> list[Input]:
    odd = "@D/" + os.fsdecode(b"pol\xff.yaml")
    envs: dict[str, tuple[dict[str, str | None], str | None, Setup | None]] = {
        "a deleted working folder": ({}, 'mkdir @D/gone && cd @D/gone && rmdir @D/gone && exec "$@"', None),
        "an empty HOME": ({"HOME": "", "KERNELPOLICY_CACHE_DIR": None}, None, None),
        "KERNELPOLICY_FACTS not JSON": ({"KERNELPOLICY_FACTS": "{nope"}, None, None),
        "KERNELPOLICY_FACTS 5,000 deep": ({"KERNELPOLICY_FACTS": "[" * 5_000 + "]" * 5_000}, None, None),
        "KERNELPOLICY_POLICY not UTF-8, LANG=C": (
            {"KERNELPOLICY_POLICY": odd, "LC_ALL": "C"},
            None,
            _named(b"pol\xff.yaml", OP),
        ),
        "KERNELPOLICY_POLICY a FIFO": ({"KERNELPOLICY_POLICY": "@D/fifo"}, None, _fifo("fifo")),
        "KERNELPOLICY_POLICY an alias bomb": (
            {"KERNELPOLICY_POLICY": "@D/bomb.yaml"},
            None,
            lambda d: (d / "bomb.yaml").write_bytes(_yaml_files()["alias bomb 9x9"]),
        ),
        "KERNELPOLICY_DISABLE=maybe": ({"KERNELPOLICY_DISABLE": "maybe"}, None, None),
        "KERNELPOLICY_STRICT=1 and a FIFO policy": (
            {"KERNELPOLICY_STRICT": "1", "KERNELPOLICY_POLICY": "@D/fifo"},
            None,
            _fifo("fifo"),
        ),
        "PYTHONIOENCODING=ascii, a non-ASCII policy": (
            {"PYTHONIOENCODING": "ascii", "KERNELPOLICY_POLICY": "@D/op.yaml"},
            None,
            lambda d: (d / "op.yaml").write_text(OP, encoding="utf-8"),
        ),
    }
    return [
        Input(
            f"{engine} plugin with {what}",
            [],
            env=dict(env),
            wrap=wrap,
            setup=setup,
            script=_PLUGIN.format(engine=engine),
        )
        for engine in ("vllm", "sglang")
        for what, (env, wrap, setup) in envs.items()
    ]


def _hub(names: list[bytes]) -> Setup:
    def make(d: Path) -> None:
        hub = os.fsencode(d / "hub")
        os.makedirs(hub, exist_ok=True)
        for name in names:
            os.makedirs(hub + b"/" + name + b"/snapshots", exist_ok=True)

    return make


def strings_inputs() -> list[Input]:
    inputs: list[Input] = []
    hostile = [
        f"models--a--b$(touch @D/{PWN})".encode(),
        f"models--a--`touch @D/{PWN}`".encode(),
        b"models--a--b\nc",
        b"models--a--\xff",
        b"models--a--b c",
        b"models--a--" + b"x" * 200,
        b"models----",
        b"models--a--b;touch PWN",
    ]
    complete = (
        '"$@" > @D/c.bash && exec bash -c \'source @D/c.bash; COMP_WORDS=(kernelpolicy explain --model "");'
        ' COMP_CWORD=3; _kernelpolicy; printf "%s\\n" "${COMPREPLY[@]}" >&2\''
    )
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    for i, name in enumerate(hostile):
        hub: dict[str, str | None] = {"HF_HUB_CACHE": "@D/hub", "PATH": path}
        inputs.append(
            Input(
                f"completion --list models with {name[:24]!r} ({i})",
                ["completion", "--list", "models"],
                env=hub,
                setup=_hub([name]),
            )
        )
        inputs.append(
            Input(
                f"bash completion of --model with {name[:24]!r} ({i})",
                ["completion", "bash"],
                env=hub,
                setup=_hub([name]),
                wrap=complete,
            )
        )
    inputs.append(
        Input(
            "completion --list models, 20,000 cached repos",
            ["completion", "--list", "models"],
            env={"HF_HUB_CACHE": "@D/hub"},
            setup=_hub([f"models--org{i}--m{i}".encode() for i in range(20_000)]),
        )
    )
    for kind in ("gpus", "backends", "facts", "rules", "schemas", "engines", "x", ""):
        inputs.append(Input(f"completion --list {kind!r}", ["completion", "--list", kind]))
    for shell in ("bash", "zsh", "fish", "", "tcsh"):
        inputs.append(Input(f"completion {shell!r}", ["completion", shell]))
    for engine in (
        "vllm==" + "9" * 5_000,
        "vllm==",
        "==",
        "vllm>=0.34",
        "vllm==0.34.0;rm",
        "vllm==\uff10.34.0",
        "",
        "sglang==0.5.23",
        "trtllm==1.0",
        "vllm==0.34.0.0.0.0.0",
    ):
        inputs.append(Input(f"explain --engine {engine[:16]!r}", [*SEED, "--engine", engine]))
        inputs.append(Input(f"matrix --engine {engine[:16]!r}", ["matrix", "--format", "json", "--engine", engine]))
    for name in ("rules", "x", "", "../rules", "rules\n", "\x1b[31m"):
        inputs.append(Input(f"schema {name!r}", ["schema", name]))
    inputs += [
        Input("schema --write ''", ["schema", "--write", ""]),
        Input("schema --write /dev/full", ["schema", "--write", "/dev/full"]),
        Input("schema --write a file", ["schema", "--write", "@D/f"], files={"f": "OLD"}),
        Input("check --sarif-file a FIFO", ["check", "--no-coverage", "--sarif-file", "@D/fifo"], setup=_fifo("fifo")),
        Input("check --sarif-file a folder", ["check", "--no-coverage", "--sarif-file", "@D"]),
        Input("check --sarif-file ''", ["check", "--no-coverage", "--sarif-file", ""]),
        Input("check --sarif-file /dev/full", ["check", "--no-coverage", "--sarif-file", "/dev/full"]),
    ]
    return inputs


#: The classes of the round-four report, in its order, and their generators.
CLASSES: Final[dict[str, Callable[[], list[Input]]]] = {
    "proof lock and certificates: concurrency, kills, tampering": proof_inputs,
    "bench --report / --emit-policy": bench_inputs,
    "engine venvs: release strings, planted caches": venv_inputs,
    "scoped walk / diff cost of small operator files": scoped_inputs,
    "YAML in every YAML input (10 commands x 18 files)": yaml_inputs,
    "locales, output encodings, non-UTF-8 names": locale_inputs,
    "stdin - and /dev/stdin (every path option)": stdin_inputs,
    "launch lines: SGLang and vLLM flags, quoting": launch_inputs,
    "fleet --from: lying or conflicting nodes": fleet_inputs,
    "environment variables (12 x 20), NO_CACHE, CUDA_HOME": environment_inputs,
    "odd process state: cwd, limits, warnings, fds, --jobs": process_inputs,
    "full disk: a file-size limit on every write": disk_inputs,
    "long argv": argv_inputs,
    "the plugins in an odd environment": plugin_inputs,
    "completion, --engine and schema strings, --sarif-file": strings_inputs,
}


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELPOLICY_")}
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("HF_HUB_CACHE", None)
    env.pop("PYTHONWARNINGS", None)
    return env


def _sub(text: str, d: Path) -> str:
    return text.replace("@D", str(d))


def _snapshot(d: Path) -> dict[Path, str]:
    """Every regular file of *d* outside its cache, by content (large ones by size)."""
    seen: dict[Path, str] = {}
    for path in d.rglob("*"):
        if path.is_relative_to(d / "cache") or path.name in (".out", ".err"):
            continue
        try:
            if not path.is_file() or path.is_symlink():
                continue
            size = path.stat().st_size
            seen[path] = f"size {size}" if size > 8_000_000 else hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            continue
    return seen


def _limits(rlimits: tuple[tuple[int, int], ...]) -> Callable[[], None]:
    def apply() -> None:
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))

    return apply


#: Runs the input as its own child and writes that child's CPU seconds and peak memory (KB) to
#: the file named first, then exits as the child did. Linux gives a process the peak memory of the
#: one that forked it (the memory map is copied, its high-water mark with it, and exec keeps it):
#: an input started straight from a test process that once held a gigabyte would measure a
#: gigabyte. This small process is what the input is forked from.
_LAUNCHER: Final = """
import json, os, signal, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump([usage.ru_utime + usage.ru_stime, usage.ru_maxrss], f)
code = os.waitstatus_to_exitcode(status)
if code < 0:  # killed: so is this one, by the same signal
    try:
        signal.signal(-code, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), -code)
os._exit(code)
"""


def run_input(inp: Input, d: Path, warm: Path | None = None) -> Outcome:
    """Run *inp* in its own folder *d* (made here): what it did, and each contract it broke."""
    d.mkdir(parents=True)
    cache = d / "cache"
    if inp.warm and warm is not None:
        shutil.copytree(warm, cache)
    else:
        cache.mkdir(mode=0o700)
    for name, content in inp.files.items():
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(_sub(content, d), encoding="utf-8")
        else:
            path.write_bytes(content.replace(b"@D", os.fsencode(d)))
    if inp.setup is not None:
        inp.setup(d)
    before = _snapshot(d)
    env = {**_base_env(), "KERNELPOLICY_CACHE_DIR": str(cache)}
    for key, value in inp.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = _sub(value, d)
    cmd = [sys.executable, "-c", inp.script] if inp.script else [sys.executable, "-m", "kernelpolicy"]
    cmd += [_sub(a, d) for a in inp.argv]
    if inp.wrap:
        cmd = ["sh", "-c", _sub(inp.wrap, d), "sh", *cmd]
    usage_file = d / ".usage"
    cmd = [sys.executable, "-c", _LAUNCHER, str(usage_file), *cmd]  # the input's own memory (see _LAUNCHER)
    idle: int | None = None
    stdin: int | None = subprocess.DEVNULL
    if inp.stdin == "idle":
        stdin, idle = os.pipe()
    elif isinstance(inp.stdin, bytes):
        stdin = subprocess.PIPE
    started = time.perf_counter()
    with (d / ".out").open("wb") as out, (d / ".err").open("wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=d,
            env=env,
            stdin=stdin,
            stdout=out,
            stderr=err,
            start_new_session=True,
            # only setrlimit runs between fork and exec (no lock is taken there)
            preexec_fn=_limits(inp.rlimits) if inp.rlimits else None,  # noqa: PLW1509
        )
    if isinstance(stdin, int) and idle is not None:
        os.close(stdin)
    if proc.stdin is not None and isinstance(inp.stdin, bytes):
        payload = inp.stdin

        def feed(pipe: Any = proc.stdin) -> None:
            with contextlib.suppress(OSError):
                pipe.write(payload)
                pipe.close()

        threading.Thread(target=feed, daemon=True).start()
    hung = threading.Event()

    def kill() -> None:
        hung.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(KILL_S, kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall = time.perf_counter() - started
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    if idle is not None:
        os.close(idle)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything it left running
    text = (d / ".err").read_bytes().decode("utf-8", "replace")
    cpu, kb = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
    with contextlib.suppress(OSError, ValueError):  # killed before it could say: the launcher's own
        cpu, kb = json.loads(usage_file.read_text(encoding="utf-8"))
        usage_file.unlink()
    result = Outcome(code, wall, cpu, kb / 1024, text)
    if inp.cleanup is not None:
        inp.cleanup(d)
    lines = [line for line in text.splitlines() if line.strip()]
    if hung.is_set():
        result.breaches.append(f"no end in {KILL_S:.0f} s")
    elif code not in inp.codes:
        result.breaches.append(f"status {code}")
    if "Traceback" in text or "internal error" in text:
        result.breaches.append("a traceback or an internal error")
    if code == 2 and inp.one_line and len(lines) != 1:
        result.breaches.append(f"{len(lines)} lines on stderr for a refusal")
    if result.cpu > LIMIT_CPU_S:
        result.breaches.append(f"{result.cpu:.1f} s of CPU")
    if result.mb > LIMIT_MB:
        result.breaches.append(f"{result.mb:.0f} MB")
    if any(p.name == PWN for p in d.rglob(PWN)):
        result.breaches.append("something was executed")
    allowed = {d / w for w in inp.writes} if code in (0, 1) else set()
    after = _snapshot(d)
    lost = [p.name for p, digest in before.items() if p not in allowed and after.get(p) != digest]
    if lost:
        result.breaches.append(f"lost or changed: {', '.join(lost[:3])}")
    if inp.after is not None and not hung.is_set():
        why = inp.after(d, result)
        if why:
            result.breaches.append(why)
    return result


def _warm_cache(root: Path) -> Path:
    """A cache folder holding the shipped tables' certificate and compiled policy (what any user
    who ran ``check`` once has), copied into the inputs marked warm."""
    warm = root / "warm"
    env = {**_base_env(), "KERNELPOLICY_CACHE_DIR": str(warm)}
    for argv in (["check"], [*SEED]):
        subprocess.run(
            [sys.executable, "-m", "kernelpolicy", *argv], env=env, capture_output=True, check=False, cwd=root
        )
    return warm


@dataclass
class ClassFigures:
    """One class's figures: inputs, statuses, how many kept the contract, the worst of each."""

    inputs: int = 0
    codes: set[int] = field(default_factory=set)
    kept: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    mb: float = 0.0
    broken: list[tuple[str, Outcome]] = field(default_factory=list)

    def add(self, label: str, out: Outcome) -> None:
        self.inputs += 1
        self.codes.add(out.code)
        self.kept += not out.breaches
        self.wall, self.cpu, self.mb = max(self.wall, out.wall), max(self.cpu, out.cpu), max(self.mb, out.mb)
        if out.breaches:
            self.broken.append((label, out))


def run_classes(
    classes: dict[str, list[Input]], jobs: int = 2, progress: Callable[[str], None] | None = None
) -> dict[str, ClassFigures]:
    """Run every input of *classes*, *jobs* at a time, each in its own folder and cache."""
    from concurrent.futures import ThreadPoolExecutor

    figures = {name: ClassFigures() for name in classes}
    todo = [(name, inp) for name, inputs in classes.items() for inp in inputs]
    with tempfile.TemporaryDirectory(prefix="kp-hostile-") as tmp:
        root = Path(tmp)
        warm = _warm_cache(root) if any(inp.warm for _, inp in todo) else None
        started = time.perf_counter()

        def one(i: int) -> tuple[int, Outcome]:
            _, inp = todo[i]
            d = root / f"i{i:04d}"
            try:
                out = run_input(inp, d, warm)
            finally:
                _remove(d)
            return i, out

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for done, (i, out) in enumerate(pool.map(one, range(len(todo))), 1):
                name, inp = todo[i]
                figures[name].add(inp.label, out)
                if progress is not None and out.breaches:
                    progress(f"  broke: {inp.label}: {'; '.join(out.breaches)} (exit {out.code})")
                if progress is not None and (done % 50 == 0 or done == len(todo)):
                    broken = sum(len(f.broken) for f in figures.values())
                    progress(
                        f"  {done}/{len(todo)} inputs, {broken} broke the contract,"
                        f" {time.perf_counter() - started:.0f} s"
                    )
    return figures


def _remove(d: Path) -> None:
    def writable(func: Any, path: str, exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            func(path)

    shutil.rmtree(d, onerror=writable)


def round_four(jobs: int = 2, only: str | None = None, label: str | None = None) -> int:
    """Run every class (or the classes whose name holds *only*, the inputs whose label holds
    *label*) and print the figures; the number of inputs that broke the contract."""
    classes = {name: make() for name, make in CLASSES.items() if only is None or only in name}
    if label is not None:
        classes = {name: [i for i in inputs if label in i.label] for name, inputs in classes.items()}
        classes = {name: inputs for name, inputs in classes.items() if inputs}
    total = sum(map(len, classes.values()))
    print(
        f"{total} inputs in {len(classes)} classes, {jobs} at a time; the contract: a documented status, "
        f"one line for a refusal, < {LIMIT_CPU_S:.0f} s of CPU, < {LIMIT_MB:.0f} MB, nothing executed or lost",
        flush=True,
    )
    figures = run_classes(classes, jobs, lambda line: print(line, flush=True))
    print(
        f"{'class (hostile round four)':<58} {'inputs':>6}  {'exit':<12} {'kept':>6} {'wall s':>7} {'cpu s':>6}"
        f" {'peak MB':>8}"
    )
    for name, f in figures.items():
        shown = ",".join(str(c) for c in sorted(f.codes))
        print(f"{name:<58} {f.inputs:>6}  {shown:<12} {f.kept:>6} {f.wall:7.2f} {f.cpu:6.2f} {f.mb:8.0f}")
    inputs = sum(f.inputs for f in figures.values())
    kept = sum(f.kept for f in figures.values())
    print(
        f"{'all':<58} {inputs:>6}  {'':<12} {kept:>6} "
        f"{max(f.wall for f in figures.values()):7.2f} {max(f.cpu for f in figures.values()):6.2f} "
        f"{max(f.mb for f in figures.values()):8.0f}"
    )
    broken = [(name, what, out) for name, f in figures.items() for what, out in f.broken]
    if broken:
        print(f"\n{len(broken)} inputs broke the contract:")
        for name, what, out in broken:
            first = next((line for line in out.err.splitlines() if line.strip()), "")
            print(f"  [{name.split(':')[0]}] {what}: {'; '.join(out.breaches)} (exit {out.code}) {first[:160]}")
    return len(broken)


if __name__ == "__main__":
    main()
