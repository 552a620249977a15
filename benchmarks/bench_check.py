"""``kernelpolicy check`` and ``diff`` as the compiled proof runs them, then a growth series.

    python benchmarks/bench_check.py [--repeat R] [--no-growth] [--record]

Prints, with the machine and the date (figures, not assertions; the median of R runs, default 3):

- ``check --strict --all-findings policy/examples/fleet.yaml`` cold (a fresh cache folder: no
  certificate) and warm (its certificate), end to end: a new process, as a user runs it, with the
  process's peak memory;
- operator files, cold, end to end: the example policy's first rule, one rule scoped to a whole
  model family (every MoE model on every GPU), and four rules that leave holes on the MoE path
  (the file that took the walk past 5.9 GB);
- ``diff`` of two operator policies (the example's first rule against its first two), end to end;
- a growth series of *distinct* knowledge on top of the shipped tables: copies of a rule are free
  for a hash-consed diagram and prove nothing, so the series adds, per round, one rule per shipped
  deny/require rule with a new condition (a shipped rule's condition with one test moved to another
  fact and value, drawn with a fixed seed), a new release boundary beside every version a rule
  names, and rules on facts no rule reads today (new dimensions): x2 is one round, x3 two; nodes
  per path and seconds of the proof in this process.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _figures import Recorder, add_record_option
from packaging.version import Version

from kernelpolicy.analysis.coverage import verify
from kernelpolicy.analysis.domain import build_domain
from kernelpolicy.analysis.mdd import DiagramTooLarge
from kernelpolicy.dsl._source import SourceFile
from kernelpolicy.dsl.loader import discover, load_files
from kernelpolicy.facts.keys import Kind, lookup_key

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "policy" / "examples" / "fleet.yaml"

FAMILY_WIDE = [
    {
        "id": "ops-no-deep_gemm-moe-anywhere",
        "when": {"model.is_moe": True},
        "deny": "deep_gemm",
        "paths": ["moe"],
        "severity": "perf",
        "because": "a rule scoped to every MoE model on every GPU",
    }
]
HOLES = [
    {"id": f"ops-hole-{i}", "when": when, "deny": backend, "paths": ["moe"], "severity": "accuracy", "because": "x"}
    for i, (when, backend) in enumerate(
        (
            ({"gpu.family": "sm90"}, "triton"),
            ({"gpu.family": "sm90"}, "marlin"),
            ({"vllm.version": "<0.30"}, "vllm_cutlass"),
            ({"deploy.ep": ">= 2"}, "deep_gemm"),
        )
    )
]


def _cli(args: list[str], cache: Path) -> tuple[float, float, int]:
    """Seconds, peak MB and exit status of ``kernelpolicy ARGS`` in a new process."""
    env = {**os.environ, "KERNELPOLICY_CACHE_DIR": str(cache)}
    env.pop("KERNELPOLICY_NO_CACHE", None)
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelpolicy", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)  # this process's own peak, not the largest child so far
    seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, proc.returncode


FIG: Recorder = Recorder("benchmarks/bench_check.py", record=False)


def _median(args: list[str], repeat: int, warm: bool = False, key: str = "", what: str = "") -> str:
    times, peaks, codes = [], [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat + (1 if warm else 0)):
            cache = Path(tmp) / ("cache" if warm else f"cache{i}")
            seconds, peak, rc = _cli(args, cache)
            if warm and i == 0:
                continue  # the run that writes the certificate
            times.append(seconds)
            peaks.append(peak)
            codes.add(rc)
    if key:
        FIG.add(f"{key}", statistics.median(times), "s", what)
        FIG.add(f"{key}.peak", max(peaks), "MB", f"{what} (peak memory)")
    return f"{statistics.median(times):6.2f} s  peak {max(peaks):5.0f} MB  exit {sorted(codes)}"


class _Dumper(yaml.SafeDumper):
    """Writes shared objects out in full: rule files allow no anchors or aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _write(into: Path, name: str, rules: list[dict[str, Any]]) -> Path:
    target = into / name
    target.write_text(yaml.dump({"rules": rules}, Dumper=_Dumper, sort_keys=False))
    return target


def end_to_end(repeat: int) -> None:
    rules = yaml.safe_load(EXAMPLE.read_text())["rules"]
    fleet = ["check", "--strict", "--all-findings", str(EXAMPLE)]
    what = "check --strict --all-findings fleet.yaml, cold:"
    print(f"{what} {_median(fleet, repeat, key='check.fleet.cold', what=what)}", flush=True)
    what = "check --strict --all-findings fleet.yaml, warm:"
    print(f"{what} {_median(fleet, repeat, warm=True, key='check.fleet.warm', what=what)}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "one-rule.yaml": _write(Path(tmp), "one-rule.yaml", rules[:1]),
            "family-wide.yaml": _write(Path(tmp), "family-wide.yaml", FAMILY_WIDE),
            "four-holes.yaml": _write(Path(tmp), "four-holes.yaml", HOLES),
        }
        for name, path in files.items():
            what = f"check {name}, cold:"
            key = f"check.{name.removesuffix('.yaml')}.cold"
            print(f"{what} {_median(['check', str(path)], repeat, key=key, what=what)}", flush=True)
        two = _write(Path(tmp), "two-rules.yaml", rules[:2])
        diff = ["diff", str(files["one-rule.yaml"]), str(two)]
        what = "diff one-rule.yaml two-rules.yaml:"
        print(f"{what} {_median(diff, repeat, key='diff.two-rules', what=what)}", flush=True)


# --------------------------------------------------------------------------- growth


def _value_test(key: str, value: Any, rng: random.Random) -> Any:
    fk = lookup_key(key)
    if fk is None:
        return None
    if fk.kind is Kind.VERSION:
        return f"{rng.choice(('>=', '<'))}{value}"
    if fk.kind is Kind.INT and isinstance(value, int):
        return f"{rng.choice(('>=', '<'))} {value}"
    if fk.kind in (Kind.ENUM, Kind.STR, Kind.BOOL):
        return value
    return None


def grown(files: list[SourceFile], into: Path, rounds: int, seed: int = 20261205) -> list[SourceFile]:
    """*files* with *rounds* times as much distinct knowledge again (see the module docstring)."""
    policy = load_files(files)
    domain = build_domain(policy)
    rng = random.Random(seed)
    dims = [d for d in domain.dims if d.name not in ("model.is_moe",) and len(d.keys) == 1]
    paths = {p: list(entries) for p, entries in policy.backends.items() if entries}
    shipped = [r for r in policy.rules if r.kind in ("deny", "require") and r.layer == "shipped"]
    unread = [k for k in domain.pruned if (fk := lookup_key(k)) is not None and fk.kind in (Kind.BOOL, Kind.VERSION)]
    conditions = [
        r["when"]
        for f in files
        if f.layer == "shipped"
        for doc in [yaml.safe_load(f.read_text())]
        if isinstance(doc, dict)
        for r in doc.get("rules", ()) or ()
        if isinstance(r, dict) and isinstance(r.get("when"), dict) and ("deny" in r or "require" in r)
    ]
    out = list(files)
    for n in range(rounds):
        rules: list[dict[str, Any]] = []

        def rule(when: dict[str, Any], i: int, kind: str, into: list[dict[str, Any]] = rules, n: int = n) -> None:
            path = rng.choice(sorted(paths))
            into.append(
                {
                    "id": f"grown-{n}-{kind}-{i}",
                    "when": when,
                    "deny": rng.choice(paths[path]),
                    "paths": [path],
                    "severity": rng.choice(("perf", "accuracy", "support")),
                    "because": "generated for the growth series",
                    "refs": ["bench#1"],
                }
            )

        for i in range(len(shipped)):  # new conditions: a shipped rule's, one test moved to another fact
            when = dict(rng.choice(conditions))
            if when:
                del when[rng.choice(sorted(when))]
            d = rng.choice(dims)
            known = [v for v in d.values if v.facts]
            test = _value_test(d.keys[0], rng.choice(known).facts[d.keys[0]], rng) if known else None
            if test is not None:
                when[d.keys[0]] = test
            if when:
                rule(when, i, "rule")
        versions = [d for d in dims if getattr(lookup_key(d.keys[0]), "kind", None) is Kind.VERSION]
        for i, d in enumerate(versions):  # a new boundary beside each version a rule names
            for j, v in enumerate(x for x in d.values if x.facts):
                raw = str(v.facts[d.keys[0]])
                rule(
                    {d.keys[0]: f">={_beside(raw, n + 1)}", "gpu.sm": rng.choice(("sm90", "sm100", "sm120"))},
                    i * 100 + j,
                    "release",
                )
        for i, key in enumerate(rng.sample(unread, min(len(unread), 20))):  # facts no rule reads yet
            fk = lookup_key(key)
            assert fk is not None
            rule({key: True if fk.kind is Kind.BOOL else ">=1.0", "gpu.sm": rng.choice(("sm90", "sm100"))}, i, "fact")
        target = _write(into, f"grown-{n}.yaml", rules)
        out.append(SourceFile(target, f"rules/grown-{n}.yaml", "shipped"))
    return out


def _beside(raw: str, n: int) -> str:
    """A release just after *raw* (its n-th post release; ``0.6.16.post3`` -> ``0.6.16.post(3+n)``)."""
    v = Version(raw)
    base = ".".join(str(x) for x in v.release)
    return f"{base}.post{(v.post or 0) + n}"


def growth(repeat: int) -> None:
    base = discover([str(EXAMPLE)], environ=False)
    with tempfile.TemporaryDirectory() as tmp:
        for name, rounds in (("shipped + fleet.yaml", 0), ("x2 distinct knowledge", 1), ("x3 distinct knowledge", 2)):
            files = grown(base, Path(tmp), rounds)
            policy = load_files(files)
            times = []
            cov = None
            try:
                for _ in range(repeat):
                    t = time.perf_counter()
                    cov = verify(policy)
                    times.append(time.perf_counter() - t)
            except DiagramTooLarge as exc:
                print(f"{name:<22} rules {len(policy.rules):4}  stopped: {exc}", flush=True)
                return
            assert cov is not None
            nodes = ", ".join(f"{p} {n:,}" for p, n in cov.nodes.items())
            FIG.add(f"check.growth.x{rounds + 1}", statistics.median(times), "s", f"{name} (the proof in process)")
            print(
                f"{name:<22} rules {len(policy.rules):4}  dimensions {len(cov.domain.dims):3}"
                f"  cells ~10^{len(str(cov.cells)) - 1}"
                f"  nodes {nodes}  {statistics.median(times):6.2f} s",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-growth", action="store_true", help="leave out the growth series")
    add_record_option(ap)
    args = ap.parse_args()
    FIG.record = args.record
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}: "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average {load[0]:.1f}",
        flush=True,
    )
    end_to_end(args.repeat)
    if not args.no_growth:
        growth(args.repeat)
    FIG.save()


if __name__ == "__main__":
    main()
