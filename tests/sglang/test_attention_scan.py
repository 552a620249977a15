"""SGLang's attention choice read from its wheels (issue #39): the returns of its automatic choice
(``get_default_attn_backend``) and the places its resolution sets ``--attention-backend`` itself
(``releases/sglang/overrides.json``), and the rules generated from them
(``rules/backends/attention.sglang.yaml``)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from kernelpolicy.releases.sglang._overrides import OVERRIDES_FILE, scan_overrides
from kernelpolicy.releases.sglang.generate import (
    ATTENTION_GENERATED,
    attention_orders,
    attention_overrides,
    generated_files,
)
from kernelpolicy.releases.sglang.names import attention_id, attention_name

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = json.loads(OVERRIDES_FILE.read_text(encoding="utf-8"))["releases"]


def test_the_generated_attention_file_is_in_sync_with_the_data() -> None:
    want = generated_files(ROOT)[ROOT / ATTENTION_GENERATED]
    assert (ROOT / ATTENTION_GENERATED).read_text(encoding="utf-8") == want, (
        f"{ATTENTION_GENERATED} is out of date: run `python -m kernelpolicy._docs`"
    )


def test_0_5_23s_automatic_choice_is_read_branch_by_branch() -> None:
    """The branches of 0.5.23's `get_default_attn_backend`, as SGLang returns them, in its order."""
    default = COMMITTED["0.5.23"]["attention_default"]
    assert default["function"] == "get_default_attn_backend"
    assert [r["value"] for r in default["returns"]] == [
        None,  # an out-of-tree platform's own default
        "flashinfer",  # Whisper
        "fa3",
        "fa4",
        "trtllm_mha",
        "aiter",
        "torch_native",
        "flashinfer",
        "triton",
        "fa3",
        "flashinfer",
        "aiter",
        "triton",
        "torch_native",
        "triton",
    ]
    orders, notes = attention_orders({"0.5.23": COMMITTED["0.5.23"]})
    newest = {o["id"]: (o["when"], o["backends"]) for o in orders if "sglang.version" not in o["when"]}
    assert [backends[0] for _when, backends in newest.values()] == [
        "flashinfer",
        "flash_attn",
        "trtllm_mha",
        "flashinfer",
        "triton_attn",
        "flash_attn",
        "flashinfer",
        "triton_attn",
    ]
    when, backends = newest["sglang-attention-mha-2-flash_attn"]
    assert when == {"deploy.engine": "sglang", "model.mla": False, "gpu.family": "sm90"}
    assert backends == ["flash_attn", "trtllm_mha", "flashinfer", "triton_attn"]
    # FA4 for a model whose K and V widths differ: kernelpolicy has no fact of it, so it is listed
    assert any("-> fa4" in n and "has_asymmetric_kv" in n for n in notes)


def test_deepseek_on_sm100_is_trtllm_mla_in_every_scanned_release() -> None:
    """The DeepSeek family's TRT-LLM MLA on SM100 moved from ServerArgs (0.5.12) to a model
    override (0.5.15 on): one `prefer` window after another, none missing."""
    rules, _notes = attention_overrides(COMMITTED)
    mla = [r for r in rules if r["prefer"] == ["trtllm_mla"]]
    assert mla and all(r["when"]["gpu.family"] == "sm100" for r in mla)
    covered = sorted({v for r in mla for v in COMMITTED if _in_window(v, r["when"]["sglang.version"])})
    assert covered == sorted(COMMITTED)


def _in_window(version: str, window: str) -> bool:
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(window).contains(version)


# -- the scanner and the generator on a release built here

_DEFAULT = """
def get_default_attn_backend(server_args, use_mla_backend, model_config):
    if current_platform.is_out_of_tree():
        return current_platform.get_default_attention_backend()
    if not use_mla_backend:
        if get_platform().is_hopper_with_cuda_12_3 and is_no_spec_infer_or_topk_one(server_args):
            return "fa3"
        elif get_platform().is_hip:
            return "aiter"
        else:
            if get_platform().has_flashinfer and not model_config.has_attention_sinks:
                return "flashinfer"
            return "triton"
    else:
        if get_platform().is_sm100:
            return "flashinfer"
        return "triton"
"""
_OVERRIDE = """
@_register_for("MyForCausalLM")
def _my_overrides(server_args, hf_config):
    cfg = resolving_view(server_args)
    overrides = {}
    if is_attention_backend_not_set(cfg) and get_platform().is_sm100:
        overrides["attention_backend"] = "trtllm_mha"
    if cfg.decode_attention_backend is None:
        overrides["decode_attention_backend"] = "flashinfer"
    return overrides
"""


def _wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "sglang-9.9.9-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("sglang-9.9.9.dist-info/METADATA", "Name: sglang\nVersion: 9.9.9\n")
        z.writestr("sglang/srt/arg_groups/model_override_base.py", _DEFAULT)
        z.writestr("sglang/srt/arg_groups/model_overrides/my.py", _OVERRIDE)
    return wheel


def test_a_release_built_here_gives_its_order_and_overrides(tmp_path: Path) -> None:
    record = scan_overrides(_wheel(tmp_path))
    assert record.pop("version") == "9.9.9"
    orders, notes = attention_orders({"9.9.9": record})
    got = [(o["when"], o["backends"]) for o in orders if "sglang.version" in o["when"]]
    base = {"deploy.engine": "sglang", "sglang.version": ">=9.9.9"}
    assert got == [
        ({**base, "model.mla": False, "gpu.family": "sm90"}, ["flash_attn", "flashinfer", "triton_attn"]),
        (
            {**base, "model.mla": False, "all": [{"all": [{"not": {"model.attention_sinks": True}}]}]},
            ["flashinfer", "triton_attn"],
        ),
        ({**base, "model.mla": False}, ["triton_attn"]),
        ({**base, "model.mla": True, "gpu.family": "sm100"}, ["flashinfer", "triton_attn"]),
        ({**base, "model.mla": True}, ["triton_attn"]),
    ]
    assert notes == []  # the AMD and out-of-tree branches never run on NVIDIA: no note
    rules, left_out = attention_overrides({"9.9.9": record})
    assert [(r["when"], r["prefer"]) for r in rules] == [
        ({**base, "model.architecture": "MyForCausalLM", "gpu.family": "sm100"}, ["trtllm_mha"])
    ]
    assert left_out == [
        "arg_groups/model_overrides/my.py _my_overrides -> decode_attention_backend=flashinfer: sets one phase only"
    ]


def test_sglangs_names_map_to_kernelpolicy_ids_and_back() -> None:
    assert [attention_id(n) for n in ("fa3", "fa4", "triton", "trtllm_mla", "dsa", None)] == [
        "flash_attn",
        "flash_attn",
        "triton_attn",
        "trtllm_mla",
        None,
        None,
    ]
    assert attention_name("flash_attn", "sm90") == "fa3"
    assert attention_name("flash_attn", "sm100") == "fa4"
    assert attention_name("triton_attn") == "triton"
    assert attention_name("flashmla_sparse") is None  # SGLang runs it inside its `dsa` backend


_THROUGH_A_NAME = """
@_register_for("Llama4ForCausalLM")
def _llama4_overrides(server_args, hf_config):
    cfg = resolving_view(server_args)
    overrides = {}
    if cfg.attention_backend is None:
        if get_platform().is_sm100:
            backend, platform = "trtllm_mha", "sm100"
        elif get_platform().is_hip:
            backend, platform = "aiter", "hip"
        else:
            backend, platform = "triton", "other platforms"
        overrides["attention_backend"] = backend
    return overrides

@_register_for("Gemma4ForCausalLM")
def _gemma4_overrides(server_args, hf_config):
    default = "trtllm_mha" if get_platform().is_sm100 else "triton"
    overrides = {}
    overrides["attention_backend"] = default
    return overrides
"""


def test_a_backend_set_through_a_local_name_is_read_with_the_tests_of_its_assignment(tmp_path: Path) -> None:
    """Llama 4 and Gemma 4 (0.5.15 on) set `--attention-backend` from a local variable; before the
    scan read it, `explain` printed `--attention-backend flashinfer` for them on sm120, which SGLang
    refuses at start-up ("fa3, aiter, triton, ascend, trtllm_mha or intel_xpu is required for
    Llama4 model"; the 0.5.23 conformance sweep)."""
    wheel = tmp_path / "sglang-9.9.9-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("sglang-9.9.9.dist-info/METADATA", "Name: sglang\nVersion: 9.9.9\n")
        z.writestr("sglang/srt/arg_groups/model_overrides/llama4.py", _THROUGH_A_NAME)
    record = scan_overrides(wheel)
    record.pop("version")
    rules, _notes = attention_overrides({"9.9.9": record})
    got = {(r["when"]["model.architecture"], r["prefer"][0]): r["when"] for r in rules}
    assert set(got) == {
        ("Llama4ForCausalLM", "trtllm_mha"),
        ("Llama4ForCausalLM", "triton_attn"),
        ("Gemma4ForCausalLM", "trtllm_mha"),
        ("Gemma4ForCausalLM", "triton_attn"),
    }
    assert got[("Llama4ForCausalLM", "trtllm_mha")]["gpu.family"] == "sm100"
    assert got[("Gemma4ForCausalLM", "triton_attn")]["all"] == [{"not": {"gpu.family": "sm100"}}]


def test_llama_4_and_gemma_4_on_sm120_take_triton_as_sglang_requires() -> None:
    """The same, read from the 0.5.23 wheel, through `explain` as an operator runs it."""
    import subprocess
    import sys

    for model in ("RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "RedHatAI/gemma-4-31B-it-FP8-block"):
        argv = [
            "explain",
            "--json",
            "--no-env",
            "--gpu",
            "RTX PRO 6000",
            "--model",
            model,
            "--engine",
            "sglang==0.5.23",
        ]
        done = subprocess.run(
            [sys.executable, "-m", "kernelpolicy", *argv], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        d = json.loads(done.stdout)
        assert d["paths"]["attention"]["backend"] == "triton_attn", model
        args = d["engine"]["sglang"]["args"]
        assert args[args.index("--attention-backend") + 1] == "triton", model
