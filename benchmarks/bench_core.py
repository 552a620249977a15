"""Print the design-target figures of docs/design.md (no assertions: figures, not tests).

    python benchmarks/bench_core.py [--record]

- ``import kernelpolicy`` in a fresh interpreter;
- shipped rules loaded, validated and compiled (``load_policy``);
- one full decision, not cached, and a cached one;
- ``kernelpolicy explain ... --json`` end to end, beside a bare
  ``python -c "import pydantic, yaml, packaging.version"``, the two run in turn.

kernelpolicy's modules are byte-compiled first, as ``pip install`` compiles an installed package
(an editable install under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile every module
from source in every fresh process, while pydantic and yaml load their bytecode).
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _figures import Recorder, add_record_option

import kernelpolicy as kp
from kernelpolicy import resolver
from kernelpolicy.dsl._compile import compile_files
from kernelpolicy.dsl.loader import discover

SEED = ["explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--json"]


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def subprocess_time(argv: list[str], repeat: int = 7) -> float:
    return median_time(lambda: subprocess.run(argv, check=True, capture_output=True), repeat)


_FRESH = (
    "import time, kernelpolicy.facts, kernelpolicy.policy\n"
    "from kernelpolicy.dsl.loader import load_policy\n"
    "t = time.perf_counter(); load_policy(environ=False); print(time.perf_counter() - t)\n"
)


def fresh_load_time(py: str, *, cache: bool, repeat: int = 7) -> float:
    """``load_policy`` in a fresh interpreter (its imports of the facts and policy types aside):
    what a cold ``explain`` pays to have the rules parsed, validated and ready."""
    import os

    env = {**os.environ, "KERNELPOLICY_NO_CACHE": "" if cache else "1"}
    subprocess.run([py, "-c", _FRESH], check=True, capture_output=True, env=env)  # fills the cache
    runs = [
        float(subprocess.run([py, "-c", _FRESH], check=True, capture_output=True, text=True, env=env).stdout)
        for _ in range(repeat)
    ]
    return statistics.median(runs)


def alternate(a: list[str], b: list[str], repeat: int = 15) -> tuple[float, float, float]:
    """Medians of *a* and *b* run in turn, and the median of the per-round ratios a/b."""
    ta, tb = [], []
    for _ in range(repeat):
        ta.append(median_time(lambda: subprocess.run(a, check=True, capture_output=True), 1))
        tb.append(median_time(lambda: subprocess.run(b, check=True, capture_output=True), 1))
    return statistics.median(ta), statistics.median(tb), statistics.median(x / y for x, y in zip(ta, tb, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_record_option(ap)
    args = ap.parse_args()
    py = sys.executable
    compileall.compile_dir(str(Path(kp.__file__).parent), quiet=1)
    imp = subprocess_time([py, "-c", "import kernelpolicy"])
    bare = subprocess_time([py, "-c", "pass"])
    load = median_time(lambda: kp.load_policy(environ=False), 15)
    files = discover(environ=False)
    compile_ = median_time(lambda: compile_files(files), 7)
    policy = kp.load_policy(environ=False)
    cases = [
        kp.facts_for(gpu=g, model=m, policy=policy)
        for g, m in [
            ("sm121", "Qwen/Qwen3.6-35B-A3B-FP8"),
            ("sm121", "deepseek-ai/DeepSeek-V4-Flash"),
            ("sm120", "RedHatAI/gemma-4-31B-it-FP8-block"),
            ("sm90", "deepseek-ai/DeepSeek-V3"),
            ("B200", "openai/gpt-oss-120b"),
        ]
    ]

    def cold() -> None:
        for f in cases:
            resolver._cache.clear()
            kp.resolve(f, policy)

    def warm() -> None:
        for f in cases:
            kp.resolve(f, policy)

    cold_t = median_time(cold, 200) / len(cases)
    warm()
    warm_t = median_time(warm, 2000) / len(cases)
    fresh_cached = fresh_load_time(py, cache=True)
    fresh_cold = fresh_load_time(py, cache=False)
    explain, baseline, ratio = alternate(
        [py, "-m", "kernelpolicy", *SEED], [py, "-c", "import pydantic, yaml, packaging.version"]
    )

    fig = Recorder("benchmarks/bench_core.py", record=args.record)
    rows = [
        (
            "core.import",
            "import kernelpolicy (fresh process, minus bare startup):",
            1e3 * (imp - bare),
            "ms",
            "target < 60 ms",
        ),
        ("core.load", "load_policy (shipped rules + policy/, cached compile):", 1e3 * load, "ms", "target < 30 ms"),
        ("core.compile", "rules compiled from YAML (no cache: first run, or after an edit):", 1e3 * compile_, "ms", ""),
        (
            "core.fresh_cached",
            "rules ready in a fresh process (JSON cache, checked):",
            1e3 * fresh_cached,
            "ms",
            "target < 30 ms",
        ),
        ("core.fresh_cold", "rules ready in a fresh process (no cache: compiled):", 1e3 * fresh_cold, "ms", ""),
        ("core.resolve_cold", "resolve, not cached (median over 5 deployments):", 1e6 * cold_t, "us", "target ~ 20 us"),
        ("core.resolve_warm", "resolve, cached:", 1e6 * warm_t, "us", "target < 2 us"),
        ("core.explain", "explain --json end to end:", 1e3 * explain, "ms", ""),
        ("core.bare_imports", "python -c 'import pydantic, yaml, packaging.version':", 1e3 * baseline, "ms", ""),
        ("core.explain_ratio", "ratio explain / bare imports (median per pair):", ratio, "x", "target <= 1.5x"),
    ]
    for key, what, value, unit, target in rows:
        fig.add(key, value, unit, what)
        digits = 2 if value < 10 else 1
        print(f"{what:<56} {value:8.{digits}f} {unit:<2}   {target}".rstrip())
    fig.save()


if __name__ == "__main__":
    main()
