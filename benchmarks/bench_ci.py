"""What CI costs: a fresh clone of this repository running ``.ci/run``, and the disk its engine
test environments take.

    python benchmarks/bench_ci.py [--record] [--ref REF] [--keep] [--measured SECONDS]

Clones the repository (``git clone`` of this checkout at REF, default ``HEAD``) into a temporary
folder, runs ``.ci/run`` there as CI does (the engine venvs under ``~/.cache/kernelpolicy/venvs``
reused when present, built when absent), and prints the wall time and the exit status; then the
disk the engine venvs take (``du``: hard-linked files counted once). Minutes, not seconds: run it
when the machine is otherwise quiet. The README quotes both figures (``--record`` keeps them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _figures import Recorder, add_record_option

ROOT = Path(__file__).resolve().parents[1]


def _venvs() -> Path:
    base = os.environ.get("KERNELPOLICY_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelpolicy"
    )
    return Path(base) / "venvs"


def _record_venvs(fig: Recorder) -> None:
    venvs = _venvs()
    if venvs.is_dir():
        du = subprocess.run(["du", "-sk", str(venvs)], capture_output=True, text=True, check=True)
        gb = int(du.stdout.split()[0]) * 1024 / 1e9
        print(f"engine test venvs ({venvs}): {gb:.1f} GB")
        fig.add("ci.venvs", gb * 1e3, "MB", "the engine test venvs on disk (hard links counted once)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="HEAD", help="the commit to clone (default HEAD)")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its log")
    ap.add_argument(
        "--measured",
        type=float,
        metavar="SECONDS",
        help="record a fresh-clone run timed elsewhere (the CI service's own figure) instead of running one",
    )
    add_record_option(ap)
    args = ap.parse_args()
    fig = Recorder("benchmarks/bench_ci.py", record=args.record)
    if args.measured is not None:
        print(f"fresh-clone .ci/run (timed by the CI service): {args.measured / 60:.1f} min ({args.measured:.0f} s)")
        fig.add("ci.fresh_clone", args.measured / 60, "min", "fresh-clone .ci/run, timed by the CI service")
        _record_venvs(fig)
        fig.save()
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="kp-ci-"))
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", args.ref], check=True)
    log = tmp / "ci.log"
    print(f"running .ci/run in {clone} (log: {log})", flush=True)
    t = time.perf_counter()
    with log.open("wb") as out:
        rc = subprocess.run(
            [str(clone / ".ci" / "run")], check=False, cwd=clone, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    seconds = time.perf_counter() - t
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-3:]
    print(f"fresh-clone .ci/run: {seconds / 60:.1f} min ({seconds:.0f} s), exit {rc}")
    print("\n".join(f"  {line}" for line in tail))
    if rc == 0:
        fig.add("ci.fresh_clone", seconds / 60, "min", "fresh-clone .ci/run (engine venvs cached)")
    _record_venvs(fig)
    fig.save()
    if not args.keep and rc == 0:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return rc


if __name__ == "__main__":
    sys.exit(main())
