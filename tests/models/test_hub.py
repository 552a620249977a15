"""Model ids resolved as vLLM resolves them: the local Hugging Face cache, the catalog, the Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import main
from kernelpolicy.errors import UnknownModelError
from kernelpolicy.facts.hub import HubOptions
from kernelpolicy.facts.model import locate_model

from . import configs as c
from .conftest import COMMIT, HubServer, write_cache

NEW_ID = "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8"  # not in the shipped catalog


def _decision(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object], str]:
    code = main(["explain", "--no-env", "--json", *argv])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out else {}), captured.err


def test_new_id_not_in_the_catalog(policy: kp.Policy) -> None:
    assert NEW_ID.lower() not in {m.id.lower() for m in policy.models}


def test_offline_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "hub"
    write_cache(cache, NEW_ID, {"config.json": c.QWEN3_30B_A3B_FP8})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, decision, err = _decision(capsys, "--gpu", "H100", "--model", NEW_ID)
    assert code == 0, err
    assert decision["facts"]["model.num_experts"] == 128  # type: ignore[index]
    assert decision["sources"]["model.num_experts"] == "hf-cache"  # type: ignore[index]


def test_hf_home_is_the_cache_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_cache(tmp_path / "home" / "hub", NEW_ID, {"config.json": c.QWEN3_30B_A3B_FP8})
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    found = locate_model(NEW_ID, ())
    assert found.source == "hf-cache"
    assert found.file.endswith(f"snapshots/{COMMIT}/config.json")


def test_download_dir_and_revision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = "1111111111111111111111111111111111111111"
    cache = tmp_path / "downloads"
    write_cache(cache, NEW_ID, {"config.json": c.QWEN3_30B_A3B_FP8})
    write_cache(cache, NEW_ID, {"config.json": c.QWEN3_30B_CT_NVFP4}, ref="nvfp4", commit=other)
    flags = ("--gpu", "B200", "--download-dir", str(cache), "--model", NEW_ID)
    _code, main_rev, err = _decision(capsys, *flags)
    assert main_rev["facts"]["quant.scheme"] == "fp8_block", err  # type: ignore[index]
    _code, branch, err = _decision(capsys, *flags, "--revision", "nvfp4")
    assert branch["facts"]["quant.scheme"] == "nvfp4", err  # type: ignore[index]


def test_cached_hf_quant_config_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_cache(
        tmp_path,
        "nvidia/DeepSeek-R1-FP4",
        {"config.json": c.NVIDIA_DEEPSEEK_R1_FP4, "hf_quant_config.json": c.NVIDIA_DEEPSEEK_R1_FP4_HF_QUANT},
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert locate_model("nvidia/DeepSeek-R1-FP4", ()).model_facts()["quant.scheme"] == "nvfp4"


def test_the_cache_answers_before_the_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: kp.Policy
) -> None:
    catalog_id = "Qwen/Qwen3.6-35B-A3B-FP8"
    write_cache(tmp_path, catalog_id, {"config.json": c.QWEN3_30B_A3B_FP8})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    f = kp.facts_for(gpu="sm121", model=catalog_id, policy=policy)
    assert f.sources["model.num_experts"] == "hf-cache" and f.get("model.num_experts") == 128
    assert f.sources["model.router_dtype"] == "catalog"  # the catalog's extra facts still apply


def test_catalog_is_the_offline_fallback(policy: kp.Policy) -> None:
    f = kp.facts_for(gpu="sm121", model="Qwen/Qwen3.6-35B-A3B-FP8", policy=policy)
    assert f.sources["model.type"] == "catalog"


def test_offline_and_not_cached_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", NEW_ID])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert f"unknown model `{NEW_ID}`: not in the Hugging Face cache" in err and "HF_HUB_OFFLINE" in err
    assert "did you mean" not in err  # a different model is not a typo of a catalog one


def test_online_fetches_metadata_only(hub: HubServer, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    hub.add(NEW_ID, {"config.json": c.QWEN3_30B_A3B_FP8, "model-00001-of-00016.safetensors": b"\0" * 64})
    code, decision, err = _decision(capsys, "--gpu", "H100", "--model", NEW_ID)
    assert code == 0, err
    assert decision["sources"]["quant.scheme"] == "hub"  # type: ignore[index]
    assert decision["facts"]["quant.block"] == [128, 128]  # type: ignore[index]
    fetched = {p.rsplit("/", 1)[1] for p in hub.paths}
    assert fetched == {"config.json", "hf_quant_config.json"}
    assert not any("safetensors" in p for p in hub.paths)
    # now cached: the same id resolves offline, from the files the first run stored
    hub.requests.clear()
    offline = HubOptions.from_env({"HF_HUB_CACHE": str(tmp_path / "hf-cache"), "HF_HUB_OFFLINE": "1"})
    assert locate_model(NEW_ID, (), offline).source == "hf-cache"
    assert hub.requests == []


def test_online_modelopt_file(hub: HubServer, policy: kp.Policy) -> None:
    hub.add(
        "nvidia/DeepSeek-V3-0324-FP4",  # not in the catalog: the Hub answers
        {"config.json": c.NVIDIA_DEEPSEEK_R1_FP4, "hf_quant_config.json": c.NVIDIA_DEEPSEEK_R1_FP4_HF_QUANT},
    )
    f = kp.facts_for(gpu="sm100", model="nvidia/DeepSeek-V3-0324-FP4", policy=policy)
    assert f.get("quant.moe_scheme") == "nvfp4" and f.sources["quant.moe_scheme"] == "hub"


def test_gated_repo_needs_hf_token(hub: HubServer, monkeypatch: pytest.MonkeyPatch, policy: kp.Policy) -> None:
    hub.add("meta-llama/Gated-FP8", {"config.json": c.LLAMA_8B_CT_FP8_DYNAMIC}, gated_token="hf_secret")
    with pytest.raises(UnknownModelError, match=r"a gated repository on .*\(401\): set HF_TOKEN"):
        kp.facts_for(gpu="sm90", model="meta-llama/Gated-FP8", policy=policy)
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(UnknownModelError, match="the token in HF_TOKEN has no access"):
        kp.facts_for(gpu="sm90", model="meta-llama/Gated-FP8", policy=policy)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    f = kp.facts_for(gpu="sm90", model="meta-llama/Gated-FP8", policy=policy)
    assert f.get("quant.scheme") == "fp8_channel"


def test_missing_repo_is_one_line(hub: HubServer, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", "nobody/nothing"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "unknown model `nobody/nothing`: no such repository on `http://127.0.0.1:" in err
    assert "(401); if it is private or gated, set HF_TOKEN" in err


def test_missing_revision(hub: HubServer, policy: kp.Policy) -> None:
    hub.add(NEW_ID, {"config.json": c.QWEN3_30B_A3B_FP8})
    with pytest.raises(UnknownModelError, match="no revision `v9` on"):
        kp.facts_for(gpu="sm90", model=NEW_ID, policy=policy, hub=HubOptions.from_env(revision="v9"))


def test_repo_without_config(hub: HubServer, policy: kp.Policy) -> None:
    hub.add("someone/gguf-only", {"model.gguf": b"GGUF"})
    with pytest.raises(UnknownModelError, match="the repository has no `config.json`"):
        kp.facts_for(gpu="sm90", model="someone/gguf-only", policy=policy)


def test_unreachable_hub_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", NEW_ID])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "`http://127.0.0.1:9` cannot be reached" in err


def test_typo_of_a_catalog_id_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", "Qwen/Qwen3.6-35B-A3B-PF8"])
    assert code == 2
    assert "did you mean `Qwen/Qwen3.6-35B-A3B-FP8`?" in capsys.readouterr().err


def test_revision_reads_the_real_files_of_a_catalog_id(hub: HubServer, policy: kp.Policy) -> None:
    catalog_id = "Qwen/Qwen3.6-35B-A3B-FP8"
    hub.add(catalog_id, {"config.json": c.QWEN3_30B_A3B_FP8})
    assert kp.facts_for(gpu="sm90", model=catalog_id, policy=policy).sources["model.type"] == "catalog"
    assert hub.requests == []  # the catalog answers without the network
    f = kp.facts_for(gpu="sm90", model=catalog_id, policy=policy, hub=HubOptions.from_env(revision="main"))
    assert f.sources["model.type"] == "hub" and f.get("model.num_experts") == 128


# -- what an operator meets on day one (issue 25) -------------------------------------------------


def test_missing_repo_without_token_does_not_blame_a_token(hub: HubServer, capsys: pytest.CaptureFixture[str]) -> None:
    """The Hub's bare 401 for a repository that does not exist (no ``X-Error-Code``):
    huggingface_hub 2.x raises a plain ``HfHubHTTPError``, which must not read as a refused token."""
    hub.bare_401 = True
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", "nobody/nothing"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "refused the token" not in err
    assert "no such repository on `http://127.0.0.1:" in err
    assert "(401); if it is private or gated, set HF_TOKEN" in err


def test_missing_repo_with_a_token_says_either(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.bare_401 = True
    monkeypatch.setenv("HF_TOKEN", "hf_valid")
    with pytest.raises(
        UnknownModelError, match=r"no such repository .*\(401\), or the token in HF_TOKEN has no access"
    ):
        locate_model("nobody/nothing", ())


def test_an_invalid_token_is_named(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add(NEW_ID, {"config.json": c.QWEN3_30B_A3B_FP8})
    hub.bad_tokens = ("hf_expired",)
    monkeypatch.setenv("HF_TOKEN", "hf_expired")
    with pytest.raises(UnknownModelError, match=r"refused the token in HF_TOKEN \(401\): it is not valid"):
        locate_model(NEW_ID, ())


def test_catalog_id_with_a_missing_revision_online(hub: HubServer, capsys: pytest.CaptureFixture[str]) -> None:
    catalog_id = "Qwen/Qwen3.6-35B-A3B-FP8"
    hub.add(catalog_id, {"config.json": c.QWEN3_30B_A3B_FP8})
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", catalog_id, "--revision", "v9"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "no revision `v9` on" in err and "without --revision the shipped catalog answers" in err
    assert "did you mean" not in err  # the id is right as typed


def test_catalog_id_with_a_revision_offline(capsys: pytest.CaptureFixture[str]) -> None:
    catalog_id = "Qwen/Qwen3.6-35B-A3B-FP8"
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", catalog_id, "--revision", "v9"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "revision `v9` is not in the Hugging Face cache" in err and "HF_HUB_OFFLINE is set" in err
    assert "without --revision the shipped catalog answers" in err and "did you mean" not in err


def test_missing_revision_of_a_cached_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_cache(tmp_path, NEW_ID, {"config.json": c.QWEN3_30B_A3B_FP8})
    write_cache(tmp_path, NEW_ID, {"config.json": c.QWEN3_30B_CT_NVFP4}, ref="nvfp4", commit="1" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    hub = HubOptions.from_env(revision="v9")
    with pytest.raises(UnknownModelError) as info:
        locate_model(NEW_ID, (), hub)
    assert info.value.reason == (
        f"revision `v9` is not in the Hugging Face cache `{tmp_path}` (cached: `main`, `nvfp4`) and HF_HUB_OFFLINE is set"
    )


@pytest.mark.parametrize(
    "typo",
    [
        "Qwen/Qwen3.6-35B-A3B-FP9",  # one character off, in a number
        "Qwen/Qwen3.6-35B-A38-FP8",
        "Qwen/Qwen3.6-35B-A3B-FP",
        "Qwen3.6-35B-A3B-FP8",  # without its organisation
    ],
)
def test_catalog_id_one_character_off_is_suggested(typo: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", typo])
    assert code == 2
    assert "did you mean `Qwen/Qwen3.6-35B-A3B-FP8`?" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["env", "serve-line", "--env"])
def test_modelscope_is_refused_not_ignored(
    how: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = "Qwen/Qwen3.6-35B-A3B-FP8"
    argv = ["explain", "--no-env", "--gpu", "H100"]
    if how == "env":
        monkeypatch.setenv("VLLM_USE_MODELSCOPE", "1")
        argv += ["--model", model]
    elif how == "--env":
        argv += ["--model", model, "--env", "VLLM_USE_MODELSCOPE=True"]
    else:
        argv += ["--", "VLLM_USE_MODELSCOPE=1", "vllm", "serve", model]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "VLLM_USE_MODELSCOPE is set" in err and "ModelScope" in err


def test_modelscope_with_a_local_folder_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps(c.QWEN3_30B_A3B_FP8))
    monkeypatch.setenv("VLLM_USE_MODELSCOPE", "1")
    assert locate_model(str(tmp_path), ()).source == "config.json"


def test_mistral_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "params.json").write_text('{"dim": 4096}')
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "a Mistral-format folder (`params.json`, no `config.json`)" in err


@pytest.mark.parametrize("exists", [True, False])
def test_gguf_path_is_named(exists: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Qwen3-8B-Q4_K_M.gguf"
    if exists:
        path.write_bytes(b"GGUF\x03\x00\x00\x00")
    code = main(["explain", "--no-env", "--gpu", "H100", "--model", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "a GGUF file: vLLM runs GGUF weights with its own GGUF kernels" in err


def test_folder_of_gguf_files_is_named(tmp_path: Path) -> None:
    (tmp_path / "model-Q8_0.gguf").write_bytes(b"GGUF")
    with pytest.raises(UnknownModelError, match="it holds GGUF files"):
        locate_model(str(tmp_path), ())
