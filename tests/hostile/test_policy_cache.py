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
    from kernelpolicy.engines.vllm import plugin as vllm

    vllm._core_policy.cache_clear()
    try:
        assert vllm._policy_or_fail().by_id  # the plugin's own load: no error
    finally:
        vllm._core_policy.cache_clear()
