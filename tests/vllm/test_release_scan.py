"""The per-release data (``releases/vllm/releases.json``) against the releases installed here.

The data is written from the wheels; an installed release must read the same (only the
DeepGEMM commit comes from the source tarball, which an install does not have). With the
release's wheel and source tarball in kernelpolicy's wheel cache (``python -m
kernelpolicy.releases.vllm._scan --download VERSION`` puts them there) the whole record is
compared, commit included.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy._paths import cache_subdir
from kernelpolicy.releases.vllm._scan import scan_release
from kernelpolicy.releases.vllm.versions import release_records

pytestmark = pytest.mark.vllm


def _site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def test_the_installed_release_reads_as_its_record(release: str, venv: Any) -> None:
    record = dict(release_records()[release])
    got = scan_release(_site_packages(venv(release)))
    want_dg = {k: v for k, v in record.pop("deep_gemm").items() if k not in ("repo", "commit")}
    assert got.pop("deep_gemm") == want_dg
    assert got == record


@pytest.mark.parametrize("version", sorted(release_records()))
def test_the_cached_wheel_reads_as_its_record(version: str) -> None:
    folder = cache_subdir("wheels") / "vllm"
    wheels = sorted(folder.glob(f"vllm-{version}-*.whl"))
    sdist = folder / f"vllm-{version}.tar.gz"
    if not wheels or not sdist.is_file():
        pytest.skip(f"vLLM {version}'s wheel and source tarball are not in {folder}")
    assert scan_release(wheels[0], sdist) == release_records()[version]
