"""vLLM serve lines in every spelling vLLM's own parser accepts (issue #34).

vLLM's ``FlexibleArgumentParser`` writes ``_`` as ``-`` in a long flag and keeps argparse's
default ``allow_abbrev``: a prefix of exactly one option string is that option
(``--tensor-parallel 2`` is ``--tensor-parallel-size 2``), ``--flag=value`` is ``--flag value``,
and a prefix of several is refused ("ambiguous option"). ``explain`` read ``--tensor-parallel 2``
as a flag that decides no kernel and decided with one GPU.

The spellings are generated: for each long name of vLLM's one flag table, every prefix, read by
Python's own argparse over every option string of the release's serve-line parser
(``releases/vllm/options.json``, written from each release's own parser and checked against it
in tests/vllm/test_spellings.py); each one it accepts must read in ``explain`` as the canonical
spelling does, and each one it refuses must be refused in one line naming the release.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from argparse_oracle import spellings
from kernelpolicy.cli import main
from kernelpolicy.releases.table import Flag
from kernelpolicy.releases.vllm.flags import FLAGS
from kernelpolicy.releases.vllm.options import launch_options

MODEL = "Qwen/Qwen3-30B-A3B-FP8"  # in rules/models.yaml: read without the network
RELEASES = tuple(launch_options())
#: the flags a line spells (the model and a --config file are read otherwise)
SPELLED = [f for f in FLAGS if f.dest not in ("model", "vllm_config", "revision", "download_dir")]


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["explain", "--gpu", "H100", "--json", "--no-env", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else {}), out.err


def _spellings(flag: Flag, options: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Every prefix of the flag's long names vLLM's parser reads as the flag, and every one it
    refuses as ambiguous."""
    return spellings([n for n in flag.names if n.startswith("--")], options)


def _tokens(flag: Flag, name: str) -> list[list[str]]:
    if flag.store_true:
        return [[name]]
    value = str(flag.sample or ("auto" if flag.dest == "kv_cache_dtype" else "2"))
    return [[name, value], [f"{name}={value}"]]


def test_there_are_scanned_options() -> None:
    assert RELEASES and all(len(launch_options()[r]) > 200 for r in RELEASES)


@pytest.mark.parametrize("release", RELEASES)
def test_the_table_names_the_options_vllm_declares(release: str) -> None:
    """Every spelling of the table is an option of the release's parser, of one dest."""
    options = launch_options()[release]
    for flag in SPELLED:
        assert all(n in options for n in flag.names), flag.names
        assert len({options[n] for n in flag.names}) == 1, flag.names


def test_the_issue_line_reads_the_abbreviation(capsys: pytest.CaptureFixture[str]) -> None:
    """`--tensor-parallel 2` was "ignored" and decided with tp 1; vLLM reads it as tp 2."""
    code, short, err = _explain(capsys, "--", "vllm", "serve", MODEL, "--tensor-parallel", "2")
    assert code == 0 and "ignored" not in err, err
    _, full, _ = _explain(capsys, "--", "vllm", "serve", MODEL, "--tensor-parallel-size", "2")
    assert short["facts"]["deploy.tp"] == 2 and short["fingerprint"] == full["fingerprint"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("flag", SPELLED, ids=[f.dest for f in SPELLED])
def test_every_spelling_vllm_accepts_reads_as_the_canonical_one(
    release: str, flag: Flag, capsys: pytest.CaptureFixture[str]
) -> None:
    options = launch_options()[release]
    accepted, _ = _spellings(flag, options)
    assert {n for n in flag.names if n.startswith("--")} <= set(accepted)
    engine = ("--engine", f"vllm=={release}")
    canonical = _tokens(flag, flag.names[0])[0]
    want = _explain(capsys, *engine, "--", "vllm", "serve", MODEL, *canonical)
    assert want[0] in (0, 3, 5), want[2]
    underscored = [t.replace("-", "_").replace("__", "--", 1) if t.startswith("--") else t for t in canonical]
    lines = [tokens for name in (*accepted, *flag.names) for tokens in _tokens(flag, name)]
    for tokens in [*lines, underscored]:
        got = _explain(capsys, *engine, "--", "vllm", "serve", MODEL, *tokens)
        assert got[0] == want[0] and got[2] == want[2], tokens
        for key in ("facts", "paths", "fingerprint"):
            assert got[1][key] == want[1][key], (tokens, key)


@pytest.mark.parametrize("release", RELEASES)
def test_every_ambiguous_prefix_is_refused_in_one_line(release: str, capsys: pytest.CaptureFixture[str]) -> None:
    options = launch_options()[release]
    refused = sorted({p for f in SPELLED for p in _spellings(f, options)[1]})
    assert "--max-num" in refused or "--enable" in refused
    for prefix in refused:
        code, _, err = _explain(capsys, "--engine", f"vllm=={release}", "--", "vllm", "serve", MODEL, prefix, "8")
        assert code == 2 and len(err.strip().splitlines()) == 1, (prefix, err)
        assert f"ambiguous option `{prefix}`, which vLLM {release} refuses: it could match `" in err
