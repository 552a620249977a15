"""``kernelpolicy lsp`` end to end, past diagnostics: hover on rule ids (where the proof's
diagrams say they fire), catalog names and fact keys; completion of release versions and of the
rule ids ``overrides`` names; code actions (``fmt``, an ``until``, a narrower ``when``); code
lenses and their commands (a case's ``explain``, an operator file's ``diff`` against disk); and
the policy files the workspace configuration layers. Real LSP messages to the server started as
an editor starts it, on real files."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy._paths import shipped_rules_dir
from kernelpolicy.releases.vllm.versions import release_records

from ._client import Client

pytest.importorskip("pygls")

CASES = shipped_rules_dir().parent / "tests" / "cases"

#: Denies every MoE and dense backend Hopper has left for some cells: the proof finds paths with
#: no backend, at this rule.
TOO_WIDE = """\
rules:
  - id: fleet-no-marlin
    when: {gpu.sm: sm90}
    paths: [moe, dense]
    deny: [marlin, triton, humming, emulation]
    severity: crash
    because: testing
    refs: [test#1]
"""

#: Cites a fix (FlashInfer 0.6.13) that the scanned vLLM releases pin, yet has no `until`.
EXPIRING = """\
rules:
  - id: fleet-trtllm-hang
    when: {gpu.sm: sm100, vllm.version: ">=0.20"}
    paths: [moe]
    deny: flashinfer_trtllm
    severity: crash
    because: our B200 fleet hangs in the TRT-LLM-gen NVFP4 MoE
    help: fixed in FlashInfer 0.6.13
    refs: [vllm#1]
"""

BROKEN_POLICY = """\
rules:
  - id: fleet-broken
    when: {gpu.sm: sm90}
    deny: no_such_backend
    severity: perf
    because: testing
    refs: [test#1]
"""

FINE = """\
rules:
  - id: fleet-fine
    when: {gpu.sm: sm121, quant.moe_scheme: mxfp4}
    paths: [moe]
    deny: marlin
    severity: accuracy
    because: testing
    refs: [test#1]
"""


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KERNELPOLICY_POLICY"}
    return env | {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp / "hf")}


def _start(tmp: Path, options: Any = None) -> Client:
    client = Client(_env(tmp))
    params = {"processId": os.getpid(), "rootUri": tmp.as_uri(), "capabilities": {}, "initializationOptions": options}
    caps = client.request("initialize", params, timeout=30)["capabilities"]
    assert caps["codeActionProvider"] and caps["codeLensProvider"] is not None, caps
    assert {"kernelpolicy.explain", "kernelpolicy.diff"} <= set(caps["executeCommandProvider"]["commands"])
    client.notify("initialized", {})
    return client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    client = _start(tmp_path_factory.mktemp("workspace"))
    yield client
    client.close()


def _at(uri: str, line: int, character: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def _hover(server: Client, uri: str, line: int, character: int) -> str:
    result = server.request("textDocument/hover", _at(uri, line, character), timeout=60)
    assert result is not None, (line, character)
    return str(result["contents"]["value"])


def _labels(server: Client, uri: str, line: int, character: int) -> list[str]:
    return [i["label"] for i in server.request("textDocument/completion", _at(uri, line, character))["items"]]


def _actions(server: Client, uri: str, diagnostics: list[dict[str, Any]], line: int = 0) -> list[dict[str, Any]]:
    rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}
    params = {"textDocument": {"uri": uri}, "range": rng, "context": {"diagnostics": diagnostics}}
    return list(server.request("textDocument/codeAction", params, timeout=60))


def _applied(text: str, edits: list[dict[str, Any]]) -> str:
    """*text* with a code action's edits applied (from the last, so positions hold)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for n in lines:
        offsets.append(offsets[-1] + len(n))

    def at(pos: dict[str, int]) -> int:
        return offsets[min(pos["line"], len(lines))] + pos["character"]

    for e in sorted(edits, key=lambda e: at(e["range"]["start"]), reverse=True):
        text = text[: at(e["range"]["start"])] + e["newText"] + text[at(e["range"]["end"]) :]
    return text


# --- hover -----------------------------------------------------------------------------------------


def test_hover_on_a_shipped_rule_says_where_it_fires(server: Client, tmp_path: Path) -> None:
    text = "# see marlin-nvfp4-gpt_oss-topk-weights and marlin-ptx-jit-driver-older-than-toolkit\n"
    uri = server.open(tmp_path / "fires.yaml", "rules: []\n" + text)
    gpt_oss = _hover(server, uri, 1, 10)
    assert "deny `marlin` on moe (accuracy)" in gpt_oss and "vllm#48895" in gpt_oss  # effect, severity, refs
    # where it fires, from its diagram: MoE cells only, every GPU, one model type and its catalog models
    assert "fires in " in gpt_oss and "MoE models' cells" in gpt_oss
    assert "GPUs: every `gpu.sm`" in gpt_oss
    assert "models: `gpt_oss` (catalog: openai/gpt-oss-120b, openai/gpt-oss-20b)" in gpt_oss
    hopper = _hover(server, uri, 1, 50)
    assert "GPUs: `sm90` (NVIDIA H100, NVIDIA H200" in hopper and "models: every `model.type`" in hopper
    assert "(2.2%)" in hopper  # sm90 and CUDA >= 12.9: its share of the whole domain


def test_hover_on_catalog_names_and_fact_keys(server: Client, tmp_path: Path) -> None:
    text = "given:\n  gpu: NVIDIA GB10\n  model: Qwen/Qwen3.6-35B-A3B-FP8\n  facts: {flashinfer.version: 0.6.14}\n"
    uri = server.open(tmp_path / "names.yaml", text)
    gpu = _hover(server, uri, 1, 12)
    assert gpu.startswith("**NVIDIA GB10**: GPU of the catalog (rules/gpus.yaml), `gpu.sm` = `sm121`")
    assert "`DGX Spark`" in gpu and "`host.machine` = `aarch64`" in gpu
    model = _hover(server, uri, 2, 20)
    assert model.startswith("**Qwen/Qwen3.6-35B-A3B-FP8**: model of the catalog (rules/models.yaml)")
    assert "`model_type` `qwen3_5_moe_text`" in model and "quantization `fp8`" in model
    fact = _hover(server, uri, 3, 14)
    assert fact.startswith("**flashinfer.version** (version)")
    assert "`0.7.4`" in fact and "releases in the release data" in fact
    # which sources set it: the engines' release pins, each with its place
    assert re.search(
        r"implied by `(vllm|sglang)-[\w.-]+-pins` \(rules/implies/(vllm|sglang)_releases\.yaml:\d+\)", fact
    )


# --- completion ------------------------------------------------------------------------------------


def test_completion_of_release_versions_and_overridden_rule_ids(server: Client, tmp_path: Path) -> None:
    text = (
        "rules:\n  - id: x\n    when: {vllm.version: \n    use: marlin\n    because: b\n    overrides:\n      - \n"
        "  - id: y\n    when: {flashinfer.version: \n"
    )
    uri = server.open(tmp_path / "versions.yaml", text)
    vllm = _labels(server, uri, 2, 24)
    assert vllm[0] == max(release_records(), key=lambda v: tuple(int(x) for x in v.split(".")))  # newest first
    assert set(release_records()) == set(vllm)
    flashinfer = _labels(server, uri, 8, 30)
    assert "0.6.16.post3" in flashinfer and "0.7.3" in flashinfer  # scanned, and pinned by vLLM 0.34
    crash = _labels(server, uri, 6, 8)
    assert "marlin-ptx-jit-driver-older-than-toolkit" in crash and "gpu.sm" not in crash


# --- code actions ----------------------------------------------------------------------------------


def test_code_action_narrows_a_rule_the_proof_finds_too_wide(server: Client, tmp_path: Path) -> None:
    uri = server.open(tmp_path / "wide.yaml", TOO_WIDE)
    found = [d for d in server.diagnostics(uri, version=1) if d["code"] == "no-backend"]
    assert found and all(d["data"]["rule"] == "fleet-no-marlin" for d in found), found
    actions = _actions(server, uri, found, line=2)
    narrow = [a for a in actions if a["title"].startswith("narrow `fleet-no-marlin`")]
    assert narrow and all(a["kind"] == "quickfix" for a in narrow), actions
    new = _applied(TOO_WIDE, narrow[0]["edit"]["changes"][uri])
    assert "when: {gpu.sm: sm90, not: {quant.scheme: fp8_block}}" in new, new
    # the narrower rule leaves a backend where the proof found none
    server.change(uri, new, version=2)
    after = server.diagnostics(uri, version=2)
    left = [d for d in after if d["code"] == "no-backend" and "fp8_block" in d["message"].split("\n")[0]]
    assert len(left) < len(found), after


def test_code_action_adds_an_until_where_the_cited_fix_shipped(server: Client, tmp_path: Path) -> None:
    uri = server.open(tmp_path / "expiring.yaml", EXPIRING)
    [until] = [a for a in _actions(server, uri, []) if a["title"].startswith("add `until")]
    assert until["title"].startswith('add `until: {flashinfer.version: ">=0.6.13"}` to `fleet-trtllm-hang`')
    new = _applied(EXPIRING, until["edit"]["changes"][uri])
    assert new.endswith('    refs: [vllm#1]\n    until: {flashinfer.version: ">=0.6.13"}\n'), new
    server.change(uri, new, version=2)
    assert not [a for a in _actions(server, uri, []) if a["title"].startswith("add `until")]  # bounded now


def test_code_action_formats_the_file(server: Client, tmp_path: Path) -> None:
    messy = "rules:\n- when: {gpu.sm: sm90}\n  id: x\n  deny: marlin\n  severity: perf\n  because: b\n  refs: [a#1]\n"
    uri = server.open(tmp_path / "messy.yaml", messy)
    [fmt] = [a for a in _actions(server, uri, []) if a["kind"] == "source"]
    assert "kernelpolicy fmt" in fmt["title"]
    assert _applied(messy, fmt["edit"]["changes"][uri]).splitlines()[1:3] == ["  - id: x", "    when: {gpu.sm: sm90}"]


# --- what the decision becomes ---------------------------------------------------------------------


def test_code_lens_on_a_case_shows_its_explain(server: Client, tmp_path: Path) -> None:
    case = CASES / "attention-deepseek-v3-h100-flash_attn-mla.yaml"
    uri = server.open(case, case.read_text())
    [lens] = server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=60)
    assert lens["range"]["start"]["line"] == 1  # `given:`
    assert lens["command"]["command"] == "kernelpolicy.explain"
    assert "attention flash_attn" in lens["command"]["title"]  # what the case expects, resolved
    shown = server.request("workspace/executeCommand", lens["command"], timeout=60)
    assert shown.startswith("gpu     sm90 (NVIDIA H100") and "> flash_attn" in shown, shown
    assert "fingerprint " in shown


def test_code_lens_on_an_operator_file_shows_its_diff_against_disk(server: Client, tmp_path: Path) -> None:
    saved = tmp_path / "fleet.yaml"
    saved.write_text(FINE)
    uri = server.open(saved, FINE)
    [lens] = server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=60)
    assert lens["command"]["command"] == "kernelpolicy.diff" and lens["range"]["start"]["line"] == 0
    same = server.request("workspace/executeCommand", lens["command"], timeout=120)
    assert same.endswith(("no path decisions change", ": 0 path decisions change")), same
    server.change(uri, FINE.replace("sm121", "sm90"), version=2)
    changed = server.request("workspace/executeCommand", lens["command"], timeout=120)
    assert "moe: marlin -> " in changed and "sm90" in changed, changed


# --- workspace configuration -----------------------------------------------------------------------


def test_the_configured_policy_files_are_layered_under_the_buffer(tmp_path: Path) -> None:
    broken = tmp_path / "team.yaml"
    broken.write_text(BROKEN_POLICY)
    client = _start(tmp_path, {"policy": ["team.yaml"]})  # relative to the workspace's root
    try:
        uri = client.open(tmp_path / "mine.yaml", FINE)
        [d] = [x for x in client.diagnostics(uri, version=1) if x["severity"] == 1]
        assert d["range"]["start"]["line"] == 0 and str(broken) in d["message"] and "no_such_backend" in d["message"]
        client.notify("workspace/didChangeConfiguration", {"settings": {"kernelpolicy": {"policy": []}}})
        client.change(uri, FINE + "\n", version=2)
        assert client.diagnostics(uri, version=2) == []
    finally:
        client.close()


def test_half_typed_files_get_no_action_and_no_lens_and_the_server_lives(server: Client, tmp_path: Path) -> None:
    half = "name: x\ngiven: {gpu: H100, model: [\n"
    uri = server.open(tmp_path / "half.yaml", half)
    assert server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}) == []
    assert _actions(server, uri, []) == []
    shown = server.request("workspace/executeCommand", {"command": "kernelpolicy.explain", "arguments": [uri]})
    assert shown == "not a case file: `explain` needs a `given`"
    # a diagnostic whose cells are not the proof's: no narrowing, no error
    bogus = [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "message": "m",
              "data": {"rule": "nope", "cell": "sm90 x"}}]  # fmt: skip
    assert _actions(server, uri, bogus) == []
    assert server.request("textDocument/hover", _at(uri, 1, 14))["contents"]["value"].startswith("**NVIDIA H100**")
