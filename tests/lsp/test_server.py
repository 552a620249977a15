"""``kernelpolicy lsp`` end to end: the server started as an editor starts it, driven through
real LSP messages (initialize, didOpen/didChange, publishDiagnostics, hover, completion,
definition, documentSymbol, shutdown/exit) on real rule files, malformed ones included."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelpolicy._paths import shipped_rules_dir

from ._client import Client

pytest.importorskip("pygls")

GOOD = """\
rules:
  - id: fleet-no-marlin-moe-on-gb10
    when: {gpu.sm: sm121, quant.moe_scheme: mxfp4}
    paths: [moe]
    deny: marlin
    severity: accuracy
    because: not yet validated on our GB10 fleet
    refs: [vllm#49546]
"""

#: Half typed: the flow mapping of `when` is not closed yet.
HALF_TYPED = """\
rules:
  - id: fleet-no-marlin-moe-on-gb10
    when: {gpu.sm: sm121, quant.moe_scheme: mx
    paths: [moe]
"""

NO_BECAUSE = """\
rules:
  - id: fleet-no-marlin-moe-on-gb10
    when: {gpu.sm: sm121}
    deny: marlin
    severity: accuracy
    refs: [vllm#49546]
"""

#: The proof's finding: a `when` no facts satisfy.
IMPOSSIBLE = """\
rules:
  - id: fleet-impossible
    when: {gpu.sm: sm90, gpu.family: sm100}
    deny: marlin
    severity: crash
    because: testing
    refs: [test#1]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    env = {k: v for k, v in os.environ.items() if k != "KERNELPOLICY_POLICY"}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path_factory.mktemp("hf"))}
    client = Client(env)
    root = tmp_path_factory.mktemp("workspace")
    result = client.request(
        "initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {}}, timeout=30
    )
    caps = result["capabilities"]
    assert caps["hoverProvider"] and caps["definitionProvider"] and caps["documentSymbolProvider"]
    assert "completionProvider" in caps
    client.notify("initialized", {})
    yield client
    client.close()


def test_a_good_file_has_no_diagnostics(server: Client, tmp_path: Path) -> None:
    uri = server.open(tmp_path / "fleet.yaml", GOOD)
    assert server.diagnostics(uri, version=1) == []


def test_a_half_typed_file_gets_a_diagnostic_and_the_fix_clears_it(server: Client, tmp_path: Path) -> None:
    uri = server.open(tmp_path / "typing.yaml", HALF_TYPED)
    [d] = server.diagnostics(uri, version=1)
    assert d["severity"] == 1 and d["code"] == "yaml", d
    assert "invalid YAML" in d["message"]
    assert d["range"]["start"]["line"] == 3  # `paths:` inside the unclosed `{...}`: where the parser stops
    server.change(uri, GOOD, version=2)
    assert server.diagnostics(uri, version=2) == []
    # the server is alive and answers after the malformed text
    assert server.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})[0]["name"] == (
        "fleet-no-marlin-moe-on-gb10"
    )


def test_a_schema_error_is_at_the_rule_it_is_about(server: Client, tmp_path: Path) -> None:
    uri = server.open(tmp_path / "schema.yaml", NO_BECAUSE)
    [d] = server.diagnostics(uri, version=1)
    assert (d["code"], d["severity"], d["range"]["start"]["line"]) == ("schema", 1, 1), d
    assert "missing field `because`" in d["message"]


def test_the_proofs_finding_is_at_the_rules_line_as_a_warning(server: Client, tmp_path: Path) -> None:
    uri = server.open(tmp_path / "impossible.yaml", IMPOSSIBLE)
    found = server.diagnostics(uri, version=1)
    [d] = [x for x in found if x["code"] == "impossible"]
    assert d["severity"] == 2 and d["range"]["start"]["line"] == 2, d
    assert "fleet-impossible" in d["message"]


def test_the_result_of_an_older_text_is_never_published(server: Client, tmp_path: Path) -> None:
    uri = server.open(tmp_path / "stale.yaml", GOOD)
    assert server.diagnostics(uri, version=1) == []
    server.change(uri, IMPOSSIBLE, version=2)  # the whole proof: about a second
    time.sleep(0.5)  # past the debounce: version 2 is being checked
    server.change(uri, NO_BECAUSE, version=3)
    [d] = server.diagnostics(uri, version=3)
    assert d["code"] == "schema"
    time.sleep(0.3)
    assert [p["version"] for p in server.published(uri)] == [1, 3]


def test_hover_on_a_rule_id_a_fact_key_and_a_backend(server: Client, tmp_path: Path) -> None:
    text = GOOD + "  # see marlin-nvfp4-gpt_oss-topk-weights\n"
    uri = server.open(tmp_path / "hover.yaml", text)

    def hover(line: int, character: int) -> str:
        result = server.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}
        )
        assert result is not None, (line, character)
        return str(result["contents"]["value"])

    shipped = hover(8, 20)
    assert "deny `marlin` on moe (accuracy)" in shipped and "vllm#48895" in shipped
    assert "rules/known/marlin.yaml:" in shipped
    fact = hover(2, 14)
    assert fact.startswith("**gpu.sm** (enum)") and "`sm121`" in fact
    backend = hover(4, 12)
    assert backend.startswith("**marlin**: backend") and "path `moe`" in backend
    # a word that is none of them: no hover
    none = server.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 6, "character": 20}}
    )
    assert none is None


def test_completion_of_fact_keys_values_and_backends(server: Client, tmp_path: Path) -> None:
    text = "rules:\n  - id: x\n    when: {gpu.sm: sm90, \n    deny: \n"
    uri = server.open(tmp_path / "complete.yaml", text)

    def labels(line: int, character: int) -> list[str]:
        result = server.request(
            "textDocument/completion",
            {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}},
        )
        return [i["label"] for i in result["items"]]

    facts = labels(2, 26)
    assert "quant.moe_scheme" in facts and "gpu.family" in facts and "marlin" not in facts
    values = labels(2, 20)
    assert "sm121" in values and "sm90" in values
    backends = labels(3, 10)
    assert "marlin" in backends and "deep_gemm" in backends and "gpu.sm" not in backends


def test_definition_of_a_rule_id_shipped_and_open(server: Client, tmp_path: Path) -> None:
    text = GOOD + "  # see marlin-nvfp4-gpt_oss-topk-weights and fleet-no-marlin-moe-on-gb10\n"
    uri = server.open(tmp_path / "define.yaml", text)

    def define(line: int, character: int) -> dict[str, object]:
        result = server.request(
            "textDocument/definition",
            {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}},
        )
        assert isinstance(result, dict), result
        return result

    shipped = define(8, 20)
    target = shipped_rules_dir() / "known" / "marlin.yaml"
    assert shipped["uri"] == target.as_uri()
    line = shipped["range"]["start"]["line"]  # type: ignore[index]
    assert "id: marlin-nvfp4-gpt_oss-topk-weights" in target.read_text().splitlines()[line]
    local = define(8, 60)
    assert local["uri"] == uri and local["range"]["start"]["line"] == 1  # type: ignore[index]


def test_document_symbols_are_the_files_rules(server: Client) -> None:
    fleet = shipped_rules_dir().parent / "policy" / "examples" / "fleet.yaml"
    uri = server.open(fleet, fleet.read_text())
    symbols = server.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert [s["name"] for s in symbols] == [
        "fleet-no-marlin-moe-on-gb10",
        "fleet-prefer-triton-moe-on-hopper",
        "fleet-deepseek-v3-deep_gemm",
    ]


def test_shutdown_and_exit_end_the_server(tmp_path: Path) -> None:
    client = Client()
    client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}}, timeout=30)
    client.notify("initialized", {})
    assert client.close() == 0


def test_formatting_gives_the_text_fmt_writes(server: Client, tmp_path: Path) -> None:
    messy = "rules:\n- when: {gpu.sm: sm90}\n  id: x\n  deny: marlin\n  severity: perf\n  because: b\n  refs: [a#1]\n"
    uri = server.open(tmp_path / "messy.yaml", messy)
    params = {"textDocument": {"uri": uri}, "options": {"tabSize": 2, "insertSpaces": True}}
    [edit] = server.request("textDocument/formatting", params)
    assert edit["range"]["start"] == {"line": 0, "character": 0}
    assert edit["newText"].splitlines()[:3] == ["rules:", "  - id: x", "    when: {gpu.sm: sm90}"]
    server.change(uri, edit["newText"], version=2)
    assert server.request("textDocument/formatting", params) == []  # already as fmt writes it
    server.change(uri, "rules: [\n", version=3)
    assert server.request("textDocument/formatting", params) is None  # not YAML yet: nothing to do


def test_references_of_a_rule_id(server: Client, tmp_path: Path) -> None:
    crash = "marlin-ptx-jit-driver-older-than-toolkit"
    text = (
        f"rules:\n  - id: mine\n    when: {{gpu.sm: sm90}}\n    use: marlin\n    because: b\n    overrides: [{crash}]\n"
    )
    uri = server.open(tmp_path / "refs.yaml", text)
    found = server.request(
        "textDocument/references",
        {
            "textDocument": {"uri": uri},
            "position": {"line": 5, "character": 20},
            "context": {"includeDeclaration": True},
        },
    )
    where = {(f["uri"], f["range"]["start"]["line"]) for f in found}
    assert (uri, 5) in where
    shipped = shipped_rules_dir() / "known" / "marlin.yaml"
    line = next(n for n, t in enumerate(shipped.read_text().splitlines()) if f"id: {crash}" in t)
    assert (shipped.as_uri(), line) in where
    assert all(f["range"]["end"]["character"] - f["range"]["start"]["character"] == len(crash) for f in found)
