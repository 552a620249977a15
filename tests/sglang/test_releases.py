"""The per-release table (releases/sglang/releases.json) is what the scan reads from the wheels."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from kernelpolicy._paths import cache_root
from kernelpolicy.releases.sglang._scan import OPTIONS_FILE, RELEASES_FILE, main, scan_options, scan_wheel
from kernelpolicy.releases.sglang.versions import known_releases, release_for

WHEELS = cache_root() / "wheels"
COMMITTED = json.loads(RELEASES_FILE.read_text())["releases"]
OPTIONS = json.loads(OPTIONS_FILE.read_text())["releases"]


@pytest.mark.parametrize("version", sorted(COMMITTED))
def test_committed_table_matches_the_wheel(version: str) -> None:
    wheels = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang {version} wheel under {WHEELS} (pip download sglang=={version} --no-deps -d {WHEELS})")
    assert scan_wheel(wheels[0]) == COMMITTED[version]


@pytest.mark.parametrize("version", sorted(COMMITTED))
def test_committed_options_match_the_wheel(version: str) -> None:
    """The launch parser's options (a line's abbreviations are read against them) are the
    wheel's; tests/sglang/test_flag_parity.py checks them against SGLang's own parser."""
    wheels = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang {version} wheel under {WHEELS} (pip download sglang=={version} --no-deps -d {WHEELS})")
    assert scan_options(wheels[0]) == OPTIONS[version]


def test_every_release_has_its_launch_options() -> None:
    assert set(OPTIONS) == set(COMMITTED)
    for version, release in known_releases().items():
        # each release's parser: its own flags, SGLang's aliases, argparse's help
        assert {"--help", "--tp-size", "--tensor-parallel-size", "--model-path"} <= set(release.options), version
        assert release.options["--tp-size"] == release.options["--tensor-parallel-size"], version
    new = release_for("0.5.23")
    assert new is not None and new.options["--ep"] == "ep_size" and "--dp-size" in new.options


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
    # every backend flag defaults to `auto`; `--attention-backend` has no default (unset: SGLang chooses)
    gemm_moe = ("--fp8-gemm-backend", "--fp4-gemm-backend", "--moe-runner-backend")
    assert all(
        r.defaults == dict.fromkeys((f for f in r.flags if f in gemm_moe), "auto") for r in known_releases().values()
    )
    assert all("fa3" in r.flags["--attention-backend"] for r in known_releases().values())


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


_SERVER_ARGS = """
class ServerArgs:
    host: A[str, "The host."] = "127.0.0.1"
    tp_size: A[int, Arg(help="TP.", aliases=["--tensor-parallel-size"])] = 1
    fp8_gemm_runner_backend: A[str, Arg(help="x", cli_name="--fp8-gemm-backend")] = "auto"
    hidden: A[int, Arg(help="x", no_cli=True)] = 0
    plain: int = 0

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--config", type=str)
        parser.add_argument("--enable-x", dest="x_on", action=argparse.BooleanOptionalAction)


class PortArgs:
    port: A[int, "Not a launch flag."] = 0
"""


def test_scan_reads_the_launch_parsers_options(tmp_path: Path) -> None:
    """Each way SGLang declares a launch option (``add_argument``, with ``dest`` or argparse's
    own, ``BooleanOptionalAction``'s ``--no-``; ``A[T, help]`` and ``A[T, Arg(...)]`` fields with
    ``cli_name``, ``aliases`` and ``no_cli``, in ``ServerArgs`` or, 0.5.20+, the field groups)."""
    path = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("sglang/srt/server_args.py", _SERVER_ARGS)
        z.writestr(
            "sglang/srt/arg_groups/fields/parallel.py",
            'class Parallel:\n    ep_size: A[int, Arg(help="EP.", aliases=["--ep"])] = 1\n',
        )
    assert scan_options(path) == {
        "--config": "config",
        "--enable-x": "x_on",
        "--ep": "ep_size",
        "--ep-size": "ep_size",
        "--fp8-gemm-backend": "fp8_gemm_runner_backend",
        "--help": "help",
        "--host": "host",
        "--no-enable-x": "x_on",
        "--tensor-parallel-size": "tp_size",
        "--tp-size": "tp_size",
        "-h": "help",
    }


def test_scan_cli_writes_the_options_beside_the_releases(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main([str(_fake_wheel(tmp_path, "9.9.9", hooks=False)), "--out", str(out)]) == 0
    options = json.loads((tmp_path / OPTIONS_FILE.name).read_text())["releases"]
    assert list(options) == ["9.9.9"] and options["9.9.9"]["--help"] == "help"
