"""Cached virtual environments holding one engine release each (``kernelpolicy vllm venv X.Y.Z``,
``kernelpolicy sglang venv X.Y.Z``).

A venv lives in the venvs folder of kernelpolicy's cache (``vllm-X.Y.Z``, ``sglang-X.Y.Z``). A marker
file is written only after the install and an import check succeeded, so an interrupted build
is removed and built again on the next call; concurrent builders of one version wait on a lock
file. ``uv`` builds it when it is on ``PATH`` or installed beside kernelpolicy (the ``test`` extra
has it), ``python -m venv`` and pip otherwise.

With uv, every engine venv is hard-linked from one uv cache in kernelpolicy's cache folder (the
same file system as the venvs): a wheel that several releases share (the CUDA libraries, a torch
release) is unpacked once on disk, not once per venv, and a venv built again costs no download.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from ._files import ReadError, owned_folder, owned_folders, read_owned, write_private
from .errors import UsageError
from .releases import NAMES, title
from .releases import spec as engine_spec

__all__ = [
    "CONSTRAINTS",
    "ENGINES",
    "MARKER",
    "OVERRIDES",
    "VenvError",
    "build_commands",
    "built_python",
    "constraints_file",
    "ensure_venv",
    "find_uv",
    "overrides_file",
    "venv_python",
]

#: The engines a venv can hold (the package name is the engine's) -> how the engine is written.
ENGINES: Final = {name: title(name) for name in NAMES}

MARKER: Final = ".kernelpolicy-ok"
_N: Final = "(?:0|[1-9][0-9]{0,5})"  # ASCII digits only (`\\d` took `０.３４.０`), no leading zeros
#: A release as the package index publishes one, in PEP 440's normal form: X.Y[.Z[.W]], then an
#: optional pre-release (a1, b2, rc1), .postN and .devN. No local part (`+cpu`), no trailing
#: punctuation (`0.34.0..`, `0.34.0-`): those passed a loose pattern and failed inside uv.
_VERSION: Final = re.compile(rf"{_N}(?:\.{_N}){{1,3}}(?:(?:a|b|rc){_N})?(?:\.post{_N})?(?:\.dev{_N})?\Z")
#: Packages installed beside the engine (the plugins read the GPU through NVML).
_EXTRA: Final = ("nvidia-ml-py",)
#: Requirements a release leaves open that today's index resolves to a build it cannot import:
#: sglang 0.5.12.post1 pins transformers 5.6.0 but not `kernels`, whose 0.15+ makes that
#: transformers raise at import ("Either a revision or a version must be specified",
#: transformers/integrations/hub_kernels.py); 0.5.23 pins `kernels>=0.14.1,<0.15` itself.
_PINS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("sglang", "0.5.12.post1"): ("kernels>=0.14.1,<0.15",),
}
#: Exact pins of a release that the package index cannot satisfy, each replaced by the nearest
#: release it has: (engine, version) -> {distribution: (requirement installed instead, why)}. The
#: engine is installed without its dependencies, then every requirement its metadata names (for
#: this platform, no extras) with these replaced, so the rest of its pins hold as published.
OVERRIDES: Final[dict[tuple[str, str], dict[str, tuple[str, str]]]] = {
    ("vllm", "0.34.0"): {
        "flashinfer-python": (
            "flashinfer-python==0.7.4",
            "vLLM 0.34.0 pins flashinfer-python 0.7.3, which the index lacks (it has 0.7.2.post1 and "
            "0.7.4); 0.7.4 is the nearest release that is not older than the pin",
        ),
    },
}
#: Requirements every uv build adds as constraints, each with why. uv installs wheels in parallel,
#: so where two distributions ship the same file, which copy stays is chance: cuda-python before
#: 12.8 ships `cuda/bindings` itself, beside cuda-bindings (which FlashInfer and the CUTLASS DSL
#: require); vLLM 0.34.0's venv once kept 12.6.2's runtime module, and the CUTLASS DSL failed to
#: import (`cuda.bindings.runtime` has no `cudaLibrary_t`), so vLLM could not inspect any model.
#: From 12.8, cuda-python is a metapackage over cuda-bindings (no file of its own there).
CONSTRAINTS: Final[dict[str, str]] = {
    "cuda-python>=12.8": "cuda-python before 12.8 ships the files of cuda-bindings itself, and which "
    "copy a parallel install keeps is chance",
}
#: Run in the new venv: the engine release it has (argv: engine, version), the packages
#: kernelpolicy's plugin imports there, and no file inside a package that two distributions ship
#: with different contents (which copy stays would depend on the order of the install).
_CHECK: Final = (
    "import importlib.metadata as md, sys\n"
    "engine, want = sys.argv[1], sys.argv[2]\n"
    "got = md.version(engine)\n"
    "[md.version(d) for d in ('torch', 'pydantic', 'PyYAML', 'packaging')]\n"
    "torch = md.version('torch')\n"
    "ok = got == want and not torch.endswith('+cpu')\n"
    "if not ok:\n"
    "    sys.exit(f'installed {engine} {got} with torch {torch}, wanted {want} with a CUDA torch')\n"
    "owners = {}\n"
    "for d in md.distributions():\n"
    "    for f in d.files or ():\n"
    "        s = str(f)\n"
    "        if '/' in s and '.dist-info/' not in s and not s.startswith('..') and f.hash is not None:\n"
    "            owners.setdefault(s, {})[d.metadata['Name']] = f.hash.value\n"
    "clash = sorted((p, sorted(o)) for p, o in owners.items() if len(set(o.values())) > 1)\n"
    "if clash:\n"
    "    p, names = clash[0]\n"
    "    sys.exit(f'{len(clash)} files are shipped by two distributions with different contents, '\n"
    "             f'`{p}` by {\" and \".join(names)}: the venv depends on the order of the install')\n"
)

#: Run in the new venv: a package index or find-links folder may offer a CPU-only torch build
#: (``2.13.0+cpu`` sorts above ``2.13.0``, so pip prefers it), with which the engine's CUDA platform
#: cannot load; each such package is replaced by the build of the same public version from the
#: index (``===`` matches that exact version, never a local ``+cpu`` one).
_CUDA_TORCH: Final = (
    "import importlib.metadata as md, subprocess, sys\n"
    "want = []\n"
    "for name in ('torch', 'torchvision', 'torchaudio'):\n"
    "    try:\n"
    "        public, _, local = md.version(name).partition('+')\n"
    "    except md.PackageNotFoundError:\n"
    "        continue\n"
    "    if local == 'cpu':\n"
    "        want.append(f'{name}==={public}')\n"
    "if want:\n"
    "    print('replacing the CPU-only build of', *want, file=sys.stderr)\n"
    "    sys.exit(subprocess.call([sys.executable, '-m', 'pip', 'install', '--disable-pip-version-check', *want]))\n"
)

#: Run in the new venv (argv: engine, version, the overrides as JSON, extra requirements): install
#: the engine without its dependencies, then its requirements with the overridden ones replaced.
_OVERRIDDEN: Final = (
    "import importlib.metadata as md, json, subprocess, sys\n"
    "from pip._vendor.packaging.requirements import Requirement\n"
    "from pip._vendor.packaging.utils import canonicalize_name\n"
    "engine, version, overrides, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]\n"
    "pip = [sys.executable, '-m', 'pip', 'install', '--disable-pip-version-check', '--no-compile']\n"
    "code = subprocess.call([*pip, '--no-deps', f'--only-binary={engine}', f'{engine}=={version}'])\n"
    "if code:\n"
    "    sys.exit(code)\n"
    "reqs = []\n"
    "for line in md.requires(engine) or ():\n"
    "    r = Requirement(line)\n"
    "    if r.marker is not None and not r.marker.evaluate({'extra': ''}):\n"
    "        continue\n"
    "    r.marker = None\n"
    "    reqs.append(overrides.get(canonicalize_name(r.name), str(r)))\n"
    "print('installing', engine, version, 'with', *overrides.values(), file=sys.stderr)\n"
    "sys.exit(subprocess.call([*pip, *reqs, *extra]))\n"
)

Runner = Callable[[Sequence[str]], int]

#: uv's cache, a folder beside the venvs (hard links need one file system).
_UV_CACHE: Final = ".uv-cache"


def overrides_file(venv: Path) -> Path:
    """Where uv reads the overridden requirements of the venv at *venv* (written by the builder)."""
    return venv.parent / f".{venv.name}.overrides.txt"


def constraints_file(venv: Path) -> Path:
    """Where uv reads :data:`CONSTRAINTS` for the venv at *venv* (written by the builder)."""
    return venv.parent / f".{venv.name}.constraints.txt"


def find_uv() -> str | None:
    """uv on ``PATH``, else the one the ``uv`` package installed beside this python, else ``None``."""
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


class VenvError(UsageError):
    """A venv could not be built (the one line says which step failed)."""


def venv_python(version: str, engine: str = "vllm") -> Path:
    """The python of the cached venv of *engine* *version* (it may not exist yet)."""
    from ._paths import cache_subdir

    if engine not in ENGINES:
        raise UsageError(f"`{engine}` is not an engine kernelpolicy builds venvs for ({', '.join(ENGINES)})")
    if not _VERSION.match(version):
        raise UsageError(
            f"`{version}` is not a {ENGINES[engine]} release (X.Y.Z, as the package index writes it:"
            " 0.34.0, 0.5.12.post1, 0.35.0rc1)"
        )
    return cache_subdir("venvs") / f"{engine}-{version}" / "bin" / "python"


def build_commands(
    version: str, venv: Path, *, uv: str | None, base_python: str, engine: str = "vllm"
) -> list[list[str]]:
    """Pure: the commands that build the venv of *engine* *version* at *venv*."""
    python = str(venv / "bin" / "python")
    packages = [engine_spec(engine).requirement.format(version=version), *_EXTRA, *_PINS.get((engine, version), ())]
    wheels_only = [f"--only-binary={engine}"]  # a release with no wheel is refused, never built from source
    overrides = OVERRIDES.get((engine, version))
    if uv:
        # one uv cache beside the venvs, hard-linked into each: shared wheels are on disk once
        # --only-binary: a release with no wheel is refused, never built from source (0.1.0 fetched 5.2 GB)
        install = [uv, "pip", "install", "--python", python, "--link-mode", "hardlink", "--only-binary", engine]
        install += ["--cache-dir", str(venv.parent / _UV_CACHE), "--constraint", str(constraints_file(venv))]
        if overrides:
            install += ["--override", str(overrides_file(venv))]
        return [
            [uv, "venv", "--quiet", "--seed", "--python", base_python, str(venv)],
            [*install, *packages],
            [python, "-c", _CUDA_TORCH],
            [python, "-c", _CHECK, engine, version],
        ]
    if overrides:  # pip in the venv installs the engine without its dependencies, then them
        spec = json.dumps({dist: req for dist, (req, _why) in overrides.items()}, sort_keys=True)
        install_pip = [python, "-c", _OVERRIDDEN, engine, version, spec, *packages[1:]]
        create = [base_python, "-m", "venv", str(venv)]
        return [create, install_pip, [python, "-c", _CUDA_TORCH], [python, "-c", _CHECK, engine, version]]
    return [
        [base_python, "-m", "venv", str(venv)],
        # no .pyc for the ~9 GB installed (minutes of CPU): the modules imported compile when first used
        [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-compile", *wheels_only, *packages],
        [python, "-c", _CUDA_TORCH],
        [python, "-c", _CHECK, engine, version],
    ]


def _run(cmd: Sequence[str]) -> int:
    # the build's own output goes to stderr: stdout is the python path only
    return subprocess.run(list(cmd), stdout=sys.stderr, check=False).returncode


_NOT_ALONE: Final = "is not this user's alone (another owner, others may write it, or a link)"


def _refuse_shared(venvs: Path) -> None:
    """:raises VenvError: the venvs folder is there but not this user's alone: nothing in it is
    run, printed as a venv, or written (another user could have planted a python there, or links
    that a write would follow)."""
    if os.path.lexists(venvs) and not owned_folder(venvs):
        raise VenvError(
            f"the venvs folder `{venvs}` {_NOT_ALONE}: nothing in it is run",
            help="make it yours alone (`chmod go-w`), or set KERNELPOLICY_CACHE_DIR to a folder of your own",
        )


def built_python(version: str, engine: str = "vllm") -> Path | None:
    """The python of the cached venv of *engine* *version* when it is built (its marker written
    after the install check) and this user's alone; ``None`` when it is not built (or a build was
    interrupted).

    The venvs folder, the venv and its ``bin`` must each be a folder, not a link, that this user
    owns and no one else may write, and the marker a regular file of this user's: the rule of
    every cache kernelpolicy keeps (a venv is run, so one planted by another user must never be).

    :raises VenvError: the venv is there but fails that rule (saying how to fix it).
    """
    python = venv_python(version, engine)
    venv = python.parents[1]
    _refuse_shared(venv.parent)
    if not os.path.lexists(venv):
        return None
    if not owned_folders(venv.parent, venv.name) or (
        os.path.lexists(venv / "bin") and not owned_folders(venv.parent, venv.name, "bin")
    ):
        raise VenvError(
            f"the {ENGINES[engine]} `{version}` venv `{venv}` {_NOT_ALONE}: it is not run",
            help="remove it to build it again, or make it yours alone (`chmod -R go-w`)",
        )
    try:
        read_owned(venv, MARKER, 4096)
    except ReadError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise VenvError(
            f"the marker of the {ENGINES[engine]} `{version}` venv `{venv / MARKER}`: {exc.reason}",
            help="remove the venv to build it again",
        ) from None
    return python if python.is_file() else None


@contextmanager
def _locked(folder: Path, name: str) -> Iterator[None]:
    """Hold the lock file *name* in *folder* (a folder of this user's alone), opened without
    following a link."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(folder / name, flags, 0o600)
    except OSError as exc:
        raise VenvError(f"the lock `{folder / name}`: {(exc.strerror or str(exc)).lower()}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise VenvError(f"the lock `{folder / name}` is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _write(folder: Path, name: str, text: str) -> None:
    """*text* as *folder*/*name*, through a temporary file renamed over it (a link planted there
    is replaced, never written through).

    :raises VenvError: it could not be written."""
    if not write_private(folder, name, text.encode()):
        raise VenvError(f"cannot write `{folder / name}` (the folder {_NOT_ALONE}, or cannot be written)")


@contextmanager
def _private_files() -> Iterator[None]:
    """Files the build makes are writable by this user alone (a umask of 002 would leave the
    venv writable by the group, and such a venv is never run)."""
    old = os.umask(0o022)
    os.umask(old | 0o022)
    try:
        yield
    finally:
        os.umask(old)


def _remove_incomplete(venv: Path, note: Callable[[str], None]) -> None:
    """Remove what an interrupted build left at *venv* (a link there: the link only)."""
    if os.path.lexists(venv):
        note("removing an incomplete venv")
        if venv.is_symlink():
            venv.unlink()
        else:
            shutil.rmtree(venv)


def _cpu_only_torch(venv: Path) -> bool:
    """Whether *venv* holds a CPU-only torch (an earlier builder kept one: the engine cannot load)."""
    return any(venv.glob("lib/python*/site-packages/torch-*+cpu.dist-info"))


def ensure_venv(
    version: str,
    *,
    base_python: str | None = None,
    use_uv: bool | None = None,
    runner: Runner = _run,
    note: Callable[[str], None] = lambda _text: None,
    engine: str = "vllm",
) -> Path:
    """The python of the venv of *engine* *version*, built first when it is missing or incomplete.

    *use_uv*: ``None`` uses uv when it is on ``PATH``. *note* hears each step's name.

    :raises VenvError: naming the step that failed.
    """
    python = venv_python(version, engine)
    venv = python.parent.parent
    venvs = venv.parent
    _refuse_shared(venvs)
    if built_python(version, engine) and _cpu_only_torch(venv):
        note("a venv built with a CPU-only torch: building it again")
        (venv / MARKER).unlink()
    if built_python(version, engine):
        return python
    try:
        venvs.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise VenvError(f"cannot make the venvs folder `{venvs}`: {(exc.strerror or str(exc)).lower()}") from None
    _refuse_shared(venvs)
    with _locked(venvs, f".{engine}-{version}.lock"), _private_files():
        if built_python(version, engine):  # another process built it meanwhile
            return python
        _remove_incomplete(venv, note)
        uv = find_uv() if use_uv is None or use_uv else None
        if use_uv and uv is None:
            raise VenvError(
                "`uv` is not on PATH nor beside kernelpolicy's python", help="install uv, or leave out --uv to use pip"
            )
        overrides = OVERRIDES.get((engine, version), {})
        if uv:
            _write(venvs, constraints_file(venv).name, "".join(f"{c}\n" for c in CONSTRAINTS))
        if uv and overrides:
            _write(venvs, overrides_file(venv).name, "".join(f"{req}\n" for req, _why in overrides.values()))
        base = base_python or os.environ.get("KERNELPOLICY_VENV_BASE_PYTHON") or sys.executable
        steps = (
            "creating the venv",
            f"installing {engine}=={version}",
            "making torch a CUDA build",
            "checking the install",
        )
        commands = build_commands(version, venv, uv=uv, base_python=base, engine=engine)
        for dist, (req, why) in overrides.items():
            note(f"installing {req} instead of the pinned {dist}: {why}")
        for step, cmd in zip(steps, commands, strict=True):
            note(step)
            code = runner(cmd)
            if code != 0:
                shutil.rmtree(venv, ignore_errors=True)
                raise VenvError(
                    f"building the {ENGINES[engine]} `{version}` venv failed while {step} (exit status {code})",
                    help=f"command: {' '.join(cmd[:4])} ...",
                )
        _write(venv, MARKER, f"{engine}=={version}\n")
    return python
