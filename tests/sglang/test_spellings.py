"""SGLang launch lines in every spelling SGLang's own parser accepts (issue #34).

SGLang reads its launch line with argparse and its default ``allow_abbrev``: a prefix of exactly
one option string is that option (``--tp 8`` is ``--tp-size 8``, as DeepSeek's model card writes
it), ``--flag=value`` is ``--flag value``, and a prefix of several is refused. ``explain`` read
``--tp 8`` as a flag that decides no kernel and decided with one GPU per model.

The spellings here are generated: for each flag of SGLang's one flag table and each of its names,
every prefix, read by Python's own argparse over every option string of the release's launch
parser (``options.json``, scanned from the wheel); each one it accepts must read in ``explain``
as the canonical spelling does, and each one it refuses must be refused in one line.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from argparse_oracle import spellings
from kernelpolicy.cli import main
from kernelpolicy.releases.sglang.flags import FLAGS
from kernelpolicy.releases.sglang.versions import SglangRelease, known_releases, latest_release
from kernelpolicy.releases.table import Flag

MODEL = "deepseek-ai/DeepSeek-V3"  # in rules/models.yaml: read without the network
LAUNCH = ("python3", "-m", "sglang.launch_server")
#: the oldest and the newest scanned release (their parsers were declared in different ways)
RELEASES = (next(iter(known_releases())), latest_release().version)


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["explain", "--gpu", "B200", "--json", "--no-env", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else {}), out.err


def _value(flag: Flag, release: SglangRelease) -> str:
    if flag.dest == "model_path":
        return MODEL
    if flag.store_true:
        return ""  # a switch: its spelling alone
    if flag.sample is not None:
        return flag.sample
    return next(v for v in release.flags[flag.names[0]] if v != "auto")  # the FP4 GEMM flag


def _spellings(flag: Flag, release: SglangRelease) -> tuple[list[str], list[str]]:
    """Every prefix of the flag's names that SGLang's parser reads as the flag, and every one
    it refuses as ambiguous."""
    return spellings(flag.names, release.options)


def _line(flag: Flag, spelled: list[str]) -> list[str]:
    model = [] if flag.dest == "model_path" else ["--model-path", MODEL]
    return [*LAUNCH, *model, *spelled]


def test_the_issue_line_reads_tp_as_tp_size(capsys: pytest.CaptureFixture[str]) -> None:
    """The line as the issue found it: `--tp 8` was ignored ("flags that decide no kernel") and
    MoE decided `flashinfer_trtllm`, where `--tp-size 8` decides `triton`."""
    code, short, err = _explain(capsys, "--", *LAUNCH, "--model", MODEL, "--tp", "8")
    assert code == 0 and "ignored" not in err, err
    _, full, _ = _explain(capsys, "--", *LAUNCH, "--model", MODEL, "--tp-size", "8")
    assert short["facts"]["deploy.tp"] == 8
    assert short["paths"] == full["paths"] and short["fingerprint"] == full["fingerprint"]
    assert short["paths"]["moe"]["backend"] == "triton"


def test_dp_is_read_as_dp_size_and_named_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """`--dp 8` is SGLang's `--dp-size 8`: a flag no rule reads, named as the line wrote it, and
    its value is not taken for anything else."""
    code, d, err = _explain(capsys, "--", *LAUNCH, "--model", MODEL, "--dp", "8", "--tp", "8")
    assert code == 0 and d["facts"]["deploy.tp"] == 8
    assert "flags that decide no kernel, ignored: `--dp`" in err


@pytest.mark.parametrize("release", RELEASES)
def test_the_table_names_every_spelling_sglang_declares(release: str) -> None:
    """Each flag of the table has exactly the option strings SGLang's parser declares for its
    dest (an alias the table lacked would be read as the flag's prefix, or not at all)."""
    rel = known_releases()[release]
    for flag in FLAGS:
        dest = rel.options[flag.names[0]]
        assert set(flag.names) == {o for o, d in rel.options.items() if d == dest}, flag.names


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("flag", FLAGS, ids=[f.dest for f in FLAGS])
def test_every_spelling_sglang_accepts_reads_as_the_canonical_one(
    release: str, flag: Flag, capsys: pytest.CaptureFixture[str]
) -> None:
    rel = known_releases()[release]
    accepted, _ = _spellings(flag, rel)
    assert set(flag.names) <= set(accepted)  # the full names too
    value = _value(flag, rel)
    engine = ("--engine", f"sglang=={release}")
    want = _explain(capsys, *engine, "--", *_line(flag, [flag.names[0], value] if value else [flag.names[0]]))
    assert want[0] in (0, 3, 5), want[2]
    forms = (
        [[[p] for p in accepted]]
        if flag.store_true
        else [[[p, value] for p in accepted], [[f"{p}={value}"] for p in accepted]]
    )
    for spelled in forms:
        for tokens in spelled:
            got = _explain(capsys, *engine, "--", *_line(flag, tokens))
            assert got[0] == want[0] and got[2] == want[2], tokens
            for key in ("facts", "paths", "fingerprint"):
                assert got[1][key] == want[1][key], (tokens, key)


def test_the_short_spellings_people_write_are_generated() -> None:
    """The generation reaches the spellings of the issue (else the test above proves little)."""
    rel = latest_release()
    by_dest = {f.dest: _spellings(f, rel) for f in FLAGS}
    assert "--tp" in by_dest["tp_size"][0] and "--tensor" in by_dest["tp_size"][0]
    assert "--moe-r" in by_dest["moe_runner_backend"][0] and "--fp8" in by_dest["fp8_gemm_runner_backend"][0]
    assert "--moe" in by_dest["moe_runner_backend"][1] and "--ep-" in by_dest["ep_size"][1]


@pytest.mark.parametrize("release", RELEASES)
def test_every_ambiguous_prefix_is_refused_in_one_line(release: str, capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang refuses a prefix of several options ("ambiguous option"); so does explain, in one
    line naming the release, never by guessing one of them."""
    rel = known_releases()[release]
    refused = sorted({p for f in FLAGS for p in _spellings(f, rel)[1]})
    assert "--moe" in refused
    for prefix in refused:
        for tokens in ([prefix, "8"], [f"{prefix}=8"]):
            code, _, err = _explain(capsys, "--engine", f"sglang=={release}", "--", *LAUNCH, "--model", MODEL, *tokens)
            assert code == 2 and len(err.strip().splitlines()) == 1, (tokens, err)
            assert f"ambiguous option `{prefix}`, which SGLang {release} refuses: it could match `" in err


def test_a_spelling_sglang_refuses_is_named_so(capsys: pytest.CaptureFixture[str]) -> None:
    """`--tp_size` is no option of SGLang (it does not read `_` as `-`, and refuses the line):
    not read as the tensor-parallel size, and named as unknown to SGLang, not as a flag that
    decides no kernel."""
    code, d, err = _explain(capsys, "--", *LAUNCH, "--model", MODEL, "--tp_size", "8")
    assert code == 0 and d["facts"]["deploy.tp"] == 1
    version = latest_release().version
    assert f"not options of SGLang {version}, which refuses the line; ignored: `--tp_size`" in err
    assert "(did you mean `--tp-size`?)" in err and "decide no kernel" not in err
