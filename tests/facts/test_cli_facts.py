"""`kernelpolicy facts`: exits 0 without a GPU, saying why; JSON and one-screen text."""

from __future__ import annotations

import argparse
import io
import json
from typing import TYPE_CHECKING, Any

import pytest
from machine_fakes import ReplayRunner, gb10_gpu, script_nvml

from kernelpolicy.cli import _facts
from kernelpolicy.facts.providers import Context, ScriptRun

if TYPE_CHECKING:
    from pathlib import Path


def _args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="kernelpolicy")
    _facts.add_parser(ap.add_subparsers(dest="command"))
    return ap.parse_args(["facts", "--cache-dir", str(tmp_path), *argv])


@pytest.mark.usefixtures("no_packages")
def test_json_without_gpu(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, tmp_path: Path) -> None:
    script_nvml(monkeypatch, pynvml_mod, [], init_error=pynvml_mod.NVML_ERROR_LIBRARY_NOT_FOUND)
    out = io.StringIO()
    assert _facts.run(_args(tmp_path, "--json", "--probe"), out) == 0
    data = json.loads(out.getvalue())
    assert data["gpu"] is None
    assert data["gpu_reason"] == "NVML library not found (no NVIDIA driver installed)"


@pytest.mark.usefixtures("no_packages")
def test_text_without_gpu(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, tmp_path: Path) -> None:
    script_nvml(monkeypatch, pynvml_mod, [], init_error=pynvml_mod.NVML_ERROR_DRIVER_NOT_LOADED)
    out = io.StringIO()
    assert _facts.run(_args(tmp_path), out) == 0
    assert out.getvalue().startswith("gpu: none (the NVIDIA driver is not loaded)")


@pytest.mark.usefixtures("h200_packages")
def test_text_gb10(monkeypatch: pytest.MonkeyPatch, pynvml_mod: Any, tmp_path: Path) -> None:
    script_nvml(monkeypatch, pynvml_mod, [gb10_gpu()])
    runner = ReplayRunner({"torch_info.py": ScriptRun(0, "", "")})
    ctx = Context(env={}, runner=runner)
    out = io.StringIO()
    assert _facts.run(_args(tmp_path), out, context=ctx) == 0
    text = out.getvalue()
    assert text.splitlines()[0] == "gpu: NVIDIA GB10 x1 (sm121, cc 12.1, unified memory) [nvml]"
    assert "gpu.family" in text
    assert "sm120  [nvml]" in text
