"""The per-release table (releases/sglang/releases.json) is what the scan reads from the wheels."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from kernelpolicy._paths import cache_root
from kernelpolicy.releases.sglang._scan import RELEASES_FILE, main, scan_wheel
from kernelpolicy.releases.sglang.versions import known_releases, release_for

WHEELS = cache_root() / "wheels"
COMMITTED = json.loads(RELEASES_FILE.read_text())["releases"]


@pytest.mark.parametrize("version", sorted(COMMITTED))
def test_committed_table_matches_the_wheel(version: str) -> None:
    wheels = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang {version} wheel under {WHEELS} (pip download sglang=={version} --no-deps -d {WHEELS})")
    assert scan_wheel(wheels[0]) == COMMITTED[version]


def test_both_releases_people_run_are_known() -> None:
    assert {"0.5.12.post1", "0.5.23"} <= set(known_releases())
    new, old = release_for("0.5.23"), release_for("0.5.12.post1")
    assert new is not None and old is not None
    assert new.resolution == "hooks" and "handle_moe_kernel_config" in new.hookable_steps
    assert old.resolution == "post_init" and old.hookable_steps == ()
    assert new.plugin_group == old.plugin_group == "sglang.srt.plugins"
    assert release_for("0.5.22") is None and release_for("not a version") is None


def _fake_wheel(tmp: Path, version: str, *, hooks: bool) -> Path:
    path = tmp / f"sglang-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"sglang-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
        z.writestr(
            "sglang/srt/arg_groups/choices.py",
            'FP8_GEMM_RUNNER_BACKEND_CHOICES = ["auto", "triton"]\nMOE_RUNNER_BACKEND_CHOICES = ["auto", "x"]\n',
        )
        z.writestr("sglang/srt/plugins/__init__.py", 'GENERAL_PLUGINS_GROUP = "sglang.srt.plugins"\n')
        z.writestr(
            "sglang/srt/layers/quantization/fp8_utils.py",
            "def dispatch_w8a8_block_fp8_linear(a, b):\n    pass\n",
        )
        if hooks:
            z.writestr(
                "sglang/srt/arg_groups/resolution_hooks.py",
                '_OVERRIDABLE_HOOKS = frozenset({"handle_moe_kernel_config", "other"})\n',
            )
    return path


def test_scan_reads_what_the_wheel_says(tmp_path: Path) -> None:
    got = scan_wheel(_fake_wheel(tmp_path, "9.9.9", hooks=True))
    assert got["version"] == "9.9.9"
    assert got["flags"] == {"--fp8-gemm-backend": ["auto", "triton"], "--moe-runner-backend": ["auto", "x"]}
    assert got["resolution"] == "hooks" and got["hookable_steps"] == ["handle_moe_kernel_config"]
    assert got["selection_points"]["dense_dispatch"]["params"] == ["a", "b"]
    assert got["selection_points"]["dense_dispatch"]["line"] == 1
    assert "moe_runner" not in got["selection_points"]
    assert scan_wheel(_fake_wheel(tmp_path, "9.9.8", hooks=False))["resolution"] == "post_init"


def test_scan_cli_writes_json_and_refuses_a_non_wheel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main([str(_fake_wheel(tmp_path, "9.9.9", hooks=False)), "--out", str(out)]) == 0
    assert list(json.loads(out.read_text())["releases"]) == ["9.9.9"]
    bad = tmp_path / "x.whl"
    bad.write_text("not a zip")
    assert main([str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kernelpolicy: error: ") and "x.whl" in err and len(err.splitlines()) == 1
