"""Facts: the machine-facts cache checked on read, contradicting GPU facts, the Python API's checks."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.errors import FactError
from kernelpolicy.facts.machine import gather
from kernelpolicy.facts.providers import Context, ProviderResult
from kernelpolicy.facts.providers._cache import device_identity, read_cache

from .helpers import SEED, cli, one_error_line


@dataclass
class _Fake:
    """A provider with a fixed answer that counts its runs."""

    name: str
    cost: str
    answer: dict[str, object]
    runs: list[int] = field(default_factory=list)

    @property
    def provides(self) -> tuple[str, ...]:
        return tuple(self.answer)

    def collect(self, ctx: Context) -> ProviderResult:
        self.runs.append(1)
        res = ProviderResult()
        for k, v in self.answer.items():
            res.put(k, v, "nvml" if self.cost == "nvml" else "torch")  # type: ignore[arg-type]
        return res


def _machine(tmp_path: Path, nvml_cc: str | None = "9.0") -> tuple[list[_Fake], Path]:
    cheap = _Fake("nvml", "nvml", {"gpu.cc": nvml_cc, "gpu.sm": "sm90"} if nvml_cc else {})
    costly = _Fake("torch", "subprocess", {"torch.cuda_archs": ["sm_90"], "gpu.count": 1})
    return [cheap, costly], tmp_path / "facts"


def _gather(providers: list[_Fake], cache: Path) -> object:
    return gather(providers=providers, cache_dir=cache, env={})  # type: ignore[arg-type]


def _cached_file(cache: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((cache / "machine-facts.json").read_text())
    return data


def test_a_cached_value_that_is_not_valid_is_said_and_rewritten(tmp_path: Path) -> None:
    providers, cache = _machine(tmp_path)
    _gather(providers, cache)
    data = _cached_file(cache)
    data["results"]["torch"]["values"]["gpu.count"] = "lots"  # type: ignore[index]
    (cache / "machine-facts.json").write_text(json.dumps(data))
    m = _gather(providers, cache)
    assert m.cache["status"] == "invalid"  # type: ignore[attr-defined]
    (note,) = [n for n in m.notes if n.startswith("cache:")]  # type: ignore[attr-defined]
    assert "`gpu.count`" in note and "--refresh" in note
    assert len(providers[1].runs) == 2  # gathered again
    assert m.values["gpu.count"] == 1  # type: ignore[attr-defined]
    assert _gather(providers, cache).cache["status"] == "hit"  # type: ignore[attr-defined]


def test_a_cache_naming_another_gpu_is_not_believed(tmp_path: Path) -> None:
    providers, cache = _machine(tmp_path)
    _gather(providers, cache)
    data = _cached_file(cache)
    torch = data["results"]["torch"]  # type: ignore[index]
    torch["values"]["gpu.sm"] = "sm121"
    torch["sources"]["gpu.sm"] = "torch"
    torch_provides = [*providers[1].answer, "gpu.sm"]
    providers[1].answer["gpu.sm"] = "sm90"  # the provider may give gpu.sm, the cache lies about it
    (cache / "machine-facts.json").write_text(json.dumps(data))
    m = _gather(providers, cache)
    assert sorted(torch_provides) == sorted(providers[1].provides)
    assert m.values["gpu.sm"] == "sm90"  # type: ignore[attr-defined]
    assert any("cache" in n and "sm121" in n and "--refresh" in n for n in m.notes)  # type: ignore[attr-defined]


def test_a_cached_key_the_provider_does_not_give(tmp_path: Path) -> None:
    providers, cache = _machine(tmp_path)
    _gather(providers, cache)
    data = _cached_file(cache)
    data["results"]["torch"]["values"]["deploy.allow_rules"] = ["everything"]  # type: ignore[index]
    data["results"]["torch"]["sources"]["deploy.allow_rules"] = "torch"  # type: ignore[index]
    (cache / "machine-facts.json").write_text(json.dumps(data))
    read = read_cache(cache, data["key"], {"torch": providers[1].provides})  # type: ignore[arg-type]
    assert read.status == "invalid" and "deploy.allow_rules" in str(read.problem)


def test_fifo_where_the_facts_cache_goes(tmp_path: Path) -> None:
    providers, cache = _machine(tmp_path)
    cache.mkdir()
    os.mkfifo(cache / "machine-facts.json")
    m = _gather(providers, cache)  # a blocking read would hang here
    assert m.cache["status"] == "unreadable"  # type: ignore[attr-defined]
    assert (cache / "machine-facts.json").is_file()  # replaced


def test_device_identity_is_read_from_sysfs(tmp_path: Path) -> None:
    for slot, vendor, device in [("0000:01:00.0", "0x10de", "0x2335"), ("0000:02:00.0", "0x8086", "0x1234")]:
        (tmp_path / slot).mkdir()
        (tmp_path / slot / "vendor").write_text(vendor + "\n")
        (tmp_path / slot / "device").write_text(device + "\n")
    assert device_identity(tmp_path) == ["0000:01:00.0:0x2335"]
    assert device_identity(tmp_path / "absent") == []


# --------------------------------------------------------------------------- contradicting facts


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["--gpu", "H200", "--fact", "gpu.sm=sm121"], "gpu.sm"),
        (["--gpu", "sm121", "--fact", "gpu.family=sm90"], "gpu.family"),
        (["--gpu", "sm121", "--fact", "gpu.cc=12.0"], "gpu.cc"),
        (["--gpu", "sm90", "--fact", "gpu.name=GB10"], "gpu.name"),
        (["--gpu", "sm121", "--fact", "gpu.has_fp8=false"], "gpu.has_fp8"),
        (["--gpu", "sm90", "--fact", "gpu.has_tcgen05=true"], "gpu.has_tcgen05"),
    ],
)
def test_contradicting_gpu_facts_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], key: str) -> None:
    code, _, err = cli(capsys, "explain", *argv, "--model", "Qwen/Qwen3.6-35B-A3B-FP8")
    assert code == 2
    assert one_error_line(err).startswith(f"kernelpolicy: error: fact `{key}`: ")
    assert "contradicts" in err


def test_agreeing_gpu_facts_are_fine(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = cli(capsys, *SEED, "--fact", "gpu.name=GB10", "--fact", "gpu.cc=12.1")
    assert code == 0


def test_python_api_facts_for_checks_agreement(policy: kp.Policy) -> None:
    with pytest.raises(FactError, match="contradicts"):
        kp.facts_for(gpu="H200", model="Qwen/Qwen3.6-35B-A3B-FP8", facts={"gpu.sm": "sm121"}, policy=policy)


# --------------------------------------------------------------------------- the Python API


@pytest.mark.parametrize(
    ("values", "sources", "message"),
    [
        ({"gpu.sm": 5}, {"gpu.sm": "user"}, "fact `gpu.sm`: `5` is not one of"),
        ({"no.such": 1}, {"no.such": "user"}, "fact `no.such`: unknown fact key"),
        ({"gpu.sm": None}, {"gpu.sm": "user"}, "`None` is not a value"),
        ({"gpu.sm": "sm121"}, {}, "fact `gpu.sm`: has no source"),
        ({"gpu.sm": "sm121", "gpu.family": "sm90"}, {"gpu.sm": "user", "gpu.family": "user"}, "contradicts"),
        ({"model.hidden_size": "big"}, {"model.hidden_size": "user"}, "is not a valid int"),
    ],
)
def test_facts_constructor_validates(values: dict[str, object], sources: dict[str, str], message: str) -> None:
    with pytest.raises(FactError) as err:
        kp.Facts(values=values, sources=sources)
    assert message in str(err.value)


def test_facts_constructor_normalises() -> None:
    f = kp.Facts(
        values={"quant.block": [128, 128], "vllm.version": "0.26"},
        sources=dict.fromkeys(("quant.block", "vllm.version"), "user"),
    )
    assert f.values == {"quant.block": (128, 128), "vllm.version": "0.26"}


def test_warnings_wait_until_the_facts_stand(capsys: pytest.CaptureFixture[str]) -> None:
    """A serve-line warning is not printed when the input is refused: the error line is alone."""
    code, _, err = cli(capsys, "explain", "--gpu", "sm999", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "-")
    assert code == 2
    assert one_error_line(err).startswith("kernelpolicy: error: unknown GPU `sm999`")
    code, _, err = cli(capsys, "explain", "--gpu", "sm121", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", "-")
    assert code == 0 and "kernelpolicy: warning: serve line: flags that decide no kernel, ignored: `-`" in err


# -- round three: the facts cache's GPU on a GPU-less machine (D15), and a cache others can write


def test_a_cached_gpu_on_a_machine_without_one_is_not_believed(tmp_path: Path) -> None:
    # NVML finds nothing and no NVIDIA PCI device exists; a planted torch result claims a GB10
    cheap = _Fake("nvml", "nvml", {})
    costly = _Fake("torch", "subprocess", {"torch.cuda_archs": ["sm_120"]})
    cache = tmp_path / "facts"
    _gather([cheap, costly], cache)
    data = _cached_file(cache)
    torch = data["results"]["torch"]  # type: ignore[index]
    for k, v in {"gpu.cc": "12.1", "gpu.sm": "sm121", "gpu.name": "NVIDIA GB10"}.items():
        torch["values"][k] = v
        torch["sources"][k] = "torch"
    (cache / "machine-facts.json").write_text(json.dumps(data))
    os.chmod(cache / "machine-facts.json", 0o600)

    class _Honest(_Fake):
        def collect(self, ctx: Context) -> ProviderResult:
            self.runs.append(1)
            res = ProviderResult()
            res.put("torch.cuda_archs", ["sm_120"], "torch")  # type: ignore[arg-type]
            return res

    # the provider may give the GPU's facts (so the planted ones pass the provider check); here it finds none
    honest = _Honest("torch", "subprocess", {"torch.cuda_archs": ["sm_120"], "gpu.cc": 0, "gpu.sm": 0, "gpu.name": 0})
    if device_identity():
        pytest.skip("this machine has an NVIDIA PCI device")
    m = _gather([cheap, honest], cache)
    assert m.gpu is None  # type: ignore[attr-defined]
    assert "gpu.sm" not in m.values  # type: ignore[attr-defined]
    assert any("no NVIDIA device" in n and "GB10" in n for n in m.notes)  # type: ignore[attr-defined]
    assert honest.runs  # gathered again


@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_a_facts_cache_others_can_write_is_not_read(tmp_path: Path, mode: int) -> None:
    providers, cache = _machine(tmp_path)
    _gather(providers, cache)
    os.chmod(cache, mode)
    try:
        m = _gather(providers, cache)
        assert m.cache["status"] == "unreadable"  # type: ignore[attr-defined]
        assert len(providers[1].runs) == 2  # not believed: gathered again
        assert any("not this user's alone" in n for n in m.notes)  # type: ignore[attr-defined]
    finally:
        os.chmod(cache, 0o700)
    os.chmod(cache / "machine-facts.json", 0o666)
    assert read_cache(cache, _cached_file(cache)["key"]).status == "unreadable"  # type: ignore[arg-type]
