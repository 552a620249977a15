"""Multi-rank agreement over a real ``torch.distributed`` gloo group (two processes).

The ranks run in the vLLM 0.26.0 venv's python (it has torch); each resolves a decision with the
kernelpolicy core for its own facts and calls the plugin's ``check_agreement`` with the entry the
plugin itself sends (``_entry``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.vllm

SRC = Path(__file__).resolve().parents[2] / "src"
QWEN = "Qwen/Qwen3.6-35B-A3B-FP8"

_RANKS = r"""
import json, sys
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, port, gpus, out):
    import kernelpolicy as kp
    from kernelpolicy.engines.vllm.plugin import AgreementError, _entry, check_agreement

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=len(gpus))
    try:
        facts = kp.facts_for(gpu=gpus[rank], model=MODEL, facts={"vllm.version": "0.26.0"})
        decision = kp.resolve(facts, kp.load_policy())
        entry = _entry(decision, dict(facts.values))
        try:
            gathered = check_agreement(entry)
            result = {"rank": entry["rank"], "ok": True, "gathered": len(gathered or ())}
        except AgreementError as exc:
            result = {"rank": entry["rank"], "ok": False, "report": str(exc),
                      "per_rank": [i["rank"] for i in exc.per_rank]}
        result["fingerprint"] = decision.fingerprint
        Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


MODEL = sys.argv[3]

if __name__ == "__main__":
    port, gpus, out = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[4]
    mp.spawn(rank_main, args=(port, gpus, out), nprocs=len(gpus), join=True)
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _two_ranks(python: Path, tmp: Path, gpus: tuple[str, str]) -> list[dict[str, Any]]:
    script = tmp / "ranks.py"
    script.write_text(_RANKS, encoding="utf-8")
    out = tmp / "out"
    out.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "PYTHONPATH": str(SRC),
        "GLOO_SOCKET_IFNAME": "lo",
        "MASTER_ADDR": "127.0.0.1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    proc = subprocess.run(
        [str(python), str(script), str(_free_port()), ",".join(gpus), QWEN, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_equal_facts_agree(venv: Any, tmp_path: Path) -> None:
    results = _two_ranks(venv("0.26.0"), tmp_path, ("sm121", "sm121"))
    assert [r["ok"] for r in results] == [True, True], results
    assert [r["gathered"] for r in results] == [2, 2]
    assert results[0]["fingerprint"] == results[1]["fingerprint"]


def test_different_facts_stop_with_a_report(venv: Any, tmp_path: Path) -> None:
    results = _two_ranks(venv("0.26.0"), tmp_path, ("sm121", "sm90"))
    assert [r["ok"] for r in results] == [False, False], results
    report = results[0]["report"]
    assert report == results[1]["report"], "every rank reports the same"
    assert results[0]["per_rank"] == [0, 1]
    assert report.startswith("kernelpolicy: ranks disagree on the kernel decision (2 different):")
    lines = report.splitlines()
    rank0 = next(line for line in lines if line.strip().startswith("ranks [0]:"))
    rank1 = next(line for line in lines if line.strip().startswith("ranks [1]:"))
    assert "dense=cutlass" in rank0 and "moe=triton" in rank0 and results[0]["fingerprint"][:19] in rank0
    assert "dense=cutlass" not in rank1 and results[1]["fingerprint"][:19] in rank1
    assert "  fact gpu.sm: rank 0='sm121', rank 1='sm90'" in lines
    assert "  fact gpu.family: rank 0='sm120', rank 1='sm90'" in lines
    assert not any("fact model." in line for line in lines), "only the facts that differ are listed"
