"""The audit of issue #35: the rules it found off say what their threads and measurements say."""

from __future__ import annotations

from kernelpolicy.dsl.loader import load_policy


def _rule(rid: str):  # type: ignore[no-untyped-def]
    [r] = [r for r in load_policy(environ=False).rules if r.id == rid]
    return r


def test_the_torch_block_fp8_limit_cites_the_measurement_not_an_unrelated_thread() -> None:
    r = _rule("torch-block-fp8-m-multiple-of-4")
    assert "pytorch/pytorch#158037" not in r.refs  # the thread does not state the M % 4 limit
    assert r.refs[0] == "docs/measurements/2026-12-04-h200-bench.md"
    assert "own H200 measurement" in r.because


def test_the_sm103_mxfp4_hang_is_intermittent_and_config_dependent() -> None:
    r = _rule("flashinfer_trtllm-mxfp4-sm103-hang")
    assert "never finishes" not in r.because
    assert "intermittently" in r.because and "about 2 h" in r.because


def test_the_0_6_8_hang_window_says_what_it_rests_on() -> None:
    r = _rule("flashinfer_trtllm-nvfp4-fi-0.6.8-0.6.12-hang")
    assert "rests on two reports" in r.because and "0.6.9 to 0.6.12" in r.because
