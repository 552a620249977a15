"""The facts cache shared by 10 processes at once, each writing and reading it in a loop
(issue 26's contract: caches shared by concurrent processes stay consistent): every read is a
whole entry one process wrote (never a torn or mixed one), or a clean miss; nothing crashes;
no temporary file is left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .helpers import SRC

PROCESSES = 10
ROUNDS = 60

#: One process: write its own variant of the entry (same key, as every run on one machine
#: uses), read the cache back, and print what it read, one JSON line per round.
_WORKER = """
import json, sys
from pathlib import Path
from kernelpolicy.facts.providers._base import ProviderResult
from kernelpolicy.facts.providers._cache import read_cache, write_cache

folder, me, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
result = ProviderResult()
result.put("host.machine", "x86_64", "metadata")
result.put("host.python", f"3.{me}.0", "metadata")
result.put("gpu.count", me + 1, "nvml")
result.notes.extend(f"note {me}" for _ in range(50 * (me + 1)))  # entries of different sizes
for _ in range(rounds):
    problem = write_cache(folder, "k", {"p": me}, {"host": result})
    got = read_cache(folder, "k", {"host": ("host.machine", "host.python", "gpu.count")})
    values = got.results["host"].values if "host" in got.results else None
    notes = len(got.results["host"].notes) if "host" in got.results else None
    print(json.dumps({"status": got.status, "problem": got.problem, "write": problem, "values": values,
                      "notes": notes}), flush=True)
"""


def test_ten_processes_share_the_facts_cache(tmp_path: Path) -> None:
    folder = tmp_path / "facts"
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(folder), str(i), str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(PROCESSES)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs if err][:1]
    assert all(not err for _, err in outputs), [err for _, err in outputs if err][:1]
    written = {
        i: ({"host.machine": "x86_64", "host.python": f"3.{i}.0", "gpu.count": i + 1}, 50 * (i + 1))
        for i in range(PROCESSES)
    }
    reads = [json.loads(line) for out, _ in outputs for line in out.splitlines()]
    assert len(reads) == PROCESSES * ROUNDS
    for r in reads:
        assert r["write"] is None, r
        assert r["status"] == "hit", r  # an atomic replace: never missing, torn or invalid
        assert (r["values"], r["notes"]) in written.values(), r  # one process's whole entry
    assert [p.name for p in folder.iterdir()] == ["machine-facts.json"]  # no temporary file left
