"""Write ``releases/vllm/options.json``: every option string of each vLLM release's serve-line
parser, read from the parser the release itself builds (its venv, on a simulated GPU).

vLLM's parser keeps argparse's default ``allow_abbrev``: ``--tensor-parallel 2`` is
``--tensor-parallel-size 2`` when no other option starts so, and ``explain`` reads a vLLM line's
abbreviations against these options as the release does. Run after a new release's venv is
built; the diff is reviewed like any generated table (``tests/vllm/test_spellings.py`` checks the
file against each release's own parser)::

    python -m kernelpolicy.engines.vllm.testing.options VENV_PYTHON [VENV_PYTHON ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from ....releases.vllm.options import OPTIONS_FILE
from . import parser_options

__all__ = ["main", "release_of"]


def release_of(python: str) -> str:
    """The vLLM release installed in the venv of *python* (its package metadata)."""
    done = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernelpolicy.engines.vllm.testing.options")
    p.add_argument("pythons", nargs="+", metavar="VENV_PYTHON", help="the python of a venv holding one vLLM release")
    p.add_argument("--out", type=Path, default=OPTIONS_FILE, help="the file to update (others' releases are kept)")
    args = p.parse_args(argv)
    data: dict[str, dict[str, str]] = {}
    if args.out.is_file():
        data = json.loads(args.out.read_text(encoding="utf-8")).get("releases", {})
    for python in args.pythons:
        release = release_of(python)
        data[release] = parser_options(python)
        print(f"vLLM {release}: {len(data[release])} option strings", file=sys.stderr)
    doc = {
        "generated_by": "python -m kernelpolicy.engines.vllm.testing.options (each release's own parser)",
        "releases": dict(sorted(data.items(), key=lambda kv: tuple(int(x) for x in kv[0].split(".")[:3]))),
    }
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
