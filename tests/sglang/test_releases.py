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


def test_every_release_from_0512_to_0523_is_known() -> None:
    want = ["0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1"]
    want += [f"0.5.{n}" for n in range(16, 24)]
    assert list(known_releases()) == want  # oldest first, by version (0.5.9 < 0.5.12 if one is added)
    assert release_for("0.5.24") is None and release_for("not a version") is None


def test_the_scanned_pins_and_deep_gemm_switch_are_the_wheels() -> None:
    # pins: sgl-deep-gemm 0.1.4 arrived with 0.5.15, FlashInfer 0.7 with 0.5.22
    r15, r22 = release_for("0.5.15"), release_for("0.5.22")
    assert r15 is not None and r22 is not None
    assert r15.requires["sgl-deep-gemm"] == "0.1.4" and r22.requires["flashinfer-python"] == "0.7.1"
    # DeepGEMM on sm120: off outright in 0.5.13 to 0.5.19, probed for its SM120 kernels from 0.5.20
    off = [v for v, r in known_releases().items() if r.deep_gemm_switch and 120 in r.deep_gemm_switch["off_sm"]]
    assert off == ["0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19"]
    r20 = release_for("0.5.20")
    assert r20 is not None and r20.deep_gemm_switch == {
        "min_sm": 90,
        "off_sm": [],
        "probed_sm": {"120": ["m_grouped_fp8_fp4_gemm_nt_contiguous"]},
    }
    assert all(r.defaults == dict.fromkeys(r.flags, "auto") for r in known_releases().values())


def test_both_releases_people_run_are_known() -> None:
    assert {"0.5.12.post1", "0.5.23"} <= set(known_releases())
    new, old = release_for("0.5.23"), release_for("0.5.12.post1")
    assert new is not None and old is not None
    assert new.resolution == "hooks" and "handle_moe_kernel_config" in new.hookable_steps
    assert old.resolution == "post_init" and old.hookable_steps == ()
    assert new.plugin_group == old.plugin_group == "sglang.srt.plugins"


def _fake_wheel(tmp: Path, version: str, *, hooks: bool) -> Path:
    path = tmp / f"sglang-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            f"sglang-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n"
            "Requires-Dist: flashinfer_python[cu13]==0.7.2\nRequires-Dist: sgl-deep-gemm==0.2.0\n"
            'Requires-Dist: torch==2.14.1; extra == "other"\nRequires-Dist: requests==2.0\n',
        )
        z.writestr("sglang/srt/server_args.py", 'class ServerArgs:\n    moe_runner_backend: str = "triton"\n')
        z.writestr(
            "sglang/srt/layers/deep_gemm_wrapper/configurer.py",
            "def _compute_enable_deep_gemm():\n    sm_version = get_device_sm()\n"
            "    if (_is_cuda and sm_version < 90) or (_is_musa and sm_version < 31):\n        return False\n"
            "    if sm_version == 120:\n        return False\n"
            "    if sm_version in (121, 110) and not _probe():\n        return False\n",
        )
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
    assert got["requires"] == {"flashinfer-python": "0.7.2", "sgl-deep-gemm": "0.2.0"}  # no extra's pin, no others
    assert got["defaults"] == {"--moe-runner-backend": "triton"}
    assert got["deep_gemm_switch"] == {
        "min_sm": 90,
        "off_sm": [120],
        "probed_sm": {"121": ["_probe"], "110": ["_probe"]},
    }
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


# -- the launch parser's option strings (options.json): abbreviations resolve against them --------


def test_committed_options_match_the_wheel() -> None:
    from kernelpolicy.releases.sglang._scan import OPTIONS_FILE, scan_options

    committed = json.loads(OPTIONS_FILE.read_text())
    wheels = sorted(WHEELS.glob(f"sglang-{committed['version']}-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang {committed['version']} wheel under {WHEELS}")
    assert scan_options(wheels[0]) == {k: committed[k] for k in ("version", "options")}


def test_the_committed_options_are_the_newest_release_and_hold_the_flag_table() -> None:
    from kernelpolicy.engines.sglang.flags import FLAGS
    from kernelpolicy.releases.sglang.versions import launch_options

    release, options = launch_options()
    assert release == list(known_releases())[-1]
    assert {n for f in FLAGS for n in f.names} <= options  # every spelling the table reads is SGLang's
    assert "--help" in options and "--config" in options and len(options) > 500


def test_scan_reads_the_option_strings_of_the_field_groups(tmp_path: Path) -> None:
    from kernelpolicy.releases.sglang._scan import scan_options

    wheel = _fake_wheel(tmp_path, "9.9.9", hooks=False)
    with zipfile.ZipFile(wheel, "a") as z:
        z.writestr(
            "sglang/srt/arg_groups/fields/parallel.py",
            "class Parallel:\n"
            '    tp_size: A[int, Arg(help="x", cli_name="--tensor-parallel-size", aliases=["--tp-size"])] = 1\n'
            '    ep_size: A[int, "the ep size"] = 1\n'
            '    hidden: A[int, Arg(help="x", no_cli=True)] = 1\n'
            "    plain: int = 1\n",
        )
        z.writestr("sglang/srt/arg_groups/fields/x.py", 'def f(p):\n    p.add_argument("--config", type=str)\n')
    got = scan_options(wheel)
    assert got == {
        "version": "9.9.9",
        "options": ["--config", "--ep-size", "--help", "--tensor-parallel-size", "--tp-size"],
    }
    out = tmp_path / "o.json"
    assert main([str(wheel), "--options", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["options"] == got["options"]
