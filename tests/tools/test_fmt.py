"""`kernelpolicy fmt`: canonical layout, idempotent, comments and data kept, `--check` for CI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("ruamel.yaml")

from kernelpolicy.cli import main
from kernelpolicy.tools.fmt import SCHEMA_HEADER, format_text

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for d in ("rules", "policy") for p in (ROOT / d).rglob("*.yaml"))

MESSY = """\
# operator policy
rules:
  - because: GB10 runs Triton MoE here   # why
    severity: perf
    refs:
      - vllm#1
      - vllm#2
    id: prefer-triton
    prefer:
      - triton
      - marlin
    when:
      gpu.sm: sm121
      quant.moe_scheme: [fp8_block, mxfp4]
    paths: [moe]
order: []
backends:
  - requires:
      any:
        - gpu.family: sm90
        - gpu.family: sm100
    paths: [moe]
    backend: triton
"""

CANONICAL = """\
# operator policy
backends:
  - backend: triton
    paths: [moe]
    requires:
      any:
        - {gpu.family: sm90}
        - {gpu.family: sm100}
order: []
rules:
  - id: prefer-triton
    when: {gpu.sm: sm121, quant.moe_scheme: [fp8_block, mxfp4]}
    paths: [moe]
    prefer: [triton, marlin]
    severity: perf
    because: GB10 runs Triton MoE here   # why
    refs: [vllm#1, vllm#2]
"""


def test_canonical_layout() -> None:
    assert format_text(MESSY) == CANONICAL
    assert format_text(CANONICAL) == CANONICAL


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_files_keep_data_and_comments_and_format_is_idempotent(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    once = format_text(text, file=path)
    assert format_text(once, file=path) == once
    assert yaml.safe_load(once) == yaml.safe_load(text)
    comments = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("#")]
    comments += [
        "#" + ln.split(" #", 1)[1] for ln in text.splitlines() if " #" in ln and not ln.strip().startswith("#")
    ]
    assert [c for c in comments if c not in once] == []
    assert once.startswith(SCHEMA_HEADER)  # the checkout has schemas/ above it


def test_shipped_files_are_formatted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fmt", "--check", str(ROOT / "rules"), str(ROOT / "policy")]) == 0, capsys.readouterr().out


def test_schema_header_found_kept_or_given(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "rules.schema.json").write_text("{}")
    f = tmp_path / "policy" / "prod.yaml"
    f.parent.mkdir()
    assert format_text("rules: []\n", file=f) == f"{SCHEMA_HEADER}../schemas/rules.schema.json\nrules: []\n"
    kept = f"{SCHEMA_HEADER}https://example.org/r.json\nrules: []\n"
    assert format_text(kept, file=f) == kept
    assert format_text("rules: []\n", schema="s.json") == f"{SCHEMA_HEADER}s.json\nrules: []\n"
    assert format_text(kept, file=f, schema="none") == "rules: []\n"
    # outside a checkout with schemas/: no line (the schema this install ships is a path of this
    # machine, which the operator's repository would commit)
    assert format_text("rules: []\n", file=Path("/nowhere/p.yaml")) == "rules: []\n"


@pytest.mark.parametrize(
    "private",
    [
        "/home/op/.venv/lib/python3.12/site-packages/kernelpolicy/_data/schemas/rules.schema.json",
        "/home/op/.cache/pre-commit/repoab12cd/schemas/rules.schema.json",
        "file:///opt/kp/schemas/rules.schema.json",
        "~/kp/schemas/rules.schema.json",
        "C:\\Users\\op\\kp\\schemas\\rules.schema.json",
    ],
)
def test_a_machine_private_schema_line_is_never_written_or_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], private: str
) -> None:
    """Found as: `fmt` wrote `$schema=` into the user's venv (or a pre-commit cache folder) into
    the operator's repository. Such a line becomes the `schemas/` folder above the file
    (relative), or goes, with a note saying how to give editors a schema."""
    repo = tmp_path / "repo"
    f = repo / "policy" / "prod.yaml"
    f.parent.mkdir(parents=True)
    f.write_text(f"{SCHEMA_HEADER}{private}\nrules: []\n", encoding="utf-8")
    assert main(["fmt", "--check", str(f)]) == 1
    assert main(["fmt", str(f)]) == 0
    assert f.read_text(encoding="utf-8") == "rules: []\n"
    err = capsys.readouterr().err
    assert f"note: no `schemas/` folder above `{f}`: no `$schema` line written" in err
    assert "kernelpolicy schema --write schemas" in err
    (repo / "schemas").mkdir()
    assert main(["schema", "--write", str(repo / "schemas")]) == 0
    f.write_text(f"{SCHEMA_HEADER}{private}\nrules: []\n", encoding="utf-8")
    assert main(["fmt", str(f)]) == 0
    assert f.read_text(encoding="utf-8") == f"{SCHEMA_HEADER}../schemas/rules.schema.json\nrules: []\n"
    assert "note:" not in capsys.readouterr().err


def test_check_changes_nothing_and_fails_then_fmt_fixes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(MESSY, encoding="utf-8")
    assert main(["fmt", "--check", "--diff", str(f)]) == 1
    out = capsys.readouterr().out
    assert f"would reformat {f}" in out and "+    prefer: [triton, marlin]" in out
    assert f.read_text(encoding="utf-8") == MESSY
    assert main(["fmt", str(tmp_path)]) == 0
    assert f.read_text(encoding="utf-8") == CANONICAL  # no schemas/ above tmp_path: no schema line
    assert main(["fmt", "--check", str(f)]) == 0


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("rules:\n  - id: x\n    when: {a: [\n", encoding="utf-8")
    assert main(["fmt", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        "\n" not in err and f"{f}:" in err and "invalid YAML" in err
    )  # the loader's words, as every command says them
    assert main(["fmt", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_a_commented_flow_list_keeps_its_items_and_comment() -> None:
    text = (
        "rules:\n  - id: r\n    when: {gpu.sm: sm90}\n"
        "    backend: [deep_gemm, flashinfer_deep_gemm]   # the latter falls back to DeepGEMM\n"
        "    require: {vllm.version: '<0.25'}\n    severity: crash\n    because: x\n"
    )
    out = format_text(text)
    assert "backend: [deep_gemm, flashinfer_deep_gemm]   # the latter falls back to DeepGEMM\n" in out
    assert yaml.safe_load(out) == yaml.safe_load(text)


def test_formatting_never_changes_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpolicy.tools import fmt
    from kernelpolicy.tools.fmt import FormatError

    def lossy(node: object, key: str | None = None, condition: bool = False) -> None:
        if key == "rules":
            node.pop()  # type: ignore[attr-defined]  # a layout step with a bug drops a rule

    monkeypatch.setattr(fmt, "_style", lossy)
    with pytest.raises(FormatError, match="would change its data"):
        format_text(CANONICAL)


def test_files_are_read_as_the_loader_reads_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 1_100_000 + "\n", encoding="utf-8")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, needle in ((big, "larger than"), (binary, "not UTF-8"), (fifo, "not a regular file")):
        assert main(["fmt", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and str(path) in err and needle in err
