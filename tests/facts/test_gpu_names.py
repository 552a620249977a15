"""GPU names as NVML and ``nvidia-smi`` print them, AMD parts, and one fingerprint per GPU."""

from __future__ import annotations

import pytest

import kernelpolicy as kp
from kernelpolicy.errors import UnknownGPUError
from kernelpolicy.facts.gpu import _norm, facts_from_spec, product_names

#: Names as NVML's ``nvmlDeviceGetName`` (and so ``nvidia-smi``) reports them, with the catalog
#: product each one is.
NVML_NAMES = {
    "NVIDIA H100 80GB HBM3": "NVIDIA H100",
    "NVIDIA H100 PCIe": "NVIDIA H100",
    "NVIDIA H100 NVL": "NVIDIA H100",
    "NVIDIA H800": "NVIDIA H100",
    "NVIDIA H200": "NVIDIA H200",
    "H200 NVL": "NVIDIA H200",
    "NVIDIA H200 NVL": "NVIDIA H200",
    "NVIDIA H20": "NVIDIA H20",  # its own Hopper product (was read as an H200)
    "NVIDIA GH200 480GB": "NVIDIA GH200",
    "NVIDIA GH200 144G HBM3e": "NVIDIA GH200",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "NVIDIA RTX PRO 6000 Blackwell",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "NVIDIA RTX PRO 6000 Blackwell",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "NVIDIA RTX PRO 6000 Blackwell",
    "NVIDIA RTX PRO 5000 Blackwell": "NVIDIA RTX PRO 5000 Blackwell",
    "NVIDIA GeForce RTX 5090": "NVIDIA GeForce RTX 5090",
    "NVIDIA GeForce RTX 5090 Laptop GPU": "NVIDIA GeForce RTX 5090",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "NVIDIA B200": "NVIDIA B200",
    "NVIDIA B300 SXM6 AC": "NVIDIA B300",
    "NVIDIA GB200": "NVIDIA GB200",
    "NVIDIA GB300": "NVIDIA GB300",
    "NVIDIA GB10": "NVIDIA GB10",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA RTX 6000 Ada Generation": "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100",
    "NVIDIA A800-SXM4-80GB": "NVIDIA A100",
    "NVIDIA A10G": "NVIDIA A10",
    "NVIDIA GeForce RTX 3090": "NVIDIA A10",
}

#: The variant words NVML adds to a product name, each with a name it was seen on.
VARIANTS = ("{} PCIe", "{}-SXM5-80GB", "{} 141GB HBM3e", "{} NVL", "{} Max-Q Workstation Edition", "{} Server Edition")


@pytest.mark.parametrize(("nvml", "product"), sorted(NVML_NAMES.items()))
def test_nvml_names_resolve_to_their_product(nvml: str, product: str, policy: kp.Policy) -> None:
    facts = facts_from_spec(nvml, policy.gpus)
    assert facts["gpu.name"] == product


def test_every_catalog_name_with_every_variant_is_its_product(policy: kp.Policy) -> None:
    for p in policy.gpus:
        for name in (p.name, *p.aliases):
            for variant in VARIANTS:
                spelled = variant.format(name)
                assert facts_from_spec(spelled, policy.gpus)["gpu.name"] == p.name, spelled
                assert facts_from_spec(spelled.upper(), policy.gpus)["gpu.sm"] == p.sm, spelled


def test_normalised_names_do_not_collide(policy: kp.Policy) -> None:
    """Leaving the variant words out joins no two products of the catalog."""
    seen: dict[str, str] = {}
    for p in policy.gpus:
        for name in (p.name, *p.aliases):
            key = _norm(name)
            assert seen.setdefault(key, p.name) == p.name, (name, seen[key])
    assert len(product_names(policy.gpus)) == len(seen)


@pytest.mark.parametrize("amd", ["MI300X", "MI355X", "mi250", "AMD Instinct MI325X", "gfx942", "AMD Radeon PRO W7900"])
def test_amd_gpus_are_named_unsupported(amd: str, policy: kp.Policy) -> None:
    with pytest.raises(UnknownGPUError) as info:
        facts_from_spec(amd, policy.gpus)
    assert (
        str(info.value) == f"unknown GPU `{amd}`: AMD GPUs are not supported (kernelpolicy decides NVIDIA CUDA kernels)"
    )
    assert "did you mean" not in str(info.value)


def test_a_typo_still_gets_a_suggestion(policy: kp.Policy) -> None:
    with pytest.raises(UnknownGPUError, match=r"did you mean `h200`\?"):
        facts_from_spec("H2000", policy.gpus)


@pytest.mark.parametrize("spelling", ["H100", "NVIDIA H100 80GB HBM3", "H100 PCIe", "9.0"])
def test_one_gpu_one_fingerprint(spelling: str, policy: kp.Policy) -> None:
    """The product name describes the GPU; the ``gpu.*`` facts it implies decide (and are hashed)."""
    model = "Qwen/Qwen3.6-35B-A3B-FP8"
    base = kp.resolve(kp.facts_for(gpu="sm90", model=model, policy=policy), policy)
    other = kp.resolve(kp.facts_for(gpu=spelling, model=model, policy=policy), policy)
    assert other.fingerprint == base.fingerprint
    # a different GPU is still a different decision
    b200 = kp.resolve(kp.facts_for(gpu="B200", model=model, policy=policy), policy)
    assert b200.fingerprint != base.fingerprint
