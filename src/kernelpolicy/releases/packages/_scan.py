"""Download every published release of the packages the rules' ``fix`` entries name and record
which releases show each fix (``contents.json``).

``python -m kernelpolicy.releases.packages._scan [--offline] [--policy FILE]...``: for each
package a shipped rule's ``fix`` names, lists the releases the package index has (``pip index
versions``: final and post releases, from the oldest modelled engine release or the series of
the oldest release an engine release pins: :func:`oldest_scanned`), downloads the ones not
cached (``pip download --no-deps``: a wheel or, where the index has none, the source archive)
under ``<kernelpolicy cache>/packages/<package>/``, and looks in each for every signature.
``--offline`` lists and downloads nothing: it scans the cached files of the releases the current
table lists. Nothing is imported or extracted: a file is read from the archive, a ``symbol`` is
found with :mod:`ast`.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from ..._paths import cache_subdir
from ...policy import FixEvidence
from . import CONTENTS_FILE

__all__ = [
    "ScanError",
    "archive_member",
    "cached_archives",
    "main",
    "oldest_scanned",
    "scan",
    "shows",
    "wanted_evidence",
]

_PIP: Final = (sys.executable, "-m", "pip", "--disable-pip-version-check")


class ScanError(Exception):
    """A release could not be listed, downloaded or read (one line)."""


def cache_folder(package: str) -> Path:
    return cache_subdir("packages") / canonicalize_name(package)


def index_versions(package: str) -> list[str]:
    """Every final and post release of *package* the index lists, oldest first."""
    cmd = [*_PIP, "index", "versions", package]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("Available versions:")), None)
    if out.returncode != 0 or line is None:
        raise ScanError(f"`pip index versions {package}` listed no releases (exit status {out.returncode})")
    versions = []
    for v in line.split(":", 1)[1].split(","):
        try:
            parsed = Version(v.strip())
        except ValueError:  # InvalidVersion, or more digits than int() converts
            continue
        if not parsed.is_prerelease:
            versions.append(v.strip())
    return sorted(versions, key=Version)


def oldest_scanned(package: str) -> Version | None:
    """Where the scan of *package* starts: for vLLM and SGLang, their oldest modelled release
    (0.24.0, 0.5.12); for a package they pin, the first release of the series of the oldest
    release a scanned engine release pins (``0.6.0`` for flashinfer-python, pinned at 0.6.11.post1
    and later); ``None`` (every release) for any other package."""
    from ..sglang.versions import release_records as sglang_records
    from ..vllm.versions import release_records as vllm_records

    name = canonicalize_name(package)
    engines = {"vllm": vllm_records(), "sglang": sglang_records()}
    if name in engines:
        return min((Version(v) for v in engines[name]), default=None)
    pins = [
        Version(v)
        for records in engines.values()
        for record in records.values()
        for dist, v in record.get("requires", {}).items()
        if canonicalize_name(dist) == name
    ]
    if not pins:
        return None
    oldest = min(pins)
    return Version(f"{oldest.major}.{oldest.minor}")


def _archive_version(path: Path, package: str) -> str | None:
    """The release an archive in the cache holds, from its file name (``None``: another package's)."""
    try:
        if path.name.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(path.name)
        else:
            name, version = parse_sdist_filename(path.name)
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None
    return str(version) if name == canonicalize_name(package) else None


def cached_archives(package: str) -> dict[str, Path]:
    """release -> its cached archive (a wheel before a source archive), from this scan's cache or
    the engines' wheel cache (``<kernelpolicy cache>/wheels``, where the release scans keep them)."""
    out: dict[str, Path] = {}
    for folder in (cache_folder(package), cache_subdir("wheels")):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir(), key=lambda p: (p.suffix != ".whl", p.name)):
            v = _archive_version(path, package)
            if v is not None and v not in out:
                out[v] = path
    return out


def download(package: str, version: str) -> Path:
    """The archive of *package* *version*, downloaded into the cache unless it is there."""
    have = cached_archives(package)
    if version in have:
        return have[version]
    folder = cache_folder(package)
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [*_PIP, "download", "--no-deps", "--quiet", "-d", str(folder), f"{package}=={version}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    have = cached_archives(package)
    if version not in have:
        tail = (out.stderr.strip().splitlines() or ["no archive"])[-1]
        raise ScanError(f"`pip download {package}=={version}` gave no archive: {tail}")
    return have[version]


def archive_member(path: Path, file: str) -> bytes | None:
    """The bytes of *file* inside the wheel or source archive at *path* (a source archive's
    top folder is skipped), or ``None`` when it is not there."""
    if path.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(path) as z:
            try:
                return z.read(file)
            except KeyError:
                return None
    with tarfile.open(path, "r:*") as t:
        for m in t.getmembers():
            if m.isfile() and m.name.split("/", 1)[-1] == file:
                f = t.extractfile(m)
                return None if f is None else f.read()
    return None


def _defines(source: bytes, symbol: str) -> bool:
    """Whether Python *source* defines *symbol* (``name`` or ``Class.name``) at module or class level."""
    try:
        tree = ast.parse(source.decode("utf-8", "replace"))
    except SyntaxError:
        return False
    head, _, rest = symbol.partition(".")

    def names(body: Iterable[ast.stmt]) -> dict[str, ast.stmt]:
        out: dict[str, ast.stmt] = {}
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[n.name] = n
            elif isinstance(n, ast.Assign):
                out |= {t.id: n for t in n.targets if isinstance(t, ast.Name)}
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                out[n.target.id] = n
        return out

    top = names(tree.body).get(head)
    if not rest:
        return top is not None
    return isinstance(top, ast.ClassDef) and rest in names(top.body)


def shows(evidence: FixEvidence, content: bytes) -> bool:
    """Whether *content* (the evidence's file in one release) shows the signature."""
    if evidence.kind == "contains":
        return evidence.pattern.encode() in content
    if evidence.kind == "matches":
        return re.search(evidence.pattern, content.decode("utf-8", "replace"), re.MULTILINE) is not None
    return _defines(content, evidence.pattern)


def wanted_evidence(policy_files: list[Path]) -> list[FixEvidence]:
    """The ``fix`` signatures of the shipped rules (and *policy_files*), every alternative, once each, in order."""
    from ...dsl.loader import load_policy

    policy = load_policy(policy_files, environ=False)
    out: list[FixEvidence] = []
    for r in policy.rules:
        for ev in r.fix or ():
            if ev not in out:
                out.append(ev)
    return out


def scan(evidence: list[FixEvidence], releases: dict[str, list[str]], archive: Any) -> dict[str, Any]:
    """The table: *releases* per package, and per evidence the releases that show it.
    *archive* maps ``(package, release)`` to its archive path."""
    fixes = []
    for ev in sorted(evidence, key=lambda e: e.key):
        entry: dict[str, Any] = {
            "package": ev.package,
            "file": ev.file,
            "kind": ev.kind,
            "pattern": ev.pattern,
            "has": [],
            "lacks": [],
            "no_file": [],
        }
        for release in releases.get(ev.package, []):
            content = archive_member(archive(ev.package, release), ev.file)
            group = "no_file" if content is None else "has" if shows(ev, content) else "lacks"
            entry[group].append(release)
        fixes.append(entry)
    return {
        "generated_by": "python -m kernelpolicy.releases.packages._scan (do not edit)",
        "packages": {p: releases[p] for p in sorted(releases)},
        "fixes": fixes,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernelpolicy.releases.packages._scan", description=__doc__)
    p.add_argument("--offline", action="store_true", help="list and download nothing: scan the cached archives")
    p.add_argument("--policy", action="append", default=[], type=Path, metavar="FILE", help="a policy file too")
    p.add_argument("--out", type=Path, default=CONTENTS_FILE)
    args = p.parse_args(argv)
    try:
        evidence = wanted_evidence(args.policy)
        old = json.loads(args.out.read_text(encoding="utf-8")).get("packages", {}) if args.out.is_file() else {}
        packages = sorted({ev.package for ev in evidence})
        releases = {pkg: list(old.get(pkg, [])) if args.offline else index_versions(pkg) for pkg in packages}
        for pkg, found in releases.items():
            floor = oldest_scanned(pkg)
            releases[pkg] = [v for v in found if floor is None or Version(v) >= floor]

        def archive(package: str, release: str) -> Path:
            if args.offline:
                have = cached_archives(package)
                if release not in have:
                    raise ScanError(f"{package} {release} is not cached under {cache_folder(package)}")
                return have[release]
            return download(package, release)

        doc = scan(evidence, releases, archive)
    except (ScanError, OSError, zipfile.BadZipFile, tarfile.TarError, subprocess.TimeoutExpired) as exc:
        print(f"kernelpolicy: error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    n = sum(len(v) for v in releases.values())
    print(f"{len(evidence)} fix signatures checked in {n} releases of {', '.join(packages) or 'no package'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
