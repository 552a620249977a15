"""Releases outside the modelled range (issue #35): an engine release older than the oldest
scanned one is answered with one warning saying what the answer rests on."""

from __future__ import annotations

import json

import pytest

from kernelpolicy.cli import main
from kernelpolicy.releases.range import older_than_modelled, oldest_modelled, unmodelled_warning

_BASE = ["explain", "--gpu", "H100", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "--no-env"]


def _warnings(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main([*_BASE, *args, "--json"]) == 0
    return [w for w in json.loads(capsys.readouterr().out)["warnings"] if "older than the oldest" in w]


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (
            ["--engine", "vllm==0.20.0"],
            "vLLM `0.20.0` is older than the oldest release kernelpolicy models (vLLM 0.24.0)",
        ),
        (
            ["--engine", "sglang==0.5.5"],
            "SGLang `0.5.5` is older than the oldest release kernelpolicy models (SGLang 0.5.12)",
        ),
        (["--fact", "vllm.version=0.19.1"], "vLLM `0.19.1` is older than the oldest release kernelpolicy models"),
        (["--engine", "vllm==0.24.0"], None),
        (["--engine", "sglang==0.5.23"], None),
    ],
)
def test_an_older_release_is_answered_with_one_warning(
    capsys: pytest.CaptureFixture[str], args: list[str], want: str | None
) -> None:
    got = _warnings(capsys, *args)
    if want is None:
        assert got == []
    else:
        [line] = got
        assert line.startswith(want) and "\n" not in line
        assert "default orders of the modelled releases" in line and "are unknown" in line


def test_the_text_output_shows_it_and_an_unpublished_release_is_still_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*_BASE, "--engine", "vllm==0.20.0"]) == 0
    assert "older than the oldest release kernelpolicy models" in capsys.readouterr().out
    # vLLM went from 0.21.0 to 0.22.0: 0.21.1 was never published, so it is a typo, not an old release
    assert main([*_BASE, "--engine", "vllm==0.21.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a vLLM release kernelpolicy knows" in err[0]


def test_the_range_is_the_scanned_releases() -> None:
    assert str(oldest_modelled("vllm")) == "0.24.0" and str(oldest_modelled("sglang")) == "0.5.12"
    assert older_than_modelled("vllm", "0.21.0", published=True)
    assert not older_than_modelled("vllm", "0.21.1", published=True)  # never published
    assert not older_than_modelled("sglang", "0.5.12.post1") and not older_than_modelled("vllm", "not a version")
    assert unmodelled_warning("vllm", "0.34.0") is None
