"""The probe providers on outputs recorded on an H200, and on crashes and timeouts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from machine_fakes import ReplayRunner, as_run, vendored_build

from kernelpolicy.facts.providers import (
    Context,
    DeepGemmProbeProvider,
    ScriptRun,
    TorchProvider,
    TritonProbeProvider,
    _probes,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

H200 = {"gpu.cc": "9.0", "gpu.sm": "sm90", "gpu.family": "sm90", "driver.version": "580.159.04"}
GB10 = {"gpu.cc": "12.1", "gpu.sm": "sm121", "gpu.family": "sm120", "driver.version": "580.126.20"}
IMPORT_OK = 'KPROBE {"step": "import", "status": "ok", "capability": [12, 1]}\n'


def ctx(runner: Any, known: dict[str, object]) -> Context:
    return Context(env={}, known=known, runner=runner, timeout_s=30)


@pytest.mark.usefixtures("h200_packages")
def test_deep_gemm_h200_replay(replay_h200: ReplayRunner) -> None:
    res = DeepGemmProbeProvider().collect(ctx(replay_h200, H200))
    assert res.values == {
        "deep_gemm.sf_probe_fp32": "ok",
        "deep_gemm.sf_probe_ue8m0": "unsupported",
    }
    assert set(res.sources.values()) == {"probe"}
    # on sm90 the probe says nothing about SM120; the marker fact stands
    assert "deep_gemm.has_sm120_sf_layout" not in res.values
    assert any("Unknown SF transformation" in n and "sm90" in n for n in res.notes)
    # the vendored copy is loaded by path, without importing vLLM
    assert replay_h200.calls[0][2:4] == ["--path", "/site/vllm/third_party/deep_gemm"]


@pytest.mark.usefixtures("h200_packages")
def test_deep_gemm_timeout_replay(h200_runs: dict[str, Any]) -> None:
    runner = ReplayRunner({"deep_gemm_sf.py": as_run(h200_runs["deep_gemm_sf_timeout"])})
    res = DeepGemmProbeProvider().collect(ctx(runner, H200))
    assert res.values["deep_gemm.sf_probe_fp32"] == "timeout"
    assert res.values["deep_gemm.sf_probe_ue8m0"] == "timeout"
    assert len(runner.calls) == 1  # no retry after a timeout


@pytest.mark.usefixtures("h200_packages")
def test_deep_gemm_sm120_denied_by_probe() -> None:
    stdout = IMPORT_OK + (
        'KPROBE {"step": "fp32", "status": "ok"}\n'
        'KPROBE {"step": "ue8m0", "status": "unsupported", "error": "RuntimeError", '
        '"message": "Assertion error (csrc/apis/layout.hpp:60): Unknown SF transformation"}\n'
    )
    runner = ReplayRunner({"deep_gemm_sf.py": ScriptRun(0, stdout, "")})
    res = DeepGemmProbeProvider().collect(ctx(runner, GB10))
    assert res.values["deep_gemm.has_sm120_sf_layout"] is False
    assert res.sources["deep_gemm.has_sm120_sf_layout"] == "probe"


@pytest.mark.usefixtures("h200_packages")
def test_deep_gemm_sm120_allowed_by_probe() -> None:
    stdout = IMPORT_OK + ('KPROBE {"step": "fp32", "status": "ok"}\nKPROBE {"step": "ue8m0", "status": "ok"}\n')
    runner = ReplayRunner({"deep_gemm_sf.py": ScriptRun(0, stdout, "")})
    res = DeepGemmProbeProvider().collect(ctx(runner, GB10))
    assert res.values["deep_gemm.has_sm120_sf_layout"] is True


@pytest.mark.usefixtures("h200_packages")
def test_deep_gemm_crash_then_retry() -> None:
    # sgl-deep-gemm 0.2.0 on torch 2.11: the SF transform segfaulted (rc -11)
    def answer(argv: Sequence[str]) -> ScriptRun:
        steps = argv[argv.index("--steps") + 1]
        if steps == "fp32,ue8m0":
            return ScriptRun(-11, IMPORT_OK, "")
        return ScriptRun(0, IMPORT_OK + 'KPROBE {"step": "ue8m0", "status": "ok"}\n', "")

    runner = ReplayRunner({"deep_gemm_sf.py": answer})
    res = DeepGemmProbeProvider().collect(ctx(runner, GB10))
    assert res.values["deep_gemm.sf_probe_fp32"] == "crashed"
    assert res.values["deep_gemm.sf_probe_ue8m0"] == "ok"
    assert any("signal 11 (SIGSEGV)" in n for n in res.notes)
    assert [c[-1] for c in runner.calls] == ["fp32,ue8m0", "ue8m0"]


@pytest.mark.usefixtures("h200_packages")
def test_deep_gemm_crash_at_import() -> None:
    runner = ReplayRunner({"deep_gemm_sf.py": ScriptRun(-11, "", "")})
    res = DeepGemmProbeProvider().collect(ctx(runner, GB10))
    assert res.values["deep_gemm.sf_probe_fp32"] == "crashed"
    assert res.values["deep_gemm.sf_probe_ue8m0"] == "crashed"
    assert "deep_gemm.has_sm120_sf_layout" not in res.values
    assert len(runner.calls) == 1


@pytest.mark.usefixtures("h200_packages")
def test_deep_gemm_import_error() -> None:
    # sgl-deep-gemm 0.2.5 on torch 2.11: the _C.so has an undefined symbol
    stdout = (
        'KPROBE {"step": "import", "status": "error", "error": "OSError", '
        '"message": "Could not load this library: undefined symbol"}\n'
    )
    runner = ReplayRunner({"deep_gemm_sf.py": ScriptRun(0, stdout, "")})
    res = DeepGemmProbeProvider().collect(ctx(runner, GB10))
    assert res.values["deep_gemm.sf_probe_ue8m0"] == "error"
    assert any("undefined symbol" in n for n in res.notes)


def test_deep_gemm_probe_skipped_without_gpu() -> None:
    runner = ReplayRunner({})
    res = DeepGemmProbeProvider().collect(ctx(runner, {}))
    assert res.values == {}
    assert runner.calls == []


def test_deep_gemm_external_imported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    ext = vendored_build()
    ext = type(ext)("external", "/site/deep_gemm", "sgl-deep-gemm", "0.2.5", None, ("x",))
    monkeypatch.setattr(_probes, "find_builds", lambda: (ext, vendored_build()))
    runner = ReplayRunner({"deep_gemm_sf.py": ScriptRun(0, IMPORT_OK, "")})
    DeepGemmProbeProvider().collect(ctx(runner, GB10))
    assert "--path" not in runner.calls[0]


@pytest.mark.usefixtures("h200_packages")
def test_triton_h200_replay(replay_h200: ReplayRunner) -> None:
    res = TritonProbeProvider().collect(ctx(replay_h200, H200))
    assert res.values == {
        "triton.sm90a_ok": True,
        "triton.sm100a_ok": True,
        "triton.sm120a_ok": True,
        "triton.sm121a_ok": True,
    }
    assert set(res.sources.values()) == {"probe"}


@pytest.mark.usefixtures("h200_packages")
def test_triton_sm121a_rejected() -> None:
    # Triton 3.5.0's bundled ptxas 12.8 (shared/research/packages.md, section 3)
    ok = '{"status": "ok"}'
    bad = (
        '{"status": "error", "error": "PTXASError", "message": "ptxas fatal   : '
        "Value 'sm_121a' is not defined for option 'gpu-name'\"}"
    )
    lines = ['KPROBE {"step": "import", "status": "ok", "version": "3.5.0"}']
    for t in ("sm90a", "sm100a", "sm120a"):
        lines.append(f'KPROBE {{"step": "{t}", "status": "ok", "kernels": {{"add_fp32": {ok}}}}}')
    lines.append(f'KPROBE {{"step": "sm121a", "status": "error", "kernels": {{"add_fp32": {bad}}}}}')
    runner = ReplayRunner({"triton_compile.py": ScriptRun(0, "\n".join(lines), "")})
    res = TritonProbeProvider().collect(ctx(runner, {}))
    assert res.values["triton.sm121a_ok"] is False
    assert res.values["triton.sm120a_ok"] is True
    assert any("sm_121a" in n for n in res.notes)


@pytest.mark.usefixtures("h200_packages")
def test_triton_probe_crash_leaves_targets_unknown() -> None:
    runner = ReplayRunner({"triton_compile.py": ScriptRun(-6, "", "")})
    res = TritonProbeProvider().collect(ctx(runner, {}))
    assert res.values == {}
    assert any("signal 6 (SIGABRT)" in n for n in res.notes)


@pytest.mark.usefixtures("h200_packages")
def test_torch_h200_replay(replay_h200: ReplayRunner) -> None:
    res = TorchProvider().collect(ctx(replay_h200, {**H200, "cuda.version": "13.0"}))
    assert res.values == {
        "torch.cuda_archs": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
        "torch.arch_ok": True,
    }
    assert "--capability" not in replay_h200.calls[0]  # NVML answered: no CUDA init


@pytest.mark.usefixtures("h200_packages")
def test_torch_gpu_fallback_replay(replay_h200: ReplayRunner) -> None:
    res = TorchProvider().collect(ctx(replay_h200, {"cuda.version": "13.0"}))
    assert res.values["gpu.sm"] == "sm90"
    assert res.sources["gpu.sm"] == "torch"
    assert res.values["gpu.name"] == "NVIDIA H200"


@pytest.mark.usefixtures("h200_packages")
def test_torch_no_visible_gpu_replay(h200_runs: dict[str, Any]) -> None:
    runner = ReplayRunner({"torch_info.py": as_run(h200_runs["torch_info_novisible"])})
    res = TorchProvider().collect(ctx(runner, {"cuda.version": "13.0"}))
    assert "gpu.cc" not in res.values
    assert "torch.cuda_archs" not in res.values  # torch <= 2.12 lists none: unknown, not empty
    assert any("No CUDA GPUs are available" in n for n in res.notes)
