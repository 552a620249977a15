"""``python -m kernelpolicy.tools.refresh``: every generated table re-made for new engine releases,
in one command, then the diff reviewed like any change.

What kernelpolicy knows of each release is read from the release itself, by one scanner per
source, each runnable on its own; this runs them in their order:

1. vLLM's wheels and source tarballs (``releases/vllm/_scan``: kernel tables, MoE oracles,
   environment, pins; ``--published`` lists the index's releases);
2. SGLang's wheels (``releases/sglang/_scan``: flags, selection points, pins, and each release's
   launch-parser option strings; ``_overrides``: its per-model MoE overrides and automatic
   block-FP8 choice);
3. with engine venvs (``--venv``): each vLLM release's serve-line options from its own parser
   (``engines/vllm/testing/options``) and its attention order from its selector
   (``releases/vllm/_scan_attention``);
4. the kernel packages the rules cite fixes in (``releases/packages/_scan``: which published
   release shows each fix);
5. the rule files, tables and docs generated from all of it (``python -m kernelpolicy._docs``).

``--plan`` prints the commands instead of running them; ``--offline`` downloads nothing (the
cached wheels and archives are scanned again). The first failing step stops the run with its
exit status.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Final

__all__ = ["commands", "fetches", "main", "scans"]

#: where the scans keep downloaded wheels (the vLLM scan's own download folder holds vLLM's)
_SGLANG_WHEELS: Final = "wheels"


def _sglang_wheels(extra: list[str], offline: bool) -> tuple[list[list[str]], list[str]]:
    """The downloads of the SGLang releases *extra* (none offline) and every cached SGLang wheel
    the scans read (the new ones included)."""
    from .._paths import cache_subdir

    folder = cache_subdir(_SGLANG_WHEELS)
    downloads = [
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux_2_34_x86_64",
            "-d",
            str(folder),
            f"sglang=={v}",
        ]
        for v in ([] if offline else extra)
    ]
    cached = sorted(str(p) for p in folder.glob("sglang-*.whl")) if folder.is_dir() else []
    wanted = [f"{folder}/sglang-{v}-<wheel>" for v in extra if not any(f"/sglang-{v}-" in c for c in cached)]
    return downloads, cached + wanted


def _site_packages(python: str) -> str:
    done = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def fetches(vllm: list[str], sglang: list[str], *, offline: bool) -> list[list[str]]:
    """The steps that download (none offline): vLLM's scan of the new releases (it downloads them
    itself) and the new SGLang wheels."""
    out: list[list[str]] = []
    if vllm and not offline:
        out.append([sys.executable, "-m", "kernelpolicy.releases.vllm._scan", "--published", "--download", *vllm])
    out += _sglang_wheels(sglang, offline)[0]
    return out


def scans(sglang: list[str], venvs: list[str], *, offline: bool) -> list[list[str]]:
    """The steps that read what is cached, then generate (see the module docstring); run after
    :func:`fetches`, so the SGLang wheels it downloaded are among those read."""
    py = sys.executable
    out: list[list[str]] = []
    wheels = _sglang_wheels(sglang, offline=True)[1]
    if wheels:
        out.append([py, "-m", "kernelpolicy.releases.sglang._scan", *([] if offline else ["--published"]), *wheels])
        out.append([py, "-m", "kernelpolicy.releases.sglang._overrides", *wheels])
    if venvs:
        out.append([py, "-m", "kernelpolicy.engines.vllm.testing.options", *venvs])
        out.append(
            [py, "-m", "kernelpolicy.releases.vllm._scan_attention", "--write", *(_site_packages(v) for v in venvs)]
        )
    out.append([py, "-m", "kernelpolicy.releases.packages._scan", *(["--offline"] if offline else [])])
    out.append([py, "-m", "kernelpolicy._docs"])
    return out


def commands(vllm: list[str], sglang: list[str], venvs: list[str], *, offline: bool) -> list[list[str]]:
    """The commands of one refresh, in order (a wheel not downloaded yet shows as ``<wheel>``)."""
    return [*fetches(vllm, sglang, offline=offline), *scans(sglang, venvs, offline=offline)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernelpolicy.tools.refresh", description=__doc__.split("\n\n")[0])
    p.add_argument("--vllm", nargs="+", default=[], metavar="X.Y.Z", help="vLLM releases to download and scan")
    p.add_argument(
        "--sglang",
        nargs="+",
        default=[],
        metavar="X.Y.Z",
        help="SGLang releases to download (then every cached one is scanned)",
    )
    p.add_argument(
        "--venv",
        nargs="+",
        default=[],
        metavar="PYTHON",
        help="pythons of vLLM venvs (their parser options and attention order)",
    )
    p.add_argument("--offline", action="store_true", help="download nothing: scan what is cached")
    p.add_argument("--plan", action="store_true", help="print the commands, run none")
    args = p.parse_args(argv)
    root = Path(__file__).resolve().parents[3]
    if args.plan:
        try:
            steps = commands(args.vllm, args.sglang, args.venv, offline=args.offline)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"kernelpolicy: error: a venv given with --venv does not answer: {exc}", file=sys.stderr)
            return 2
        for step in steps:
            print("$ " + " ".join(shlex.quote(w) for w in step))
        return 0
    for phase in ("fetch", "scan"):
        try:
            steps = (
                fetches(args.vllm, args.sglang, offline=args.offline)
                if phase == "fetch"
                else scans(args.sglang, args.venv, offline=args.offline)
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"kernelpolicy: error: a venv given with --venv does not answer: {exc}", file=sys.stderr)
            return 2
        for step in steps:
            print("$ " + " ".join(shlex.quote(w) for w in step), flush=True)
            code = subprocess.run(step, cwd=root, check=False).returncode
            if code != 0:
                print(f"kernelpolicy: error: the step above exited {code}; nothing after it ran", file=sys.stderr)
                return code
    print("done: review `git diff` (src/kernelpolicy/releases/, rules/, docs/, README.md) like any change")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
