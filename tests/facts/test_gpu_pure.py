from __future__ import annotations

import pytest

from kernelpolicy.facts.providers._capabilities import cutlass_dsl_sm121a_ok, triton_target_ok
from kernelpolicy.facts.providers._gpu import (
    capability_facts,
    cuda_version_text,
    torch_arch_ok,
    visible_physical_indices,
)

TORCH_211 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # measured on the H200


@pytest.mark.parametrize(
    ("cc", "sm", "family", "tcgen05"),
    [
        ((9, 0), "sm90", "sm90", False),
        ((10, 0), "sm100", "sm100", True),
        ((10, 3), "sm103", "sm100", True),
        ((12, 0), "sm120", "sm120", False),
        ((12, 1), "sm121", "sm120", False),  # GB10 is family 120, not 100
    ],
)
def test_capability_facts(cc: tuple[int, int], sm: str, family: str, tcgen05: bool) -> None:
    got = capability_facts(*cc)
    assert got == {
        "gpu.cc": f"{cc[0]}.{cc[1]}",
        "gpu.sm": sm,
        "gpu.family": family,
        "gpu.has_tcgen05": tcgen05,
    }


def test_capability_unknown_gpu_keeps_only_cc() -> None:
    assert capability_facts(7, 5) == {"gpu.cc": "7.5"}
    assert "gpu.has_tcgen05" not in capability_facts(11, 0)  # Thor: not known, not guessed


def test_cuda_version_text() -> None:
    assert cuda_version_text(13000) == "13.0"
    assert cuda_version_text(12090) == "12.9"


@pytest.mark.parametrize(
    ("cc", "ok"),
    [((9, 0), True), ((12, 1), True), ((10, 3), True), ((8, 9), True), ((11, 0), False)],
)
def test_torch_arch_ok(cc: tuple[int, int], ok: bool) -> None:
    # GB10 (12.1) runs the sm_120 SASS; nothing in torch 2.11 runs on sm110
    assert torch_arch_ok(TORCH_211, *cc) is ok


def test_torch_arch_ok_ptx_and_suffixes() -> None:
    assert torch_arch_ok(["sm_90a"], 9, 0) is False  # arch-specific: no guarantee
    assert torch_arch_ok(["compute_90"], 12, 1) is True  # PTX JIT
    assert torch_arch_ok([], 9, 0) is False


UUIDS = ["GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333"]


@pytest.mark.parametrize(
    ("env", "want"),
    [
        (None, [0, 1, 2]),
        ("", []),
        ("2,0", [2, 0]),
        ("1,7,0", [1]),  # CUDA stops at the first invalid entry
        ("-1", []),
        ("GPU-bbbb", [1]),
        ("cccc", [2]),
        ("GPU-zzzz,0", []),
        ("0,0", [0]),
    ],
)
def test_visible_physical_indices(env: str | None, want: list[int]) -> None:
    assert visible_physical_indices(env, 3, UUIDS) == want


@pytest.mark.parametrize(
    ("version", "target", "ok"),
    [
        ("3.6.0", "sm121a", True),
        ("3.5.0", "sm121a", False),
        ("3.5.1", "sm120a", True),
        ("3.2.0", "sm120a", False),
        ("3.3.0", "sm120a", True),
        ("2.3.0", "sm90a", None),
        ("3.7.0+git1234", "sm121a", True),
        ("garbage", "sm121a", None),
    ],
)
def test_triton_target_ok(version: str, target: str, ok: bool | None) -> None:
    assert triton_target_ok(version, target) is ok


def test_cutlass_dsl_sm121a() -> None:
    assert cutlass_dsl_sm121a_ok("4.6.0") is True
    assert cutlass_dsl_sm121a_ok("4.5.1") is False
