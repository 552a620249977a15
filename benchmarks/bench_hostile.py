"""Print the scale figures of hostile input (issue 26, N16) and, per class of hostile round four
(issue 38), the inputs tried with the worst time and memory; no assertions: figures, not tests.

    python benchmarks/bench_hostile.py [--round-four]

- a serve line of N ignored ``--foo 1`` pairs, parsed (``_parse_serve``) and its warning's length;
- ``kernelpolicy fmt`` and ``fmt --check`` of a 3,000-rule file;
- ``kernelpolicy explain`` with a 7,000-rule operator policy, the rule cache off.

tests/hostile/test_scale.py bounds the work (flags per argparse call, finding comparisons, layout
passes); this prints the time it takes on this machine.

``--round-four`` runs, as a user would (a new process, its own cache folder, 60 s at most each),
inputs of each class of the round-four report (``tests/hostile/`` holds one test per defect): per
class, how many inputs, the exit statuses, the worst wall time and the worst peak memory of the
child. Every input should end in a documented exit status with one line, in under 5 s and 1 GB.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from kernelpolicy.deployment.serve import _parse_serve, ignored_note


def _cli(*argv: str) -> float:
    env = {**os.environ, "KERNELPOLICY_NO_CACHE": "1", "HF_HUB_OFFLINE": "1"}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kernelpolicy", *argv], check=False, capture_output=True, env=env)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round-four", action="store_true", help="only the round-four classes")
    args = ap.parse_args()
    print(f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    if args.round_four:
        round_four()
        return
    scale()


def scale() -> None:
    for pairs in (4_000, 16_000, 50_000):
        tokens = ["vllm", "serve", "m", *["--foo", "1"] * pairs]
        t = time.perf_counter()
        serve = _parse_serve(tokens)
        took = time.perf_counter() - t
        print(f"serve line, {pairs:>6} ignored pairs: {took:6.2f} s, warning {len(ignored_note(serve.ignored))} chars")
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "r3000.yaml"
        rules.write_text(
            "rules:\n"
            + "".join(
                f"  - id: op-r{i}\n    when: {{gpu.sm: sm90, model.type: m{i}}}\n    deny: marlin\n"
                f"    severity: perf\n    because: reason {i}\n    refs: [vllm#{i}]\n"
                for i in range(3_000)
            ),
            encoding="utf-8",
        )
        print(f"fmt, 3,000 rules: {_cli('fmt', str(rules)):6.2f} s")
        print(f"fmt --check, 3,000 rules (laid out): {_cli('fmt', '--check', str(rules)):6.2f} s")
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
        print(f"explain, 7,000-rule policy, uncached: {_cli(*seed, '--policy', str(policy)):6.2f} s")


#: An input: its argv after ``kernelpolicy`` (made in a scratch folder), extra environment, stdin.
_Input = tuple[list[str], dict[str, str], bytes | None]

_SEED = ["--gpu", "H200", "--model", "deepseek-ai/DeepSeek-V3", "--no-env"]
_SGLANG = ["--", "python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3"]
_HOLES = """rules:
  - {id: ops-a, when: {gpu.family: sm90}, deny: triton, paths: [moe], severity: accuracy, because: ours}
  - {id: ops-b, when: {gpu.family: sm90}, deny: marlin, paths: [moe], severity: accuracy, because: ours}
  - {id: ops-c, when: {vllm.version: "<0.30"}, deny: vllm_cutlass, paths: [moe], severity: accuracy, because: x}
  - {id: ops-d, when: {deploy.ep: ">= 2"}, deny: deep_gemm, paths: [moe], severity: accuracy, because: ours}
"""


def _classes(tmp: Path) -> dict[str, list[_Input]]:
    """Inputs of each round-four class, written under *tmp*."""
    holes = tmp / "holes.yaml"
    holes.write_text(_HOLES, encoding="utf-8")
    family = tmp / "family.yaml"
    family.write_text(
        "rules:\n  - {id: ops-moe, when: {model.is_moe: true}, deny: triton, paths: [moe],"
        " severity: perf, because: x}\n",
        encoding="utf-8",
    )
    bomb = tmp / "bomb.yaml"
    bomb.write_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
        encoding="utf-8",
    )
    deep = tmp / "deep.yaml"
    deep.write_text("rules: " + "[" * 10_000 + "]" * 10_000 + "\n", encoding="utf-8")
    nul = tmp / "nul.yaml"
    nul.write_bytes(b"rules:\n  - id: x\x00\n")
    wide = tmp / "wide.yaml"
    wide.write_text("rules: [" + ", ".join(["{id: x, deny: triton}"] * 40_000) + "]\n", encoding="utf-8")
    odd = Path(os.fsdecode(bytes(tmp) + b"/pol\xff.yaml"))
    odd.write_text("rules: []\n", encoding="utf-8")
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    node = tmp / "node.json"
    node.write_text('{"facts": {"gpu.sm": "sm121", "deploy.moe_backend": "deep_gemm"}}', encoding="utf-8")
    report = tmp / "report.json"
    report.write_text('{"schema": "kernelpolicy.bench/1", "us": 1e999}', encoding="utf-8")
    return {
        "the proof: operator files (a hole-leaving file, a family-wide rule)": [
            (["check", "--strict", str(holes)], {}, None),
            (["check", "--strict", str(family)], {}, None),
            (["diff", str(family), str(holes)], {}, None),
        ],
        "YAML bombs, nesting, NUL bytes, 40,000-entry lines": [
            ([cmd, *args, str(f)], {}, None)
            for f in (bomb, deep, nul, wide)
            for cmd, args in (("explain", [*_SEED, "--policy"]), ("check", ["--no-coverage"]))
        ],
        "names that are not UTF-8, output encodings": [
            (["explain", *_SEED, "--policy", os.fsdecode(odd)], {}, None),
            (["explain", *_SEED], {"PYTHONIOENCODING": "ascii", "LC_ALL": "C"}, None),
        ],
        "FIFOs and devices where a file goes": [
            (["bench", "--report", str(fifo), "--emit-policy", str(tmp / "out.yaml")], {}, None),
            (["bench", "--report", "/dev/zero", "--emit-policy", str(tmp / "out.yaml")], {}, None),
            (["check", "--no-coverage", "--sarif-file", str(fifo)], {}, None),
            (["bench", "--report", str(report), "--emit-policy", str(tmp / "out.yaml")], {}, None),
        ],
        "engine venvs: loose release strings": [
            (["vllm", "venv", v], {}, None) for v in ("0.34.0..", "\uff10.34.0", "0.34.0+cpu")
        ],
        "launch lines and node files": [
            (["explain", "--gpu", "H200", "--no-env", *_SGLANG, "--moe", "x"], {}, None),
            (["explain", "--gpu", "H200", "--no-env", *_SGLANG, "--moe-runner-backend", "x"], {}, None),
            (["fleet", "--model", "deepseek-ai/DeepSeek-V3", "--from", str(node)], {}, None),
        ],
        "environment variables and numbers": [
            (["explain", *_SEED], {"KERNELPOLICY_NO_CACHE": "maybe"}, None),
            (["explain", "--gpu", "\uff11\uff12.\uff11", "--model", "deepseek-ai/DeepSeek-V3", "--no-env"], {}, None),
            (["explain", *_SEED, "--fact", "vllm.version=" + "9" * 5_000], {}, None),
        ],
        "long command lines (20,000 options)": [
            (["explain", *_SEED, *[a for i in range(20_000) for a in ("--fact", f"deploy.env.X{i}=1")]], {}, None),
        ],
    }


def _run(argv: Sequence[str], env: dict[str, str], stdin: bytes | None, cache: Path) -> tuple[int, float, float]:
    """Exit status, wall seconds and the peak memory (MB) of one input's own process."""
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "KERNELPOLICY_CACHE_DIR": str(cache), **env}
    full.pop("KERNELPOLICY_POLICY", None)
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelpolicy", *argv],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=full,
    )
    if proc.stdin is not None:
        proc.stdin.write(stdin or b"")
        proc.stdin.close()
    timer = threading.Timer(60, proc.kill)  # a hang is shown as -9 after a minute
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not the largest so far
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - t, usage.ru_maxrss / 1024


_Runner = Callable[[Sequence[str], dict[str, str], bytes | None, Path], tuple[int, float, float]]


def round_four(
    run: Callable[[Sequence[str], dict[str, str], bytes | None, Path], tuple[int, float, float]] = _run,
) -> None:
    print(f"{'class (hostile round four)':<64} {'inputs':>6}  {'exit':<12} {'worst s':>8} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, inputs in _classes(Path(tmp)).items():
            codes: set[int] = set()
            worst = 0.0
            peak = 0.0
            for argv, env, stdin in inputs:
                code, took, mb = run(argv, env, stdin, Path(tmp) / "cache")
                codes.add(code)
                worst, peak = max(worst, took), max(peak, mb)
            shown = ",".join(str(c) for c in sorted(codes))
            print(f"{name:<64} {len(inputs):>6}  {shown:<12} {worst:8.2f} {peak:8.0f}", flush=True)


if __name__ == "__main__":
    main()
