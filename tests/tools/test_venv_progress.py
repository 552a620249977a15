"""`kernelpolicy vllm venv` (the build steps, uv or pip, the marker) and terminal-only progress."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelpolicy import _venvs
from kernelpolicy.cli import main
from kernelpolicy.errors import UsageError
from kernelpolicy.progress import progress


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_venvs, "venv_python", lambda v, engine="vllm": tmp_path / f"{engine}-{v}" / "bin" / "python")
    return tmp_path


def _fake(calls: list[list[str]], fail_at: int | None = None) -> _venvs.Runner:
    def run(cmd: Sequence[str]) -> int:
        calls.append(list(cmd))
        if len(calls) - 1 == fail_at:
            return 7
        if "venv" in cmd:  # the venv step makes the python
            target = Path(cmd[-1]) / "bin" / "python"
            target.parent.mkdir(parents=True)
            target.write_text("")
        return 0

    return run


@pytest.mark.parametrize("use_uv", [False, True])
def test_builds_once_then_reuses(cache: Path, monkeypatch: pytest.MonkeyPatch, use_uv: bool) -> None:
    monkeypatch.setattr(_venvs.shutil, "which", lambda name: "/usr/bin/uv" if name == "uv" else None)
    calls: list[list[str]] = []
    python = _venvs.ensure_venv("0.26.0", use_uv=use_uv, runner=_fake(calls), base_python="python3")
    assert python == cache / "vllm-0.26.0" / "bin" / "python"
    assert (cache / "vllm-0.26.0" / _venvs.MARKER).read_text() == "vllm==0.26.0\n"
    assert len(calls) == 4
    assert calls[0][0] == ("/usr/bin/uv" if use_uv else "python3")
    assert "vllm==0.26.0" in calls[1] and calls[2][-1] == _venvs._CUDA_TORCH and calls[3][-1] == "0.26.0"
    assert _venvs.ensure_venv("0.26.0", runner=_fake(calls)) == python
    assert len(calls) == 4  # reused: nothing ran


def test_a_venv_with_a_cpu_only_torch_is_built_again(cache: Path) -> None:
    site = cache / "vllm-0.29.0" / "lib" / "python3.12" / "site-packages"
    (site / "torch-2.13.0+cpu.dist-info").mkdir(parents=True)
    (cache / "vllm-0.29.0" / "bin").mkdir()
    (cache / "vllm-0.29.0" / "bin" / "python").write_text("")
    (cache / "vllm-0.29.0" / _venvs.MARKER).write_text("vllm==0.29.0\n")
    calls: list[list[str]] = []
    steps: list[str] = []
    _venvs.ensure_venv("0.29.0", use_uv=False, runner=_fake(calls), note=steps.append)
    assert steps[:2] == ["a venv built with a CPU-only torch: building it again", "removing an incomplete venv"]
    assert len(calls) == 4 and not site.exists()


def test_a_failed_step_leaves_nothing_and_says_which(cache: Path) -> None:
    calls: list[list[str]] = []
    with pytest.raises(_venvs.VenvError, match=r"while installing vllm==0.30.0 \(exit status 7\)"):
        _venvs.ensure_venv("0.30.0", use_uv=False, runner=_fake(calls, fail_at=1))
    assert not (cache / "vllm-0.30.0").exists()


def test_an_incomplete_venv_is_rebuilt(cache: Path) -> None:
    stale = cache / "vllm-0.27.1" / "bin"
    stale.mkdir(parents=True)
    (stale / "python").write_text("")  # no marker: an interrupted build
    steps: list[str] = []
    _venvs.ensure_venv("0.27.1", use_uv=False, runner=_fake([]), note=steps.append)
    assert steps[0] == "removing an incomplete venv"


def test_bad_version_and_missing_uv(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_venvs, "find_uv", lambda: None)
    with pytest.raises(UsageError, match="not on PATH"):
        _venvs.ensure_venv("0.26.0", use_uv=True, runner=_fake([]))
    monkeypatch.undo()
    assert main(["vllm", "venv", "0.26.0; rm -rf /"]) == 2
    assert "is not a vLLM release" in capsys.readouterr().err


def test_uv_builds_every_venv_from_one_cache_beside_them_by_hard_links() -> None:
    """Shared wheels (torch, the CUDA libraries) are on disk once: uv links each venv's files from
    one cache, which must be on the venvs' file system for links (a folder beside them)."""
    for version, venv in (("0.26.0", Path("/c/vllm-0.26.0")), ("0.34.0", Path("/c/vllm-0.34.0"))):
        install = _venvs.build_commands(version, venv, uv="/bin/uv", base_python="python3")[1]
        assert install[:5] == ["/bin/uv", "pip", "install", "--python", f"{venv}/bin/python"]
        assert install[install.index("--link-mode") + 1] == "hardlink"
        assert install[install.index("--cache-dir") + 1] == "/c/.uv-cache"
        assert install[install.index("--constraint") + 1] == str(_venvs.constraints_file(venv))
        assert f"vllm=={version}" in install and "nvidia-ml-py" in install
        assert ("--override" in install) == (version == "0.34.0")


def test_the_builder_writes_the_overrides_uv_reads(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_venvs, "find_uv", lambda: "/bin/uv")
    ran: list[list[str]] = []

    def runner(cmd: Sequence[str]) -> int:
        ran.append(list(cmd))
        if cmd[1] == "venv":
            python = Path(cmd[-1]) / "bin" / "python"
            python.parent.mkdir(parents=True)
            python.write_text("")
        return 0

    _venvs.ensure_venv("0.34.0", use_uv=True, runner=runner)
    path = Path(ran[1][ran[1].index("--override") + 1])
    assert path.read_text() == "flashinfer-python==0.7.4\n"
    # a parallel install keeps either copy of a file two distributions ship: old cuda-python is kept out
    constraints = Path(ran[1][ran[1].index("--constraint") + 1])
    assert constraints.read_text() == "cuda-python>=12.8\n"


def test_the_install_check_refuses_a_venv_whose_files_depend_on_the_install_order(tmp_path: Path) -> None:
    """Two distributions shipping one file of a package with different contents: which copy a
    parallel install keeps is chance (vLLM 0.34.0's venv once kept cuda-python 12.6's
    `cuda/bindings` over cuda-bindings 13.5's), so the check refuses the venv, naming them."""
    import base64
    import hashlib

    def dist(name: str, content: bytes) -> None:
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        (info / "RECORD").write_text(f"pkg/runtime.py,sha256={digest},{len(content)}\n")

    for name in ("torch", "pydantic", "PyYAML", "packaging", "vllm"):
        info = tmp_path / f"{name}-9.9.9.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 9.9.9\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    cmd = [sys.executable, "-S", "-c", _venvs._CHECK, "vllm", "9.9.9"]
    assert subprocess.run(cmd, env=env, capture_output=True, text=True, check=False).returncode == 0
    dist("cuda-bindings", b"new")
    dist("cuda-python", b"old")
    bad = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and "`pkg/runtime.py` by cuda-bindings and cuda-python" in bad.stderr


def test_pip_commands_are_what_the_script_ran() -> None:
    cmds = _venvs.build_commands("0.33.0", Path("/c/vllm-0.33.0"), uv=None, base_python="python3")
    assert cmds[0] == ["python3", "-m", "venv", "/c/vllm-0.33.0"]
    assert cmds[1][:3] == ["/c/vllm-0.33.0/bin/python", "-m", "pip"] and "vllm==0.33.0" in cmds[1]
    assert cmds[2] == ["/c/vllm-0.33.0/bin/python", "-c", _venvs._CUDA_TORCH]


def _fake_site(tmp_path: Path, torch: str) -> dict[str, str]:
    """A folder shadowing torch's metadata and pip (which prints what it was asked)."""
    dist = tmp_path / f"torch-{torch}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch}\n")
    pip = tmp_path / "pip"
    pip.mkdir()
    (pip / "__init__.py").write_text("")
    (pip / "__main__.py").write_text("import sys\nprint('pip', *sys.argv[1:])\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize(
    ("torch", "asked"),
    [("2.13.0+cpu", "pip install --disable-pip-version-check torch===2.13.0"), ("2.14.0+cu130", None)],
)
def test_a_cpu_only_torch_is_replaced_by_the_same_release_from_the_index(
    tmp_path: Path, torch: str, asked: str | None
) -> None:
    env = _fake_site(tmp_path, torch)
    cmd = [sys.executable, "-c", _venvs._CUDA_TORCH]
    run = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    if asked is None:
        assert run.stdout == ""
    else:
        assert run.stdout.strip() == asked and "replacing the CPU-only build" in run.stderr


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelpolicy.progress as prog

    monkeypatch.setattr(prog, "_DELAY", 0.0)
    monkeypatch.setattr(prog, "_TICK", 0.01)
    pipe, tty = io.StringIO(), _Tty()
    with progress("checking", pipe):
        time.sleep(0.05)
    assert pipe.getvalue() == ""
    with progress("checking", tty) as bar:
        time.sleep(0.05)
        bar.note("checking: coverage")
        time.sleep(0.05)
    text = tty.getvalue()
    assert "kernelpolicy: checking " in text and "checking: coverage" in text
    assert text.endswith("\r") and text.rstrip("\r").split("\r")[-1].strip() == ""  # erased at the end


def test_check_prints_no_progress_into_a_pipe(capfd: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2] / "tests" / "check"
    main(["check", "--bare", "--jobs", "1", str(root / "base"), str(root / "dead-rule.yaml")])
    assert "kernelpolicy: checking" not in capfd.readouterr().err


def test_the_install_check_against_a_real_cached_venv() -> None:
    import subprocess

    from kernelpolicy.engines.vllm.testing import default_venv_python

    python = default_venv_python("0.26.0")
    if not python.is_file():
        pytest.skip(f"no cached vLLM 0.26.0 venv at {python}")
    ok = subprocess.run(
        [str(python), "-c", _venvs._CHECK, "vllm", "0.26.0"], capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        [str(python), "-c", _venvs._CHECK, "vllm", "0.27.0"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1 and "installed vllm 0.26.0 with torch" in bad.stderr
    # the cached venv is found, not rebuilt (it carries the marker)
    assert _venvs.ensure_venv("0.26.0", runner=lambda cmd: pytest.fail(f"ran {cmd}")) == python


def test_a_pin_the_index_lacks_is_overridden_with_its_reason() -> None:
    # vLLM 0.34.0 pins flashinfer-python 0.7.3, which the index lacks: the engine is installed
    # without its dependencies, then its requirements with that one replaced (the rest as published)
    cmds = _venvs.build_commands("0.34.0", Path("/c/vllm-0.34.0"), uv=None, base_python="python3")
    assert cmds[0] == ["python3", "-m", "venv", "/c/vllm-0.34.0"]
    install = cmds[1]
    assert install[:3] == ["/c/vllm-0.34.0/bin/python", "-c", _venvs._OVERRIDDEN]
    assert install[3:6] == ["vllm", "0.34.0", '{"flashinfer-python": "flashinfer-python==0.7.4"}']
    assert "nvidia-ml-py" in install[6:]
    req, why = _venvs.OVERRIDES[("vllm", "0.34.0")]["flashinfer-python"]
    assert req == "flashinfer-python==0.7.4" and "0.7.3" in why
    with_uv = _venvs.build_commands("0.34.0", Path("/c/v"), uv="uv", base_python="python3")
    assert with_uv[0][:3] == ["uv", "venv", "--quiet"]
    assert with_uv[1][with_uv[1].index("--override") + 1] == str(_venvs.overrides_file(Path("/c/v")))
    # a release without overrides keeps the plain install
    assert "vllm==0.33.0" in _venvs.build_commands("0.33.0", Path("/c/v"), uv=None, base_python="python3")[1]


def test_the_override_script_installs_the_requirements_with_the_pin_replaced(tmp_path: Path) -> None:
    """The script run in the venv: a stand-in pip records what it is asked; the engine's metadata
    is a fake dist-info (one pinned requirement, one with a marker that does not hold, one extra)."""
    dist = tmp_path / "vllm-9.9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\nRequires-Dist: flashinfer-python==0.7.3\n"
        'Requires-Dist: torch==2.14.0\nRequires-Dist: pywin32; sys_platform == "win32"\n'
        'Requires-Dist: b12x==1.5.1; extra == "b12x"\nRequires-Dist: nvidia-cutlass-dsl[cu13]==4.8.0\n'
    )
    log = tmp_path / "pip.log"
    pip = tmp_path / "pip"
    (pip / "_vendor").mkdir(parents=True)
    (pip / "__init__.py").write_text("")
    (pip / "__main__.py").write_text(f"import sys\nopen({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n")
    import importlib.util

    real = Path(importlib.util.find_spec("pip").origin).parent / "_vendor"  # type: ignore[arg-type,union-attr]
    (pip / "_vendor" / "__init__.py").write_text("")
    for entry in real.iterdir():  # pip's vendored packaging (and what it imports), as they are
        if entry.name != "__init__.py":
            (pip / "_vendor" / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    spec = '{"flashinfer-python": "flashinfer-python==0.7.4"}'
    subprocess.run(
        [sys.executable, "-c", _venvs._OVERRIDDEN, "vllm", "9.9.9", spec, "nvidia-ml-py"], env=env, check=True
    )
    first, second = log.read_text().splitlines()
    assert first == "install --disable-pip-version-check --no-compile --no-deps --only-binary=vllm vllm==9.9.9"
    assert second.split() == [
        "install", "--disable-pip-version-check", "--no-compile", "flashinfer-python==0.7.4", "torch==2.14.0",
        "nvidia-cutlass-dsl[cu13]==4.8.0", "nvidia-ml-py",
    ]  # fmt: skip


# -- hostile input, round four (R15): release strings as the index writes them, wheels only ---------


@pytest.mark.parametrize(
    "version", ["０.３４.０", "0.34.0..", "0.34.0-", "0.34.0+cpu", "01.34.0", "0.34.0 ", "9" * 5000, "0.34.0.post"]
)
def test_a_release_string_the_index_does_not_write_is_refused_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    """They passed a loose pattern (`\\d`, any `[a-z0-9.+-]*` tail): uv failed after the venv folder was
    made, leaving `.vllm-<string>.constraints.txt` and `.lock`."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(cache))
    monkeypatch.setattr(_venvs, "find_uv", lambda: pytest.fail("no build may start"))
    for engine in ("vllm", "sglang"):
        assert main([engine, "venv", version]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not a" in err and "release" in err
    assert not cache.exists() or not any(cache.rglob("*")), list(cache.rglob("*"))


@pytest.mark.parametrize("version", ["0.34.0", "0.5.12.post1", "0.35.0rc1", "0.34", "0.34.0.dev2"])
def test_a_published_release_string_is_accepted(version: str) -> None:
    assert _venvs.venv_python(version).parent.parent.name == f"vllm-{version}"


def test_the_engine_is_installed_from_a_wheel_only() -> None:
    """`vllm venv 0.1.0` (sdist only) built vLLM from source through uv (5.2 GB fetched)."""
    for uv in ("/bin/uv", None):
        for version in ("0.33.0", "0.34.0"):  # 0.34.0: the override script installs the engine itself
            install = _venvs.build_commands(version, Path("/c/v"), uv=uv, base_python="python3")[1]
            text = " ".join(install)
            if _venvs._OVERRIDDEN in install:  # the script installs the engine itself (its pip line is tested above)
                assert "'--no-deps', f'--only-binary={engine}'" in _venvs._OVERRIDDEN
                continue
            assert "--only-binary vllm" in text or "--only-binary=vllm" in text, install


def test_an_empty_base_python_is_refused(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--python ''` silently meant the default python."""
    assert main(["vllm", "venv", "0.34.0", "--python", ""]) == 2
    assert "--python" in capsys.readouterr().err
