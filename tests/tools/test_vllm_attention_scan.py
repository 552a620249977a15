"""The scan of vLLM's attention selector (issue #39): the generated order file stays in sync with
the scanned data, the scan reproduces that data from the cached wheels, and a selector the scan
cannot read stops it with the line, never a wrong order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpolicy.releases.vllm._scan_attention import JSON_FILE, YAML_FILE, ScanError, orders_yaml, scan_release

VENVS = Path.home() / ".cache" / "kernelpolicy" / "venvs"


def _site(version: str) -> Path | None:
    found = sorted((VENVS / f"vllm-{version}").glob("lib/python3*/site-packages"))
    return found[0] if found and (found[0] / "vllm" / "platforms" / "cuda.py").is_file() else None


def test_the_generated_order_file_is_in_sync_with_the_scan() -> None:
    data = json.loads(JSON_FILE.read_text(encoding="utf-8"))
    assert YAML_FILE.read_text(encoding="utf-8") == orders_yaml(data["releases"]), (
        "rules/backends/attention.vllm.yaml is out of date: run "
        "`python -m kernelpolicy.releases.vllm._scan_attention --write SITE_PACKAGES...`"
    )


#: the releases the integration tests install (scripts/test.sh builds a venv for each)
RELEASES = [
    line.strip()
    for line in (Path(__file__).resolve().parents[1] / "vllm" / "releases.txt").read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
]


@pytest.mark.parametrize("version", RELEASES)
def test_the_scan_reproduces_each_cached_release(version: str) -> None:
    site = _site(version)
    if site is None:
        pytest.skip(f"no cached vLLM {version} venv (scripts/test.sh builds it)")
    data = json.loads(JSON_FILE.read_text(encoding="utf-8"))
    kept = next(r for r in data["releases"] if r["version"] == version)
    assert scan_release(site) == kept


def test_vllm_0_34_orders_hopper_mla_as_its_selector_does() -> None:
    """A fact of the scan, checked against the data: Hopper MLA runs FA3's MLA kernel first, then
    FlashMLA; Blackwell (sm100) MLA runs FlashInfer's (TRT-LLM) MLA first; GB10/RTX (sm120) only Triton."""
    data = json.loads(JSON_FILE.read_text(encoding="utf-8"))
    orders = next(r for r in data["releases"] if r["version"] == "0.34.0")["orders"]
    assert orders["mla|sm90|bf16"][:2] == ["FLASH_ATTN_MLA", "FLASHMLA"]
    assert orders["mla|sm100|bf16"][0] == "FLASHINFER_MLA"
    assert orders["mla|sm120|bf16"][0] == "TRITON_MLA"
    assert orders["mha|sm100|bf16"][0] == "FLASHINFER" and orders["mha|sm90|bf16"][0] == "FLASH_ATTN"


def _release(tmp_path: Path, body: str) -> Path:
    (tmp_path / "vllm" / "platforms").mkdir(parents=True)
    (tmp_path / "vllm" / "platforms" / "cuda.py").write_text(body, encoding="utf-8")
    meta = tmp_path / "vllm-9.9.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Name: vllm\nVersion: 9.9.0\n", encoding="utf-8")
    return tmp_path


def test_a_selector_the_scan_cannot_read_stops_it_with_the_line(tmp_path: Path) -> None:
    root = _release(
        tmp_path,
        "def _get_backend_priorities(use_mla, device_capability):\n"
        "    for b in range(3):\n"
        "        pass\n"
        "    return [AttentionBackendEnum.FLASH_ATTN]\n",
    )
    with pytest.raises(ScanError, match=r"cuda.py:2: a statement the attention scan does not read"):
        scan_release(root)


def test_a_backend_no_id_stands_for_stops_the_scan(tmp_path: Path) -> None:
    root = _release(
        tmp_path,
        "def _get_backend_priorities(use_mla, device_capability):\n"
        "    if device_capability.major == 10:\n"
        "        return [AttentionBackendEnum.SHINY_NEW_ATTN]\n"
        "    return [AttentionBackendEnum.FLASH_ATTN]\n",
    )
    with pytest.raises(ScanError, match="SHINY_NEW_ATTN"):
        scan_release(root)


def test_the_command_line_says_one_line_for_a_folder_without_vllm(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kernelpolicy.releases.vllm._scan_attention", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no vLLM selector here" in done.stderr
