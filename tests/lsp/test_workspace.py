"""The language server's pure part (:mod:`kernelpolicy.lsp.workspace`): what a buffer's text
means, without the protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpolicy._paths import shipped_rules_dir
from kernelpolicy.lsp import workspace as ws


@pytest.fixture(scope="module")
def index() -> ws.Index:
    return ws.Index()


RULE = """\
rules:
  - id: mine
    when:
      gpu.sm: sm90
      {key}
    deny: marlin
    severity: perf
    because: measured
    refs: [test#1]
"""


def test_word_at_takes_ids_keys_and_backends() -> None:
    text = "  - id: marlin-nvfp4-gpt_oss-topk-weights\n    when: {gpu.sm: sm90}\n"
    assert ws.word_at(text, 0, 12) == "marlin-nvfp4-gpt_oss-topk-weights"
    assert ws.word_at(text, 1, 14) == "gpu.sm"  # the key, without its colon
    assert ws.word_at(text, 5, 0) is None
    assert ws.word_at(text, 1, 1) is None  # indentation


def test_a_yaml_error_is_at_its_line_without_loading_anything(tmp_path: Path) -> None:
    [d] = ws.diagnose("rules:\n  - id: x\n    when: {gpu.sm: sm90\n", tmp_path / "x.yaml", coverage=False)
    assert (d.code, d.severity, d.line) == ("yaml", "error", 3)


def test_a_schema_error_names_the_rule_at_its_line(tmp_path: Path) -> None:
    text = RULE.format(key="").replace("    because: measured\n", "")
    [d] = ws.diagnose(text, tmp_path / "x.yaml", coverage=False)
    assert (d.code, d.line, d.rule) == ("schema", 1, "mine")
    assert d.message == "missing field `because`"


def test_an_unknown_fact_key_is_an_error_at_the_key(tmp_path: Path) -> None:
    text = RULE.format(key="gpu.smm: sm90")
    found = ws.diagnose(text, tmp_path / "x.yaml", coverage=False)
    assert [(d.code, d.line) for d in found] == [("schema", 4)], found
    assert "gpu.smm" in found[0].message


def test_a_buffer_of_a_shipped_file_takes_its_place() -> None:
    """Not a second copy of the file (every rule a duplicate id): the typed text replaces it."""
    path = shipped_rules_dir() / "known" / "marlin.yaml"
    text = path.read_text()
    assert ws.diagnose(text, path, coverage=False) == []
    broken = text.replace("    severity: accuracy\n", "    severity: sometimes\n", 1)
    [d] = ws.diagnose(broken, path, coverage=False)
    assert (d.code, d.rule) == ("schema", "marlin-mxfp4-gpt_oss-gb10-harmony")
    assert d.message.startswith("`severity`: input should be")
    assert (d.line, d.column) == (broken.splitlines().index("    severity: sometimes"), 14)


def test_a_case_file_is_checked_for_its_shape(tmp_path: Path) -> None:
    [d] = ws.diagnose("name: x\ngiven: {gpu: sm90}\n", tmp_path / "case.yaml")
    assert (d.code, d.message) == ("case", "a case needs `given` and `expect` mappings")
    assert ws.diagnose("name: x\ngiven: {gpu: sm90}\nexpect: {moe: triton}\n", tmp_path / "case.yaml") == []


def test_a_saved_case_file_is_run_as_kernelpolicy_test_runs_it(tmp_path: Path) -> None:
    case = "name: moe on h100\ngiven: {{gpu: sm90, model: deepseek-ai/DeepSeek-V3}}\nexpect:\n  moe: {expected}\n"
    path = tmp_path / "case.yaml"
    failing = case.format(expected="no_such_backend")
    path.write_text(failing)
    [d] = ws.diagnose(failing, path)
    assert (d.code, d.line) == ("case", 2)
    assert d.message.startswith("case `moe on h100`: ") and "no_such_backend" in d.message
    edited = case.format(expected="still_typing")  # not saved: its shape only
    assert ws.diagnose(edited, path) == []


def test_hover_on_a_fact_key_says_its_values(index: ws.Index) -> None:
    text = RULE.format(key="")
    said = ws.hover(text, 3, 8, index)
    assert said is not None and said.startswith("**gpu.sm** (enum): ") and "`sm121`" in said
    env = ws.hover("when: {deploy.env.VLLM_USE_DEEP_GEMM: '1'}\n", 0, 12, index)
    assert env is not None and "environment variable `VLLM_USE_DEEP_GEMM`" in env


def test_hover_on_a_shipped_rule_says_what_it_does_and_where(index: ws.Index) -> None:
    said = ws.hover("# marlin-ptx-jit-driver-older-than-toolkit\n", 0, 5, index)
    assert said is not None
    assert said.startswith("**marlin-ptx-jit-driver-older-than-toolkit**: require `marlin` (crash)")
    assert "when `gpu.sm` = sm90 and `cuda.version` >=12.9" in said
    assert "update the NVIDIA driver" in said  # its help
    assert "vllm#38619, vllm#38669" in said
    assert "rules/known/marlin.yaml:" in said


def test_hover_on_a_rule_of_the_buffer_and_on_nothing(index: ws.Index) -> None:
    text = RULE.format(key="")
    mine = ws.hover(text, 1, 10, index)
    assert mine is not None and mine.startswith("**mine**: deny `marlin`") and "measured" in mine
    assert ws.hover(text, 6, 16, index) is None  # `perf`: a severity, none of ours


@pytest.mark.parametrize(
    ("text", "line", "column", "kind", "expected"),
    [
        ("    when: {gpu.sm: sm90, q", 0, 26, "fact", "quant.moe_scheme"),
        ("  - when: {", 0, 11, "fact", "gpu.family"),
        ("    unless: {gpu.family: ", 0, 25, "value", "sm120"),
        ("rules:\n  - id: a\n    when:\n      gpu.sm: sm90\n      ", 4, 6, "fact", "deploy.lora"),
        ("rules:\n  - id: a\n    when:\n      gpu.family: ", 3, 18, "value", "sm100"),
        ("    deny: ", 0, 10, "backend", "deep_gemm"),
        ("    prefer: [triton, ", 0, 22, "backend", "marlin"),
        ("    overrides: [", 0, 16, "rule", "marlin-ptx-jit-driver-older-than-toolkit"),
    ],
)
def test_completion_by_context(index: ws.Index, text: str, line: int, column: int, kind: str, expected: str) -> None:
    got = ws.completions(text, line, column, index)
    assert {c.kind for c in got} == {kind}
    assert expected in [c.label for c in got]


def test_overrides_completes_crash_rules_only(index: ws.Index) -> None:
    got = {c.label for c in ws.completions("    overrides: [", 0, 16, index)}
    assert "marlin-ptx-jit-driver-older-than-toolkit" in got  # severity: crash
    assert "marlin-nvfp4-gpt_oss-topk-weights" not in got  # severity: accuracy: a `use` wins over it unnamed
    assert "catalog.moe.marlin" in got  # a catalog requirement is overridden by name too


def test_no_completion_outside_conditions_and_effects(index: ws.Index) -> None:
    assert ws.completions("rules:\n  - id: a\n    because: ", 2, 13, index) == []
    assert ws.completions("rules:\n  - id: a\n    refs:\n      ", 3, 6, index) == []


def test_symbols_of_each_section_and_of_a_half_typed_file() -> None:
    text = (
        "rules:\n  - id: r1\n    when: {gpu.sm: sm90}\n    deny: marlin\n"
        "implies:\n  - id: i1\n    when: {gpu.sm: sm90}\n    set: {gpu.family: sm90}\n"
    )
    assert [(s.name, s.kind, s.line, s.end_line) for s in ws.symbols(text)] == [
        ("r1", "rule", 1, 3),
        ("i1", "implication", 5, 7),
    ]
    assert ws.symbols("rules:\n  - id: r1\n    when: {gpu.sm: sm9") == []
    assert ws.symbols("- just a list\n") == []


def test_definition_prefers_an_open_buffer_then_the_shipped_tables(index: ws.Index, tmp_path: Path) -> None:
    text = "# marlin-nvfp4-gpt_oss-topk-weights\n"
    shipped = ws.definition(text, 0, 10, index)
    assert shipped is not None and shipped.path == shipped_rules_dir() / "known" / "marlin.yaml"
    assert "marlin-nvfp4-gpt_oss-topk-weights" in shipped.path.read_text().splitlines()[shipped.line]
    other = tmp_path / "mine.yaml"
    opened = {other: "rules:\n  - id: marlin-nvfp4-gpt_oss-topk-weights\n"}
    assert ws.definition(text, 0, 10, index, opened) == ws.Location(other, 1, 8)
    assert ws.definition("# no-such-rule\n", 0, 4, index) is None


def test_without_pygls_the_command_says_which_extra_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from kernelpolicy._install import install_command
    from kernelpolicy.cli import main

    monkeypatch.setitem(sys.modules, "pygls", None)  # as if not installed
    assert main(["lsp"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    command = install_command("lsp")  # from this checkout: kernelpolicy is not on the package index
    assert command.startswith("pip install ") and "[lsp]" in command
    assert err == f"kernelpolicy: error: `kernelpolicy lsp` needs `pygls`: install the `lsp` extra (`{command}`)\n"


def test_a_yaml_file_that_is_not_kernelpolicys_gets_no_diagnostics(tmp_path: Path) -> None:
    """Editors send every YAML file to the server: a CI workflow is not a rule file with errors."""
    workflow = "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
    assert ws.diagnose(workflow, tmp_path / "ci.yaml") == []
    assert ws.diagnose("jobs: {test: [\n", tmp_path / "ci.yaml") == []
    # ours by its keys, by its schema line, or by where it is
    assert ws.diagnose("rules:\n  - id: x\n  when: [\n", tmp_path / "mine.yaml") != []
    assert ws.diagnose("# yaml-language-server: $schema=schemas/rules.schema.json\nfoo: [\n", tmp_path / "a.yaml") != []
    assert ws.is_ours("foo: 1\n", shipped_rules_dir() / "new.yaml")


def test_formatted_is_fmts_text_or_none(tmp_path: Path) -> None:
    text = "rules:\n- when: {gpu.sm: sm90}\n  id: x\n  deny: marlin\n"
    assert ws.formatted(text, tmp_path / "x.yaml") == "rules:\n  - id: x\n    when: {gpu.sm: sm90}\n    deny: marlin\n"
    assert ws.formatted("rules: [\n", tmp_path / "x.yaml") is None
    assert ws.formatted("on: [push]\n", tmp_path / "ci.yaml") is None  # not ours
    assert ws.formatted("given: {gpu: sm90}\nexpect: {moe: triton}\n", tmp_path / "case.yaml") is None


def test_references_of_a_rule_id_in_the_buffer_open_files_and_the_tables(index: ws.Index, tmp_path: Path) -> None:
    crash = "marlin-ptx-jit-driver-older-than-toolkit"
    text = f"rules:\n  - id: mine\n    use: marlin\n    overrides: [{crash}]\n"
    other = tmp_path / "other.yaml"
    found = ws.references(text, 3, 20, tmp_path / "mine.yaml", index, {other: f"# see {crash}\n"})
    shipped = shipped_rules_dir() / "known" / "marlin.yaml"
    assert ws.Location(tmp_path / "mine.yaml", 3, 16) in found
    assert ws.Location(other, 0, 6) in found
    assert [f for f in found if f.path == shipped] == [
        ws.Location(shipped, n, line.index(crash))
        for n, line in enumerate(shipped.read_text().splitlines())
        if crash in line
    ]
    assert ws.references(text, 2, 10, tmp_path / "mine.yaml", index) == []  # `marlin`: a backend


def test_the_index_is_loaded_again_when_the_shipped_tables_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#37: an edit saved under rules/ was not seen by hover and completion until the server
    restarted; the index now notices the folder changed and the server loads it again."""
    import shutil

    rules = tmp_path / "rules"
    shutil.copytree(shipped_rules_dir(), rules)
    monkeypatch.setattr("kernelpolicy.dsl.loader.shipped_rules_dir", lambda: rules)
    monkeypatch.setattr("kernelpolicy.lsp.workspace.shipped_rules_dir", lambda: rules)
    before = ws.Index()
    assert "acme-new-rule" not in before.rules and not before.stale()
    (rules / "known" / "acme.yaml").write_text(
        "rules:\n  - id: acme-new-rule\n    when: {gpu.sm: sm121}\n    paths: [moe]\n    deny: marlin\n"
        "    severity: perf\n    because: measured slower here\n",
        encoding="utf-8",
    )
    assert before.stale()
    after = ws.Index()
    assert "acme-new-rule" in after.rules and not after.stale()
    assert "measured slower here" in (ws.hover("see acme-new-rule", 0, 6, after) or "")
