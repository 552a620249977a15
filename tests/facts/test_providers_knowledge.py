"""Providers of the knowledge vocabulary: the JIT nvcc, cuDNN and FlashInfer companion packages."""

from __future__ import annotations

import json
import stat
from typing import TYPE_CHECKING

import pytest

from kernelpolicy.facts import FACT_KEYS
from kernelpolicy.facts.providers import Context, NvccProvider, PackagesProvider, ScriptRun, _packages
from kernelpolicy.facts.providers._nvcc import find_nvcc, parse_nvcc_version, toolkit_json_version
from kernelpolicy.facts.providers._packages import flashinfer_cubin_matches

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

NVCC_12_8 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0
"""


def toolkit(root: Path, nvcc_version: str | None = None) -> Path:
    """A fake CUDA toolkit under *root*: bin/nvcc, and version.json when a version is given."""
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    if nvcc_version is not None:
        (root / "version.json").write_text(json.dumps({"cuda_nvcc": {"name": "CUDA NVCC", "version": nvcc_version}}))
    return nvcc


class FakeRunner:
    def __init__(self, run: ScriptRun | None = None, error: OSError | None = None):
        self.run, self.error = run, error
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> ScriptRun:
        self.calls.append(list(argv))
        assert timeout <= 15.0
        if self.error is not None:
            raise self.error
        assert self.run is not None
        return self.run


# --- nvcc ---------------------------------------------------------------------------------


def test_cuda_home_wins_over_path_and_default(tmp_path: Path) -> None:
    home, on_path, default = (toolkit(tmp_path / d) for d in ("home", "path", "default"))
    env = {"CUDA_HOME": str(tmp_path / "home"), "PATH": f"/nowhere:{on_path.parent}"}
    assert find_nvcc(env, tmp_path / "default") == home
    assert find_nvcc({"PATH": f"/nowhere:{on_path.parent}"}, tmp_path / "default") == on_path
    assert find_nvcc({"CUDA_PATH": str(tmp_path / "path")}, None) == on_path
    assert find_nvcc({}, tmp_path / "default") == default
    assert find_nvcc({"PATH": "/nowhere"}, None) is None


def test_version_json_is_read_without_running_nvcc(tmp_path: Path) -> None:
    toolkit(tmp_path / "cuda", "12.9.86")
    runner = FakeRunner()
    res = NvccProvider(None, runner).collect(Context(env={"CUDA_HOME": str(tmp_path / "cuda")}))
    assert res.values == {"nvcc.version": "12.9.86"}
    assert res.sources["nvcc.version"] == "metadata"
    assert runner.calls == []


def test_nvcc_version_output_when_no_version_json(tmp_path: Path) -> None:
    nvcc = toolkit(tmp_path / "cuda")
    runner = FakeRunner(ScriptRun(0, NVCC_12_8, ""))
    res = NvccProvider(None, runner).collect(Context(env={"PATH": str(nvcc.parent)}))
    assert res.values == {"nvcc.version": "12.8.93"}
    assert runner.calls == [[str(nvcc), "--version"]]


@pytest.mark.parametrize(
    ("runner", "note"),
    [
        (FakeRunner(ScriptRun(None, "", "", timed_out=True)), "timed out"),
        (FakeRunner(ScriptRun(1, "garbage", "")), "printed no release (exit 1)"),
        (FakeRunner(error=PermissionError(13, "Permission denied")), "could not run (Permission denied)"),
    ],
)
def test_nvcc_that_does_not_answer_leaves_the_fact_unknown(tmp_path: Path, runner: FakeRunner, note: str) -> None:
    toolkit(tmp_path / "cuda")
    res = NvccProvider(None, runner).collect(Context(env={"CUDA_HOME": str(tmp_path / "cuda")}))
    assert "nvcc.version" not in res.values
    assert len(res.notes) == 1 and note in res.notes[0]


def test_cuda_home_pointing_nowhere_is_said(tmp_path: Path) -> None:
    res = NvccProvider(None, FakeRunner()).collect(Context(env={"CUDA_HOME": str(tmp_path / "gone")}))
    assert res.values == {}
    assert res.notes == [
        f"nvcc: `{tmp_path / 'gone' / 'bin' / 'nvcc'}` does not exist (CUDA_HOME/CUDA_PATH points there)"
    ]


def test_no_nvcc_at_all() -> None:
    res = NvccProvider(None, FakeRunner()).collect(Context(env={"PATH": "/nowhere"}))
    assert res.values == {} and res.notes[0].startswith("nvcc: none found")


def test_parse_nvcc_version() -> None:
    assert parse_nvcc_version(NVCC_12_8) == "12.8.93"
    assert parse_nvcc_version("Cuda compilation tools, release 13.0, V13.0.88") == "13.0.88"
    assert parse_nvcc_version("nvcc: command not found") is None


def test_broken_version_json_falls_back(tmp_path: Path) -> None:
    nvcc = toolkit(tmp_path / "cuda")
    (tmp_path / "cuda" / "version.json").write_text("{not json")
    assert toolkit_json_version(nvcc) is None


# --- packages -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fi", "cubin", "jit", "want"),
    [
        ("0.6.13", "0.6.13", None, True),
        ("0.6.16.post3", "0.6.13", None, False),  # flashinfer#4781: no matching cubin wheel on aarch64
        ("0.6.16", "0.6.16", "0.6.16+cu130", True),  # the local CUDA tag is not part of the check
        ("0.6.16", None, "0.6.3+cu130", False),
        ("0.6.16", None, None, True),  # no companions installed: nothing to mismatch
        ("not-a-version", "0.6.13", None, None),
    ],
)
def test_flashinfer_cubin_matches(fi: str, cubin: str | None, jit: str | None, want: bool | None) -> None:
    assert flashinfer_cubin_matches(fi, cubin, jit) is want


def test_packages_report_companions_and_cudnn(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = {
        "flashinfer-python": "0.6.16.post3",
        "flashinfer-cubin": "0.6.13",
        "nvidia-cudnn-cu12": "9.10.2.21",
    }
    monkeypatch.setattr(_packages, "dist_version", installed.get)
    monkeypatch.setattr(_packages, "module_dir", lambda name: None)
    res = PackagesProvider().collect(Context(env={}))
    assert res.values["flashinfer.version"] == "0.6.16.post3"
    assert res.values["flashinfer_cubin.version"] == "0.6.13"
    assert res.values["cudnn.version"] == "9.10.2.21"
    assert res.values["flashinfer.cubin_matches"] is False
    assert "flashinfer_jit_cache.version" not in res.values
    assert set(res.values) <= set(PackagesProvider.provides)


def test_every_provided_key_is_in_the_vocabulary() -> None:
    for key in (*PackagesProvider.provides, *NvccProvider.provides):
        assert key in FACT_KEYS, key


def test_disabled_version_check_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = {"flashinfer-python": "0.6.16.post3", "flashinfer-cubin": "0.6.13"}
    monkeypatch.setattr(_packages, "dist_version", installed.get)
    monkeypatch.setattr(_packages, "module_dir", lambda name: None)
    res = PackagesProvider().collect(Context(env={"FLASHINFER_DISABLE_VERSION_CHECK": "1"}))
    assert res.values["flashinfer.cubin_matches"] is True
    assert any("FLASHINFER_DISABLE_VERSION_CHECK=1" in n for n in res.notes)


def test_packages_report_the_optional_kernel_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """`humming.version` comes from the `humming-kernels` wheel vLLM pins, `b12x.version` from `b12x`."""
    installed = {"humming-kernels": "0.1.12", "b12x": "1.5.1"}
    monkeypatch.setattr(_packages, "dist_version", installed.get)
    monkeypatch.setattr(_packages, "module_dir", lambda name: None)
    res = PackagesProvider().collect(Context(env={}))
    assert res.values["humming.version"] == "0.1.12"
    assert res.values["b12x.version"] == "1.5.1"
    assert res.raw["humming.dist"] == "humming-kernels"
