"""Hostile input, round three (N3, N14 and the fmt items of the UX round): `fmt` never loses
content, never writes outside what it was given, and says how to install what it lacks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .helpers import cli, one_error_line

pytest.importorskip("ruamel.yaml")

RULE = "rules:\n  - id: op-x\n    when: {gpu.sm: sm90}\n    deny: marlin\n    because: x\n"


def _fmt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return cli(capsys, "fmt", "--schema", "s.json", *args)


@pytest.mark.parametrize(
    "text",
    [
        "# rules:\n#   - id: op-x\n#     deny: marlin\n",
        "# yaml-language-server: $schema=../schemas/rules.schema.json\n# only a note\n",
        "\n\n# a\n\n",
        "",
        "---\n# nothing yet\n",
    ],
)
def test_a_file_without_a_document_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(text, encoding="utf-8")
    code, out, _ = _fmt(capsys, str(f))
    assert code == 0 and "reformatted" not in out
    assert f.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    ("text", "comment"),
    [
        (
            "rules:\n  - id: op-x\n    when: {gpu.sm: [sm90,   # hopper\n      sm100]}\n    deny: marlin\n    because: x\n",
            "# hopper",
        ),
        (
            "rules:\n  - id: op-x\n    when: {gpu.sm: sm121,   # inline\n      quant.scheme: fp8_block}\n    deny: marlin\n    because: x\n",
            "# inline",
        ),
        (
            "rules:\n  - id: op-x\n    refs: [a,  # first\n      b]\n    when: {gpu.sm: sm90}\n    deny: marlin\n    because: x\n",
            "# first",
        ),
    ],
)
def test_a_comment_the_layout_would_drop_refuses_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, comment: str
) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(text, encoding="utf-8")
    code, _, err = _fmt(capsys, str(f))
    assert code == 2
    line = one_error_line(err)
    assert comment in line and f"{f}:" in line
    assert f.read_text(encoding="utf-8") == text  # left as it is
    assert _fmt(capsys, "--check", str(f))[0] == 2


def test_a_literal_block_with_trailing_blanks_is_formatted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    text = "rules:\n  - because: |\n      line one   \n      line two\t\n    id: op-x\n    deny: marlin\n    when: {gpu.sm: sm90}\n"
    f = tmp_path / "p.yaml"
    f.write_text(text, encoding="utf-8")
    code, _out, err = _fmt(capsys, str(f))
    assert code == 0, err
    assert yaml.safe_load(f.read_text(encoding="utf-8")) == yaml.safe_load(text)
    assert _fmt(capsys, "--check", str(f))[0] == 0  # and it settles


def test_fmt_of_a_folder_does_not_write_through_a_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside" / "target.yaml"
    outside.parent.mkdir()
    messy = "rules:\n  - because: x\n    id: op-x\n    deny: marlin\n    when: {gpu.sm: sm90}\n"
    outside.write_text(messy, encoding="utf-8")
    pol = tmp_path / "pol"
    pol.mkdir()
    (pol / "link.yaml").symlink_to(outside)
    (pol / "own.yaml").write_text(messy, encoding="utf-8")
    code, _out, err = _fmt(capsys, str(pol))
    assert code == 0
    assert outside.read_text(encoding="utf-8") == messy  # not rewritten through the link
    assert "link.yaml" in err and "skipped" in err
    assert (pol / "link.yaml").is_symlink()
    assert (pol / "own.yaml").read_text(encoding="utf-8") != messy


@pytest.mark.parametrize("schema", ["x\nrules: [{id: injected}]", "a b", "x\x1b[2J", "", "\t"])
def test_a_schema_that_is_not_one_uri_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schema: str
) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(RULE, encoding="utf-8")
    code, _, err = cli(capsys, "fmt", "--schema", schema, str(f))
    assert code == 2
    assert "--schema" in one_error_line(err)
    assert f.read_text(encoding="utf-8") == RULE


def test_without_ruamel_the_install_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "ruamel" or m.startswith("ruamel.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ruamel", None)  # import ruamel.yaml fails as when not installed
    f = tmp_path / "p.yaml"
    f.write_text(RULE, encoding="utf-8")
    code, _, err = _fmt(capsys, str(f))
    assert code == 2
    line = one_error_line(err)
    from kernelpolicy._install import install_command

    assert install_command("fmt") in line and "ruamel.yaml" in line and "'kernelpolicy[fmt]'" not in line
