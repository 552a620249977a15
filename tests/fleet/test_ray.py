"""``kernelpolicy fleet`` on a real local Ray cluster: several raylets on this machine, each
with its own environment (a simulated GPU through ``KERNELPOLICY_FACTS``, a policy file on one
node, kernelpolicy hidden or hanging on another).

One cluster for the module (small object store, no usage stats, fast dead-node detection),
started and stopped with Ray's own ``ray.cluster_utils.Cluster``; nothing here runs ``ray start``
or ``ray stop``. The tests run in file order and add nodes as they go.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="ray is not installed: pip install 'kernelpolicy[ray]' (the test extra has it)")

from ray.cluster_utils import Cluster

import kernelpolicy as kp
from kernelpolicy.facts.gpu import facts_from_spec
from kernelpolicy.fleet import FleetReport, NodeAnswer, build_report
from kernelpolicy.fleet._ray import audit

MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"
NODE: dict[str, Any] = {"num_cpus": 1, "object_store_memory": 78_643_200}  # Ray's floor
#: dead nodes are noticed in about 3 s instead of 15 s
SYSTEM = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 3}
POLICY = """\
rules:
  - id: ops-no-cutlass-here
    when: {gpu.sm: sm90}
    deny: cutlass
    severity: perf
    because: not validated with this node's driver
    refs: [vllm#1]
"""
MISSING = 'raise ModuleNotFoundError("No module named \'kernelpolicy\'", name="kernelpolicy")\n'
HANGING = "import os, pathlib, time\npathlib.Path(os.environ['KP_TEST_MARKER']).touch()\ntime.sleep(300)\n"


class Fleet:
    def __init__(self, cluster: Cluster, tmp: Path, policy: kp.Policy) -> None:
        self.cluster = cluster
        self.tmp = tmp
        self.policy = policy
        self.nodes: dict[str, Any] = {}  # name -> Ray node handle

    def env(self, gpu: str, **extra: str) -> dict[str, str]:
        facts = {**facts_from_spec(gpu, self.policy.gpus), "gpu.count": 8}
        return {
            "KERNELPOLICY_FACTS": json.dumps(facts),
            "KERNELPOLICY_CACHE_DIR": str(self.tmp / "cache"),
            "HF_HUB_OFFLINE": "1",
            **extra,
        }

    def add(self, name: str, gpu: str, **kw: Any) -> str:
        env = self.env(gpu, **kw.pop("env", {}))
        node = self.cluster.add_node(**NODE, env_vars=env, **kw)
        self.nodes[name] = node
        return str(node.node_id)

    def remove(self, name: str) -> str:
        """Remove a node once its test is done (fewer raylets on this machine); wait until the cluster lists it dead."""
        node = self.nodes.pop(name)
        self.cluster.remove_node(node)
        self.cluster.wait_for_nodes()
        return str(node.node_id)

    def shadow(self, name: str, init: str) -> str:
        """A folder whose `kernelpolicy` package runs *init* (put first on a node's PYTHONPATH)."""
        folder = self.tmp / name / "kernelpolicy"
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text(init)
        return str(folder.parent)

    def audit(self, timeout: float = 60.0) -> tuple[FleetReport, dict[str, NodeAnswer]]:
        cluster, rows = audit({"model": MODEL}, address=self.cluster.address, timeout=timeout)
        report = build_report(rows, {**cluster, "model": MODEL})
        return report, {n.node_id: n for n in report.nodes}

    def cli(self, *args: str) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "kernelpolicy", "fleet", "--model", MODEL, "--address", self.cluster.address]
        return subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("fleet")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        for name in ("KERNELPOLICY_POLICY", "KERNELPOLICY_FACTS", "CUDA_VISIBLE_DEVICES", "RAY_ADDRESS"):
            mp.delenv(name, raising=False)
        policy = kp.load_policy(environ=False)
        # Ray 2.60's Cluster writes its address to <system temp>/ray/ray_current_cluster whatever
        # `temp_dir` says, and fails when that folder does not exist yet (a fresh machine)
        from ray._common.utils import get_default_ray_temp_dir

        Path(get_default_ray_temp_dir()).mkdir(parents=True, exist_ok=True)
        head_env = {
            "KERNELPOLICY_FACTS": json.dumps({**facts_from_spec("H200", policy.gpus), "gpu.count": 8}),
            "KERNELPOLICY_CACHE_DIR": str(tmp / "cache"),
            "HF_HUB_OFFLINE": "1",
        }
        # Ray's socket paths must fit 107 bytes: a short folder of its own, not pytest's (longer
        # under pytest-xdist's per-worker folders)
        ray_dir = tempfile.mkdtemp(prefix="kpray-", dir="/tmp")
        cluster = Cluster(
            initialize_head=True,
            connect=False,
            head_node_args={**NODE, "_system_config": SYSTEM, "env_vars": head_env, "temp_dir": ray_dir},
        )
        try:
            made = Fleet(cluster, tmp, policy)
            made.nodes["head"] = cluster.head_node
            yield made
        finally:
            cluster.shutdown()
            shutil.rmtree(ray_dir, ignore_errors=True)


def _head_id(fleet: Fleet) -> str:
    return str(fleet.nodes["head"].node_id)


def test_agree_and_gpu_visibility_kept(fleet: Fleet) -> None:
    b = fleet.add("b", "H200", num_gpus=2, env={"CUDA_VISIBLE_DEVICES": "1,3"})
    report, rows = fleet.audit()
    assert report.exit == 0, rows
    assert [g.label for g in report.groups] == ["A"] and {n.node_id for n in report.groups[0].nodes} == {
        b,
        _head_id(fleet),
    }
    assert rows[b].facts["gpu.sm"] == "sm90" and rows[b].facts["gpu.count"] == 8
    # the task reserved no GPU, and Ray left the node's own visibility alone
    assert rows[b].payload["cuda_visible_devices"] == "1,3"
    assert rows[_head_id(fleet)].payload["cuda_visible_devices"] is None
    assert rows[_head_id(fleet)].head and not rows[b].head
    assert report.differing == ()


def test_policy_file_on_one_node(fleet: Fleet) -> None:
    policy_file = fleet.tmp / "ops.yaml"
    policy_file.write_text(POLICY)
    c = fleet.add("c", "H200", env={"KERNELPOLICY_POLICY": str(policy_file)})
    report, rows = fleet.audit()
    assert report.exit == 1
    assert [len(g.nodes) for g in report.groups] == [2, 1] and report.groups[1].nodes[0].node_id == c
    assert report.differing == ("(the facts agree; the policy files differ between groups)",)
    assert rows[c].payload["policy"]["files"][-1] == str(policy_file)
    assert rows[c].decision["paths"]["dense"]["backend"] != rows[_head_id(fleet)].decision["paths"]["dense"]["backend"]
    assert report.decisions_differ
    fleet.remove("c")


def test_mixed_gpus_through_the_cli(fleet: Fleet) -> None:
    d = fleet.add("d", "sm120")
    proc = fleet.cli("--json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out, err  # two GPU classes, each agrees within itself
    report = json.loads(out)
    assert report["exit"] == 0
    assert [(g["label"], g["gpu_class"], len(g["nodes"])) for g in report["groups"]] == [
        ("A", "sm90", 2),
        ("B", "sm120", 1),
    ]
    assert report["groups"][1]["nodes"] == [d]
    assert report["differing_facts"] == []
    assert next(n for n in report["nodes"] if n["id"] == d)["facts"]["gpu.family"] == "sm120"
    # the node removed after the last test is listed, not asked
    (c,) = (n for n in report["nodes"] if n["status"] == "dead")
    assert c["reason"].startswith("listed dead by the cluster")
    fleet.remove("d")


def test_node_without_kernelpolicy(fleet: Fleet) -> None:
    missing = fleet.add("missing", "H200", env={"PYTHONPATH": fleet.shadow("missing", MISSING)})
    report, rows = fleet.audit()
    assert rows[missing].status == "missing"
    assert str(rows[missing].reason).startswith(f"kernelpolicy is not importable by `{sys.executable}`")
    assert sum(1 for n in report.nodes if n.ok) == 2
    fleet.remove("missing")


def test_timeout(fleet: Fleet) -> None:
    marker = fleet.tmp / "hang-started"
    hanging = fleet.add(
        "hanging", "H200", env={"PYTHONPATH": fleet.shadow("hanging", HANGING), "KP_TEST_MARKER": str(marker)}
    )
    started = time.monotonic()
    _, rows = fleet.audit(timeout=5)
    assert time.monotonic() - started < 5 + 10  # connect, and cancel what did not answer
    assert (rows[hanging].status, rows[hanging].reason) == ("timeout", "no answer within 5s")


def test_node_removed_mid_run(fleet: Fleet) -> None:
    marker = fleet.tmp / "hang-started"
    marker.unlink(missing_ok=True)
    hanging = str(fleet.nodes["hanging"].node_id)
    started = time.monotonic()
    proc = fleet.cli("--json", "--timeout", "90")
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the hanging node's task never started"
    fleet.cluster.remove_node(fleet.nodes.pop("hanging"))
    out, err = proc.communicate(timeout=80)
    assert proc.returncode == 4 and out, err  # the nodes that answered agree; one gave no decision
    assert time.monotonic() - started < 60, "the audit waited for the timeout instead of seeing the node die"
    rows = {n["id"]: n for n in json.loads(out)["nodes"]}
    assert rows[hanging]["status"] == "failed", rows[hanging]
    assert rows[hanging]["reason"] == "the node died during the audit"
