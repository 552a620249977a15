"""The fleet report without Ray: grouping, the differing facts, exit status, ``--from`` files."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import main
from kernelpolicy.engines.agreement import agreement_report
from kernelpolicy.facts.gpu import facts_from_spec
from kernelpolicy.fleet import NodeAnswer, answer_from_payload, build_report, render_text

MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"


def _payload(fp: str, facts: dict[str, Any], dense: str = "cutlass", ok: bool = True) -> dict[str, Any]:
    return {
        "status": "ok",
        "kernelpolicy": "0.1.0",
        "facts": facts,
        "decision": {
            "fingerprint": fp,
            "ok": ok,
            "paths": {
                "dense": {"backend": dense if ok else None, "present": True},
                "moe": {"backend": "triton", "present": True, "rule": "r1"},
                "router": {"backend": "cublas", "present": True},
                "warmup": {"kernels": []},
            },
        },
    }


def _node(node_id: str, fp: str, sm: str, **kw: Any) -> NodeAnswer:
    return answer_from_payload(node_id, "10.0.0.1", _payload(fp, {"gpu.sm": sm, "driver.version": "580.65"}, **kw))


def _sm90(node_id: str, fp: str, driver: str, **kw: Any) -> NodeAnswer:
    facts = {"gpu.sm": "sm90", "driver.version": driver}
    return answer_from_payload(node_id, "10.0.0.1", _payload(fp, facts, **kw))


def test_groups_largest_first_and_differing_facts_in_the_rank_report_words() -> None:
    nodes = [
        _sm90("n3", "sha256:bb", "575.57.8", dense="flashinfer_cutlass"),
        _sm90("n1", "sha256:aa", "580.65"),
        _sm90("n2", "sha256:aa", "580.65"),
    ]
    report = build_report(nodes, {"source": "test", "model": MODEL})
    assert [(g.label, [n.node_id for n in g.nodes]) for g in report.groups] == [("A", ["n1", "n2"]), ("B", ["n3"])]
    assert report.differing == ("fact driver.version: group A='580.65', group B='575.57.8'",)
    assert report.exit == 1 and report.decisions_differ
    # the same words as the plugin's rank agreement report, for the same facts
    ranks = agreement_report(
        [
            {"rank": 0, "fingerprint": "a", "summary": "s", "facts": {"gpu.sm": "sm90", "driver.version": "580.65"}},
            {"rank": 1, "fingerprint": "b", "summary": "s", "facts": {"gpu.sm": "sm90", "driver.version": "575.57.8"}},
        ]
    )
    assert ranks is not None and "  fact driver.version: rank 0='580.65', rank 1='575.57.8'" in ranks.splitlines()
    text = render_text(report)
    assert "  fact driver.version: group A='580.65', group B='575.57.8'" in text.splitlines()
    assert "B  1 node [n3]: dense=flashinfer_cutlass moe=triton [r1] router=cublas warmup=none [sha256:bb]" in text
    assert text.rstrip().endswith("2 groups, the decisions differ (exit 1)")


def test_gpu_classes_that_each_agree_agree() -> None:
    """Found as: a mixed fleet always ended "the decisions differ", exit 1, because GPU types
    decide differently by design. Groups are compared within a GPU class (`gpu.sm`)."""
    nodes = [
        _node("n3", "sha256:bb", "sm120", dense="flashinfer_cutlass"),
        _node("n1", "sha256:aa", "sm90"),
        _node("n2", "sha256:aa", "sm90"),
    ]
    report = build_report(nodes, {"source": "test", "model": MODEL})
    assert report.exit == 0 and report.differing == () and not report.decisions_differ
    assert [(c.name, [g.label for g in c.groups], c.agrees) for c in report.classes] == [
        ("sm90", ["A"], True),
        ("sm120", ["B"], True),
    ]
    text = render_text(report)
    assert "  B  sm120  1 node [n3]: dense=flashinfer_cutlass" in text
    assert text.rstrip().endswith(
        "2 GPU classes (sm90, sm120), each agrees within itself"
        " (they decide differently by design: one launch runs on one class) (exit 0)"
    )
    # a third node of class sm90 that decides otherwise: that class disagrees
    report = build_report([*nodes, _node("n4", "sha256:cc", "sm90", dense="deep_gemm")], {"model": MODEL})
    assert report.exit == 1 and report.decisions_differ
    assert report.to_json()["gpu_classes"][0] == {
        "gpu_class": "sm90",
        "groups": ["A", "C"],
        "agrees": False,
        "differing_facts": ["(the facts agree; the policy files differ between groups)"],
    }
    assert render_text(report).rstrip().endswith("2 groups of sm90, the decisions differ (exit 1)")


def test_driver_column_writes_the_driver_as_nvidia_does() -> None:
    """Found as: the DRIVER column printed `580.159.4` for the driver `580.159.04` (the fact is a
    normalised version)."""
    text = render_text(build_report([_sm90("n1", "sha256:aa", "580.159.4")], {"model": MODEL}))
    (row,) = [ln for ln in text.splitlines() if ln.startswith("n1 ")]
    assert " 580.159.04 " in row and "580.159.4 " not in row


def test_same_facts_different_fingerprint_blames_the_policy_files() -> None:
    report = build_report([_node("n1", "sha256:aa", "sm90"), _node("n2", "sha256:cc", "sm90")], {"model": MODEL})
    assert report.differing == ("(the facts agree; the policy files differ between groups)",)
    assert not report.decisions_differ
    assert "same backends, the facts or policy files differ (exit 1)" in render_text(report)


def test_exit_status_precedence() -> None:
    ok = _node("n1", "sha256:aa", "sm90")
    timeout = NodeAnswer("n2", None, "timeout", "no answer within 5s")
    dead = NodeAnswer("n3", None, "dead", "listed dead by the cluster")
    no_backend = _node("n4", "sha256:aa", "sm90", ok=False)
    assert build_report([ok], {}).exit == 0
    assert build_report([ok, dead], {}).exit == 0  # dead before the audit: listed, not counted
    assert build_report([ok, timeout], {}).exit == 4
    assert build_report([no_backend], {}).exit == 3
    assert build_report([no_backend, timeout], {}).exit == 4
    assert build_report([ok, _node("n5", "sha256:bb", "sm90"), timeout], {}).exit == 1
    assert build_report([ok, _node("n5", "sha256:bb", "sm120"), timeout], {}).exit == 4  # another class
    assert build_report([ok, _node("n5", "sha256:bb", "sm120")], {}, by_class=False).exit == 1  # one launch
    text = render_text(build_report([dataclasses.replace(ok, head=True), timeout, dead], {"model": MODEL}))
    assert "\nn1*  " in text and "(* the head node, where `vllm serve` runs)" in text
    assert "timeout: no answer within 5s" in text and "dead: listed dead by the cluster" in text
    assert "1 node(s) did not answer (exit 4)" in text


@pytest.mark.parametrize(
    ("payload", "status", "reason"),
    [
        ({"status": "missing", "error": "kernelpolicy is not importable"}, "missing", "kernelpolicy is not importable"),
        ({"status": "ok", "facts": {}}, "error", "unreadable answer (no decision or facts)"),
        ("garbage", "error", "unreadable answer (str)"),
        ({"status": "weird"}, "error", "status `weird`"),
    ],
)
def test_answers_are_checked_not_trusted(payload: Any, status: str, reason: str) -> None:
    node = answer_from_payload("n1", None, payload)
    assert (node.status, node.reason) == (status, reason)


def _facts_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, gpu: dict[str, Any]) -> Path:
    assert main(["facts", "--json", "--no-cache"]) == 0
    data = json.loads(capsys.readouterr().out)
    data["facts"].update(gpu)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_from_files_groups_and_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: kp.Policy) -> None:
    h200 = _facts_file(tmp_path, capsys, "h200.json", facts_from_spec("H200", policy.gpus))
    h200b = _facts_file(tmp_path, capsys, "h200b.json", facts_from_spec("H200", policy.gpus))
    spark = _facts_file(tmp_path, capsys, "spark.json", facts_from_spec("GB10", policy.gpus))
    code = main(["fleet", "--model", MODEL, "--json", "--from", str(h200), str(h200b), str(spark)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["exit"] == 0  # two GPU classes, each agrees within itself
    groups = {g["label"]: (g["gpu_class"], g["nodes"]) for g in report["groups"]}
    assert groups == {"A": ("sm90", [str(h200), str(h200b)]), "B": ("sm121", [str(spark)])}
    assert report["differing_facts"] == []
    # each file decides as `explain` would for its GPU
    explained = kp.resolve(kp.facts_for(gpu="GB10", model=MODEL, policy=kp.load_policy()), kp.load_policy())
    spark_row = next(n for n in report["nodes"] if n["id"] == str(spark))
    assert spark_row["decision"]["paths"]["moe"]["backend"] == explained.paths["moe"].backend
    assert main(["fleet", "--model", MODEL, "--from", str(h200), str(h200b)]) == 0
    assert "every node that answered agrees (exit 0)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "`FILE`:1:2: not JSON: expecting property name enclosed in double quotes"),
        ('{"schema": "x"}', "`FILE`: not the output of `kernelpolicy facts --json` (schema `kernelpolicy.machine/1`)"),
        ("[]", "`FILE`: not the output of `kernelpolicy facts --json` (a JSON object)"),
    ],
)
def test_from_bad_files_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["fleet", "--model", MODEL, "--from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.replace("FILE", str(bad)) in err


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "--model", MODEL, "--timeout", "0"]) == 2
    assert "--timeout `0` must be a positive number of seconds" in capsys.readouterr().err
    assert main(["fleet", "--model", MODEL, "--from", str(tmp_path / "x.json"), "--address", "a:1"]) == 2
    assert "give one or the other" in capsys.readouterr().err
    assert main(["fleet", "--model", MODEL, "--from", str(tmp_path / "missing.json")]) == 2
    assert f"`{tmp_path / 'missing.json'}`: cannot read it: no such file or directory" in capsys.readouterr().err


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_core_and_cli_do_not_import_ray() -> None:
    done = _python(
        "import sys, kernelpolicy, kernelpolicy.fleet, kernelpolicy.fleet._node\n"
        "from kernelpolicy.cli import main\n"
        "try:\n    main(['fleet', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_missing_ray_is_one_line() -> None:
    done = _python(
        "import sys; sys.modules['ray'] = None\n"
        "from kernelpolicy.cli import main\n"
        f"sys.exit(main(['fleet', '--model', {MODEL!r}]))"
    )
    assert done.returncode == 2
    from kernelpolicy._install import install_command

    assert done.stderr == f"kernelpolicy: error: ray is not installed ({install_command('ray')})\n"


def test_head_row_decides_with_this_shells_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, policy: kp.Policy
) -> None:
    h200 = _facts_file(tmp_path, capsys, "h200.json", facts_from_spec("H200", policy.gpus))
    # the shell `vllm serve` runs from says it is a Blackwell box; vLLM does not copy this to workers
    monkeypatch.setenv("KERNELPOLICY_FACTS", json.dumps(facts_from_spec("sm120", policy.gpus)))
    code = main(["fleet", "--model", MODEL, "--json", "--head", "--from", str(h200)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    head = report["nodes"][0]
    assert head["id"] == "head-shell" and head["facts"]["gpu.sm"] == "sm120"
    assert head["sources"]["gpu.sm"] == "env"
    assert "fact gpu.sm: group A='sm90', group B='sm120'" in report["differing_facts"]
    monkeypatch.delenv("KERNELPOLICY_FACTS")
    monkeypatch.setenv("KERNELPOLICY_FACTS", json.dumps(facts_from_spec("H200", policy.gpus)))
    assert main(["fleet", "--model", MODEL, "--head", "--from", str(h200)]) == 0
    capsys.readouterr()


def test_this_shells_vllm_variables_apply_on_every_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, policy: kp.Policy
) -> None:
    h200 = _facts_file(tmp_path, capsys, "h200.json", facts_from_spec("H200", policy.gpus))
    monkeypatch.setenv("VLLM_USE_DEEP_GEMM", "0")  # vLLM copies it from the driver to every worker
    monkeypatch.setenv("VLLM_NOT_READ_BY_ANY_RULE", "1")
    assert main(["fleet", "--model", MODEL, "--json", "--from", str(h200)]) == 0
    row = json.loads(capsys.readouterr().out)["nodes"][0]
    assert row["facts"]["deploy.env.VLLM_USE_DEEP_GEMM"] == "0"
    assert row["sources"]["deploy.env.VLLM_USE_DEEP_GEMM"] == "user"
    assert not any("VLLM_NOT_READ_BY_ANY_RULE" in key for key in row["facts"])
    # an explicit --env wins over the shell (a node without DeepGEMM refuses it: exit 5, as `explain`)
    assert main(["fleet", "--model", MODEL, "--json", "--env", "VLLM_USE_DEEP_GEMM=1", "--from", str(h200)]) == 5
    row = json.loads(capsys.readouterr().out)["nodes"][0]
    assert row["facts"]["deploy.env.VLLM_USE_DEEP_GEMM"] == "1"
    assert row["facts"]["deep_gemm.source"] == "none" and row["decision"]["refused"]


def test_gpu_visibility_env_only_where_ray_would_clear_it() -> None:
    from kernelpolicy.fleet._ray import _task_env

    old = _task_env("2.55.1")["env_vars"]
    assert old == {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
    assert _task_env("2.56.0") == {} and _task_env("2.60.0") == {} and _task_env("3.0.0.dev0") == {}
    assert _task_env("not-a-version") == {"env_vars": old}


def test_no_cluster_at_the_address_is_one_line_not_a_wait(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray", reason="ray is not installed: pip install 'kernelpolicy[ray]'")
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["fleet", "--model", MODEL, "--address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"kernelpolicy: error: cannot connect to a Ray cluster at `127.0.0.1:{port}`: connection refused"
    )
    assert err.count("\n") == 1


def test_a_nodes_own_bad_input_is_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, policy: kp.Policy
) -> None:
    h200 = _facts_file(tmp_path, capsys, "h200.json", facts_from_spec("H200", policy.gpus))
    monkeypatch.setenv("KERNELPOLICY_FACTS", "{not json")
    assert main(["fleet", "--model", MODEL, "--json", "--head", "--from", str(h200)]) == 4
    head = json.loads(capsys.readouterr().out)["nodes"][0]
    assert head["status"] == "error"
    assert "KERNELPOLICY_FACTS" in head["reason"] and "not valid JSON" in head["reason"]


def test_gpu_facts_that_contradict_the_machine_are_the_nodes_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: kp.Policy
) -> None:
    # NVML saw an H200, but the file also says sm121: `explain --gpu auto` refuses that, so does the fleet
    lying = _facts_file(tmp_path, capsys, "lying.json", {**facts_from_spec("H200", policy.gpus), "gpu.sm": "sm121"})
    assert main(["fleet", "--model", MODEL, "--from", str(lying)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kernelpolicy: error: `{lying}`: fact `gpu.")
    assert err.count("\n") == 1 and "contradicts" in err


ACME = """\
rules:
  - id: acme-no-triton-moe
    when: {gpu.sm: sm90}
    paths: [moe]
    deny: triton
    severity: perf
    because: measured slower on our H200 nodes
"""


def test_policy_option_decides_every_node_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, policy: kp.Policy
) -> None:
    """Found as: `fleet` had no `--policy` (and the error pointed at `kernelpolicy --help`)."""
    h200 = _facts_file(tmp_path, capsys, "h200.json", facts_from_spec("H200", policy.gpus))
    monkeypatch.setenv("KERNELPOLICY_FACTS", json.dumps(facts_from_spec("H200", policy.gpus)))  # the head shell
    acme = tmp_path / "acme.yaml"
    acme.write_text(ACME, encoding="utf-8")
    assert main(["fleet", "--model", MODEL, "--json", "--from", str(h200)]) == 0
    plain = json.loads(capsys.readouterr().out)["nodes"][0]
    assert plain["decision"]["paths"]["moe"]["backend"] == "triton"
    # --from: decided here with the file itself; --head: this process as a node, from the file's text
    argv = ["fleet", "--model", MODEL, "--json", "--policy", str(acme)]
    for extra in (["--from", str(h200)], ["--head", "--from", str(h200)]):
        assert main([*argv, *extra]) == 0
        for node in json.loads(capsys.readouterr().out)["nodes"]:
            assert node["decision"]["paths"]["moe"]["backend"] != "triton", node["id"]
            assert node["policy"]["files"][-1] == str(acme)
    assert main(["fleet", "--model", MODEL, "--policy", str(tmp_path / "gone.yaml"), "--from", str(h200)]) == 2
    assert "gone.yaml" in capsys.readouterr().err


def test_an_unknown_option_points_at_the_subcommands_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "--model", MODEL, "--polciy", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "kernelpolicy fleet: error: unrecognized arguments: --polciy x.yaml (see `kernelpolicy fleet --help`)\n"
    )


def test_node_column_names_a_facts_file_by_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: kp.Policy
) -> None:
    """Found as: the NODE column was the first 12 characters of the file's path (`/tmp/pytest-`)."""
    deep = tmp_path / "collected" / "2026-12-05"
    deep.mkdir(parents=True)
    a = _facts_file(deep, capsys, "gpu-node-017.json", facts_from_spec("H200", policy.gpus))
    b = _facts_file(deep, capsys, "gpu-node-018.json", facts_from_spec("H200", policy.gpus))
    assert main(["fleet", "--model", MODEL, "--from", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert [ln.split()[0] for ln in out.splitlines()[3:5]] == ["gpu-node-017.json", "gpu-node-018.json"]
    assert "A  2 nodes [gpu-node-017.json, gpu-node-018.json]" in out


def test_short_paths_keep_the_tail_that_tells_files_apart() -> None:
    from kernelpolicy.fleet import _short_paths

    paths = ["/a/rack1/h200.json", "/a/rack2/h200.json", "/a/rack2/b200.json", "/x/b200.json/", "solo.json"]
    assert _short_paths(paths) == {
        "/a/rack1/h200.json": "rack1/h200.json",
        "/a/rack2/h200.json": "rack2/h200.json",
        "/a/rack2/b200.json": "rack2/b200.json",  # `b200.json` alone is the next one's tail too
        "/x/b200.json/": "/x/b200.json/",  # its whole path is what tells it apart
        "solo.json": "solo.json",
    }
    many = [f"/d/n{i}.json" for i in range(5_000)]  # linear: 25 million comparisons before
    assert _short_paths(many)["/d/n4999.json"] == "n4999.json"


def test_a_group_line_names_a_few_nodes_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: kp.Policy
) -> None:
    files = [_facts_file(tmp_path, capsys, f"n{i:02}.json", facts_from_spec("H200", policy.gpus)) for i in range(11)]
    assert main(["fleet", "--model", MODEL, "--from", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert (
        "A  11 nodes [n00.json, n01.json, n02.json, n03.json, n04.json, n05.json, n06.json, n07.json, and 3 more]"
        in out
    )
    assert all(f"n{i:02}.json" in out for i in range(11))  # the table names every one
