"""The offline bench recipe (issue #36): the `bench` extra is what bench needs, and the scripts the
README documents are in the repository and read only what it says to provide."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "bench"


def test_the_bench_extra_is_not_the_peer_benchmarks_packages() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any(x.startswith(("cedarpy", "common-expression-language")) for x in extras["bench"])
    assert any(x.startswith("cedarpy") for x in extras["peers"])
    assert any(x.startswith("nvidia-ml-py") for x in extras["bench"])  # --gpu auto reads NVML


def test_every_file_the_scripts_read_is_documented_and_they_parse() -> None:
    readme = (SCRIPTS / "README.md").read_text()
    for script in ("run-gemm.sh", "run-attention.sh"):
        text = (SCRIPTS / script).read_text()
        assert f"scripts/bench/{script}" in readme
        assert subprocess.run(["bash", "-n", str(SCRIPTS / script)], check=False).returncode == 0
        read = set(re.findall(r"\$C/([\w.]+(?:/[\w.*]+)?)", text.replace('"', "")))
        assert read, script
        for name in read:
            assert f"`{name.split('/')[0]}" in readme or f"`{name}" in readme, (script, name)


def test_without_the_folder_the_script_says_what_to_name(tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", str(SCRIPTS / "run-attention.sh")], capture_output=True, text=True, cwd=tmp_path, check=False,
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode != 0 and "KP_CARRY: name the folder scripts/bench/README.md describes" in out.stderr
