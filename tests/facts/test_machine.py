"""gather(): no GPU, the H200 replayed end to end, the disk cache, to_facts, --gpu auto."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from machine_fakes import ReplayRunner, gb10_gpu, h200_gpu, load_record, script_nvml

from kernelpolicy.facts import Facts
from kernelpolicy.facts.machine import auto_gpu_facts, gather, to_facts
from kernelpolicy.facts.providers import Context, ScriptRun

if TYPE_CHECKING:
    from pathlib import Path

NO_DRIVER: dict[str, Any] = {"init_error": 12}  # NVML_ERROR_LIBRARY_NOT_FOUND


def _gather(tmp_path: Path, runner: Any, **kw: Any) -> Any:
    ctx = Context(env={}, runner=runner, timeout_s=30)
    return gather(cache_dir=tmp_path / "cache", context=ctx, **kw)


@pytest.mark.usefixtures("no_packages")
def test_no_gpu(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, tmp_path: Path) -> None:
    script_nvml(monkeypatch, pynvml_mod, [], **NO_DRIVER)
    m = _gather(tmp_path, ReplayRunner({}), probe=True)
    assert m.gpu is None
    assert m.gpu_reason == "NVML library not found (no NVIDIA driver installed)"
    data = m.to_json()
    assert data["gpu"] is None
    assert data["schema"] == "kernelpolicy.machine/1"
    assert "host.machine" in data["facts"]
    json.dumps(data)  # JSON-ready


@pytest.mark.usefixtures("h200_packages")
def test_h200_replayed_end_to_end(
    monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, replay_h200: ReplayRunner, tmp_path: Path
) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    m = _gather(tmp_path, replay_h200, probe=True)
    recorded = load_record("machine.json")["probe"]
    prefixes = ("gpu.", "driver.", "deep_gemm.", "torch.cuda_archs", "torch.arch_ok")
    mine = {k: v for k, v in m.to_json()["facts"].items() if k.startswith(prefixes)}
    want = {k: v for k, v in recorded["facts"].items() if k.startswith(prefixes)}
    assert mine == want
    for k in [*mine, *(f"triton.{t}_ok" for t in ("sm90a", "sm100a", "sm120a", "sm121a"))]:
        assert m.sources[k] == recorded["sources"][k], k
    assert m.gpu is not None
    assert m.gpu.sm == "sm90"
    assert m.gpu.memory_mib == 143771


@pytest.mark.usefixtures("h200_packages")
def test_cache_hit_stale_and_refresh(
    monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, replay_h200: ReplayRunner, tmp_path: Path
) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    first = _gather(tmp_path, replay_h200, probe=True)
    assert first.cache["status"] == "missing"
    n = len(replay_h200.calls)
    assert n == 3  # torch, deep_gemm, triton

    again = _gather(tmp_path, replay_h200, probe=True)
    assert again.cache["status"] == "hit"
    assert len(replay_h200.calls) == n
    assert again.values == first.values
    assert again.providers["deep_gemm_probe"]["cached"] is True

    # a driver update makes the cache stale: everything costly runs again
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()], driver="590.10.01")
    stale = _gather(tmp_path, replay_h200, probe=True)
    assert stale.cache["status"] == "stale"
    assert len(replay_h200.calls) == 2 * n
    assert stale.values["driver.version"] == "590.10.01"

    refreshed = _gather(tmp_path, replay_h200, probe=True, refresh=True)
    assert refreshed.cache["status"] == "refresh"
    assert len(replay_h200.calls) == 3 * n


@pytest.mark.usefixtures("h200_packages")
def test_cache_stale_when_a_package_changes(
    monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, replay_h200: ReplayRunner, tmp_path: Path
) -> None:
    from kernelpolicy.facts.providers import _deep_gemm

    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    _gather(tmp_path, replay_h200, probe=True)
    from machine_fakes import vendored_build

    other = (None, vendored_build(sm120=False))
    monkeypatch.setattr(_deep_gemm, "find_builds", lambda: other)
    m = _gather(tmp_path, replay_h200, probe=True)
    assert m.cache["status"] == "stale"
    assert m.values["deep_gemm.has_sm120_sf_layout"] is False


@pytest.mark.usefixtures("h200_packages")
def test_cache_unreadable_is_ignored(
    monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, replay_h200: ReplayRunner, tmp_path: Path
) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "machine-facts.json").write_text("{not json")
    m = _gather(tmp_path, replay_h200, probe=True)
    assert m.cache["status"] == "unreadable"
    assert m.values["deep_gemm.sf_probe_ue8m0"] == "unsupported"
    assert _gather(tmp_path, replay_h200, probe=True).cache["status"] == "hit"


@pytest.mark.usefixtures("h200_packages")
def test_probe_results_added_to_cache_later(
    monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, replay_h200: ReplayRunner, tmp_path: Path
) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    m = _gather(tmp_path, replay_h200)
    assert "deep_gemm.sf_probe_fp32" not in m.values
    assert "triton.sm121a_ok" not in m.values or m.sources["triton.sm121a_ok"] == "metadata"
    m = _gather(tmp_path, replay_h200, probe=True)
    assert m.providers["torch"]["cached"] is True
    assert m.providers["deep_gemm_probe"]["cached"] is False


def test_a_plain_gather_keeps_the_probes_a_probing_one_cached(
    monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, replay_h200: ReplayRunner, tmp_path: Path
) -> None:
    # issue #36: `facts --probe`, then `facts`, then `facts --probe` ran every probe again: the plain
    # call found the probes' entries "unknown", called the cache invalid and rewrote it without them
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    _gather(tmp_path, replay_h200, probe=True)
    plain = _gather(tmp_path, replay_h200)
    assert plain.providers["torch"]["cached"] is True
    assert not any(n.startswith("cache: ignored") for n in plain.notes)
    again = _gather(tmp_path, replay_h200, probe=True)
    assert again.providers["deep_gemm_probe"]["cached"] is True


@pytest.mark.usefixtures("h200_packages")
def test_crashing_probe_does_not_crash_gather(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, tmp_path: Path) -> None:
    script_nvml(monkeypatch, pynvml_mod, [gb10_gpu()])
    crash = ScriptRun(-11, "", "Segmentation fault")
    runner = ReplayRunner({"torch_info.py": crash, "deep_gemm_sf.py": crash, "triton_compile.py": crash})
    m = _gather(tmp_path, runner, probe=True)
    assert m.values["deep_gemm.sf_probe_ue8m0"] == "crashed"
    assert m.values["gpu.unified_memory"] is True
    assert any("probe crashed: signal 11 (SIGSEGV)" in n for n in m.notes)
    # the static marker stands when the probe could not tell
    assert m.sources["deep_gemm.has_sm120_sf_layout"] == "metadata"


def test_provider_bug_becomes_a_note(tmp_path: Path) -> None:
    class Broken:
        name = "broken"
        cost = "static"
        provides = ("gpu.sm",)

        def collect(self, ctx: Context) -> Any:
            raise KeyError("oops")

    m = gather(providers=[Broken()], cache_dir=tmp_path, env={})
    assert m.notes == ("broken: failed (KeyError: 'oops')",)
    assert m.gpu is None


@pytest.mark.usefixtures("h200_packages")
def test_to_facts(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, replay_h200: ReplayRunner, tmp_path: Path) -> None:
    script_nvml(monkeypatch, pynvml_mod, [h200_gpu()])
    facts = to_facts(_gather(tmp_path, replay_h200, probe=True))
    assert isinstance(facts, Facts)
    assert facts.get("gpu.sm") == "sm90"
    assert facts.sources["gpu.sm"] == "nvml"
    assert facts.sources["deep_gemm.sf_probe_ue8m0"] == "probe"
    assert facts.get("torch.cuda_archs") == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


@pytest.mark.usefixtures("no_packages")
def test_auto_gpu_facts(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, tmp_path: Path) -> None:
    script_nvml(monkeypatch, pynvml_mod, [], **NO_DRIVER)
    with pytest.raises(ValueError, match=r"^no NVIDIA GPU found: NVML library not found"):
        auto_gpu_facts(cache_dir=tmp_path, env={})
    script_nvml(monkeypatch, pynvml_mod, [gb10_gpu()])
    values, sources = auto_gpu_facts(cache_dir=tmp_path, env={})
    assert values["gpu.sm"] == "sm121"
    assert sources["gpu.sm"] == "nvml"


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kernelpolicy, kernelpolicy.facts.machine, kernelpolicy.cli._facts;"
        "heavy = {'pynvml', 'torch', 'triton', 'deep_gemm', 'vllm'} & set(sys.modules);"
        "print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
