"""The compiled-policy cache: data only, checked on read, bounded; a bad entry never fails a load."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.dsl import _cache
from kernelpolicy.dsl._cache import MAX_ENTRIES, decode_policy, encode_policy, prune
from kernelpolicy.dsl.loader import cache_dir


@pytest.fixture(autouse=True)
def _fixed_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry's key stays the same while others edit the compiler's sources in this checkout."""
    from kernelpolicy.dsl import loader

    monkeypatch.setattr(loader, "_compiler_stamp", lambda: b"hostile-suite")


def _entries() -> list[Path]:
    return sorted(cache_dir().glob("policy-*.json"))


def _fresh_entry() -> Path:
    kp.load_policy(environ=False)
    (entry,) = _entries()
    return entry


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch planted-code-ran",))


def test_no_pickle_is_ever_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    entry = _fresh_entry()
    planted = entry.with_suffix(".pickle")
    planted.write_bytes(pickle.dumps(_Boom()))
    entry.write_bytes(pickle.dumps(_Boom()))  # even under the name of the real entry
    policy = kp.load_policy(environ=False)
    assert not (tmp_path / "planted-code-ran").exists()
    assert policy.by_id  # compiled afresh
    assert json.loads(entry.read_text())["format"] == _cache.FORMAT  # rewritten
    assert not planted.exists()  # what an earlier release left is pruned


@pytest.mark.parametrize(
    "corrupt",
    [
        b"",
        b"{not json",
        b"[" * 100_000,  # deeper than any parser recursion
        b'{"format": "kernelpolicy.policy-cache/1"}',
        b"null",
    ],
)
def test_corrupt_entry_is_ignored_and_rewritten(corrupt: bytes) -> None:
    entry = _fresh_entry()
    entry.write_bytes(corrupt)
    assert kp.load_policy(environ=False).by_id
    assert json.loads(entry.read_text())["format"] == _cache.FORMAT


def _tamper(entry: Path, edit: object) -> None:
    data = json.loads(entry.read_text())
    edit(data["policy"])  # type: ignore[operator]
    entry.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "edit",
    [
        lambda p: p["rules"][0].__setitem__("when", {"k": "gpu.famly", "r": "sm120", "x": "= sm120"}),
        lambda p: p["rules"][0].__setitem__("when", {"k": "gpu.family", "r": "sm999", "x": "= sm999"}),
        lambda p: p["rules"][0].__setitem__("kind", "exec"),
        lambda p: p["rules"][0].__setitem__("backends", ["no_such_backend"]),
        lambda p: p["rules"][0].__setitem__("origin", ["x", "1", "shipped"]),
        lambda p: p["implications"][0].__setitem__("sets", {"gpu.sm": 5}),
        lambda p: p["backends"][0].__setitem__("path", "kitchen"),
        lambda p: p.__setitem__("gpus", [{"name": 1}]),
        lambda p: p.__setitem__("warnings", [{"level": "fatal"}]),
    ],
)
def test_entry_with_a_bad_value_is_ignored(edit: object) -> None:
    entry = _fresh_entry()
    _tamper(entry, edit)
    with pytest.raises(ValueError):  # noqa: PT011 (CacheEntryError, ConditionError, FactError: all ValueError)
        decode_policy(json.loads(entry.read_text())["policy"])
    policy = kp.load_policy(environ=False)
    assert encode_policy(policy) == json.loads(entry.read_text())["policy"]  # compiled, rewritten


def test_fifo_where_the_entry_goes_does_not_hang() -> None:
    entry = _fresh_entry()
    entry.unlink()
    os.mkfifo(entry)
    assert kp.load_policy(environ=False).by_id  # a blocking open would hang here
    assert entry.is_file()  # replaced by a real entry


def test_oversized_entry_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = _fresh_entry()
    with entry.open("ab") as fh:
        fh.truncate(_cache.MAX_ENTRY_BYTES + 1)
    assert _cache.read_entry(cache_dir(), entry.stem.removeprefix("policy-")) is None
    assert kp.load_policy(environ=False).by_id


def test_cached_policy_decides_as_the_compiled_one() -> None:
    from kernelpolicy.dsl._compile import compile_files
    from kernelpolicy.dsl.loader import discover

    compiled = compile_files(discover(environ=False))
    _fresh_entry()
    cached = kp.load_policy(environ=False)  # from the entry
    assert encode_policy(cached) == encode_policy(compiled)
    assert cached.unsupported == compiled.unsupported and compiled.unsupported  # every section kept
    assert cached.rules == compiled.rules and cached.implications == compiled.implications
    for gpu, model in [
        ("sm121", "Qwen/Qwen3.6-35B-A3B-FP8"),
        ("sm90", "deepseek-ai/DeepSeek-V3"),
        ("B200", "openai/gpt-oss-120b"),
    ]:
        a = kp.resolve(kp.facts_for(gpu=gpu, model=model, policy=compiled), compiled)
        b = kp.resolve(kp.facts_for(gpu=gpu, model=model, policy=cached), cached)
        assert {p: d.backend for p, d in a.paths.items()} == {p: d.backend for p, d in b.paths.items()}
        assert a.warnings == b.warnings


def test_cache_is_bounded(tmp_path: Path) -> None:
    for i in range(MAX_ENTRIES + 5):
        p = tmp_path / f"policy-{i:03d}.json"
        p.write_text("{}")
        os.utime(p, ns=(i * 10**9, i * 10**9))
    prune(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == MAX_ENTRIES
    assert left[0] == "policy-005.json"  # the oldest went first


def test_unwritable_cache_folder_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(blocker))  # a file where the folder goes
    assert kp.load_policy(environ=False).by_id


def test_strict_plugin_starts_with_a_corrupt_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = _fresh_entry()
    entry.write_bytes(b"\x80\x04garbage")
    monkeypatch.setenv("KERNELPOLICY_STRICT", "1")
    from kernelpolicy.engines._runtime import core_policy
    from kernelpolicy.engines.vllm import plugin as vllm

    core_policy.cache_clear()
    try:
        assert vllm._STATE.policy().by_id  # the plugin's own load: no error
    finally:
        core_policy.cache_clear()


# -- round three (N7): integrity and ownership; a shared cache must not poison decisions


def _gb10_dense() -> str | None:
    policy = kp.load_policy(environ=False)
    facts = kp.facts_for(gpu="GB10", model="deepseek-ai/DeepSeek-V3", policy=policy)
    return kp.resolve(facts, policy).paths["dense"].backend


def test_an_entry_edited_in_place_is_not_believed() -> None:
    entry = _fresh_entry()
    honest = _gb10_dense()
    raw = entry.read_bytes()
    head, _, rest = raw.partition(b'"policy":')
    data = json.loads(rest[:-1])
    data["rules"] = [r for r in data["rules"] if not r["id"].startswith("deep_gemm")]  # the poisoning
    entry.write_bytes(head + b'"policy":' + json.dumps(data, separators=(",", ":")).encode() + b"}")
    os.chmod(entry, 0o600)
    assert _cache.read_entry(cache_dir(), entry.stem.removeprefix("policy-")) is None
    assert _gb10_dense() == honest


def test_an_entry_with_its_digest_redone_for_another_key_is_not_believed() -> None:
    entry = _fresh_entry()
    key = entry.stem.removeprefix("policy-")
    other = cache_dir() / "policy-0000.json"
    other.write_bytes(entry.read_bytes())  # a valid entry, planted under another key
    os.chmod(other, 0o600)
    assert _cache.read_entry(cache_dir(), "0000") is None
    assert _cache.read_entry(cache_dir(), key) is not None


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_folder_others_can_write_is_neither_read_nor_written(mode: int) -> None:
    entry = _fresh_entry()
    key = entry.stem.removeprefix("policy-")
    os.chmod(cache_dir(), mode)
    try:
        assert _cache.read_entry(cache_dir(), key) is None
        entry.unlink()
        assert kp.load_policy(environ=False).by_id
        assert not _entries()  # nothing written where others could replace it
    finally:
        os.chmod(cache_dir(), 0o700)


def test_an_entry_others_can_write_is_not_read() -> None:
    entry = _fresh_entry()
    os.chmod(entry, 0o666)
    assert _cache.read_entry(cache_dir(), entry.stem.removeprefix("policy-")) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_folder_or_entry_of_another_user_is_not_trusted() -> None:
    entry = _fresh_entry()
    key = entry.stem.removeprefix("policy-")
    os.chown(entry, 4242, 4242)
    assert _cache.read_entry(cache_dir(), key) is None
    os.chown(entry, 0, 0)
    os.chown(cache_dir(), 4242, 4242)
    try:
        assert _cache.read_entry(cache_dir(), key) is None
    finally:
        os.chown(cache_dir(), 0, 0)
    assert _cache.read_entry(cache_dir(), key) is not None


def test_a_linked_folder_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = _fresh_entry()
    key = entry.stem.removeprefix("policy-")
    link = tmp_path / "policies-link"
    link.symlink_to(cache_dir(), target_is_directory=True)
    assert _cache.read_entry(link, key) is None
    assert _cache.read_entry(cache_dir(), key) is not None


def test_new_cache_folders_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPOLICY_CACHE_DIR", str(tmp_path / "fresh"))
    old = os.umask(0)
    try:
        kp.load_policy(environ=False)
    finally:
        os.umask(old)
    assert cache_dir().stat().st_mode & 0o077 == 0
    (entry,) = _entries()
    assert entry.stat().st_mode & 0o077 == 0


_WORKER = """
import hashlib, json, sys
from kernelpolicy.dsl import loader
from kernelpolicy.dsl._cache import encode_policy
loader._compiler_stamp = lambda: b"hostile-suite"
import kernelpolicy as kp
seen = set()
for _ in range(int(sys.argv[1])):
    p = kp.load_policy(environ=False)
    seen.add(hashlib.sha256(json.dumps(encode_policy(p), sort_keys=True).encode()).hexdigest())
print(json.dumps(sorted(seen)))
"""

_VANDAL = """
import os, sys, time
path = sys.argv[1]
blob = open(path, "rb").read()
end = time.monotonic() + float(sys.argv[2])
i = 0
while time.monotonic() < end:
    i += 1
    with open(path, "wb") as fh:  # not atomic: readers may see any prefix of it
        fh.write(blob[: (i * 7919) % len(blob)])
        fh.flush()
        fh.write(blob[(i * 7919) % len(blob):])
    time.sleep(0.005)
"""


def test_ten_processes_share_the_cache_while_it_is_rewritten() -> None:
    import subprocess
    import sys

    from .helpers import SRC

    entry = _fresh_entry()
    compiled = encode_policy(kp.load_policy(environ=False))
    expected = __import__("hashlib").sha256(json.dumps(compiled, sort_keys=True).encode()).hexdigest()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    vandal = subprocess.Popen([sys.executable, "-c", _VANDAL, str(entry), "20"], env=env)
    workers = [
        subprocess.Popen([sys.executable, "-c", _WORKER, "3"], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(10)
    ]
    try:
        results = [json.loads(w.communicate(timeout=300)[0]) for w in workers]
    finally:
        vandal.kill()
        vandal.wait()
    assert all(r == [expected] for r in results), results
    assert not list(cache_dir().glob(".policy-*.tmp"))  # no temporary file left behind
