"""vLLM's per-release data: the scanner, the files generated from its output, and the tables
that must agree with it (the plugin's, the rules' engine vocabulary)."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import kernelpolicy as kp
from kernelpolicy.facts.record import Facts
from kernelpolicy.releases.vllm import names as _names
from kernelpolicy.releases.vllm import versions as _versions
from kernelpolicy.releases.vllm._scan import ScanError, main, scan_release, write_releases
from kernelpolicy.releases.vllm.generate import GENERATED, dense_orders, generated_files, release_implications

ROOT = Path(__file__).resolve().parents[2]
RECORDS = _versions.release_records()
NEWEST = next(reversed(RECORDS.values()))


# -- the generated files


@pytest.mark.parametrize("rel", sorted(GENERATED))
def test_generated_rule_files_are_in_sync_with_the_data(rel: str) -> None:
    want = generated_files(RECORDS, ROOT)[ROOT / rel]
    have = (ROOT / rel).read_text(encoding="utf-8")
    assert have == want, f"{rel} is out of date: run `python -m kernelpolicy._docs`"


def test_every_scanned_release_has_its_vendored_deep_gemm_and_pins_implied(policy: kp.Policy) -> None:
    for version, record in RECORDS.items():
        d = kp.resolve(Facts.from_values({"vllm.version": version, "gpu.sm": "sm90"}), policy)
        dg = record["deep_gemm"]
        assert d.facts.values["deep_gemm.version"] == dg["version"]
        assert d.facts.values["deep_gemm.commit"] == dg["commit"][:7]
        assert d.facts.values["deep_gemm.has_sm120_sf_layout"] is dg["sm120_fp8_gemm"]
        assert d.facts.values["torch.version"] == record["requires"]["torch"]
        assert d.facts.values["flashinfer.version"] == record["requires"]["flashinfer-python"]
        assert d.facts.sources["deep_gemm.commit"].startswith("implied:vllm-")


def test_an_external_deep_gemm_is_not_taken_for_the_vendored_one(policy: kp.Policy) -> None:
    d = kp.resolve(
        Facts.from_values({"vllm.version": "0.28.0", "gpu.sm": "sm90", "deep_gemm.source": "external"}), policy
    )
    assert "deep_gemm.commit" not in d.facts.values


def test_releases_that_agree_share_one_entry() -> None:
    records = {v: RECORDS[v] for v in ("0.28.0", "0.29.0")}  # same DeepGEMM commit, other pins
    ids = [i["id"] for i in release_implications(records)["implies"]]
    assert ids == ["vllm-0.28-0.29-vendors-deep_gemm-8b1392b9", "vllm-0.28-pins", "vllm-0.29-pins"]
    spans = {i["id"]: i["when"]["vllm.version"] for i in release_implications(records)["implies"]}
    assert spans["vllm-0.28-0.29-vendors-deep_gemm-8b1392b9"] == ">=0.28,<0.30"


def test_dense_orders_follow_the_newest_release_and_map_every_class() -> None:
    orders = {o["id"]: o for o in dense_orders(RECORDS)["order"]}
    block = orders["vllm-order-dense-fp8-block"]["backends"]
    assert len(block) == len(NEWEST["dense"]["priority"]["fp8_block"])
    assert [_names.dense_id_of(c) for c in NEWEST["dense"]["priority"]["fp8_block"]] == block
    # the per-tensor table lists two torch classes: one id, in the place of the first
    tensor = orders["vllm-order-dense-fp8-tensor"]["backends"]
    assert tensor.count("torch") == 1 and orders["vllm-order-dense-fp8-tensor"]["when"]["quant.scheme"] == [
        "fp8_tensor",
        "fp8_channel",
    ]


def test_a_class_without_an_id_stops_the_generation() -> None:
    record = json.loads(json.dumps(NEWEST))
    record["dense"]["priority"]["fp8_block"].insert(0, "BrandNewFp8Kernel")
    with pytest.raises(ValueError, match="`BrandNewFp8Kernel` has no kernelpolicy dense id"):
        dense_orders({record["version"]: record})


# -- the tables that must agree with the data


def test_every_kernel_class_kernelpolicy_names_exists_in_a_scanned_release() -> None:
    classes = {c for r in RECORDS.values() for c in r["dense"]["classes"]}
    tables = (_names.DENSE_BLOCK_KERNELS, _names.DENSE_TENSOR_KERNELS, _names.DENSE_LINEAR_KERNELS)
    named = {c for t in tables for cs in t.values() for c in cs} | _names.UNMODELLED_DENSE_KERNELS
    assert named - classes == set()


def test_every_class_in_a_vllm_fp8_table_has_an_id() -> None:
    for version, r in RECORDS.items():
        for table in ("fp8_block", "fp8_tensor"):
            unmapped = [c for c in r["dense"]["priority"][table] if _names.dense_id_of(c) is None]
            assert unmapped == [], f"vLLM {version} {table}"


def test_the_engine_vocabulary_names_the_plugins_kernel_classes(policy: kp.Policy) -> None:
    engine = policy.engines["vllm"]
    plugin: dict[str, set[str]] = {}
    for table in (_names.DENSE_BLOCK_KERNELS, _names.DENSE_TENSOR_KERNELS):
        for bid, classes in table.items():
            plugin.setdefault(bid, set()).update(classes)
    assert {bid: set(cs) for bid, cs in engine.dense_kernels.items()} == plugin


def test_every_env_variable_the_rules_read_exists_in_a_scanned_release() -> None:
    # one that a newer release dropped says so in its `because` (VLLM_TEST_FORCE_FP8_MARLIN: to 0.28)
    engine = yaml.safe_load((ROOT / "rules/engines/vllm.yaml").read_text(encoding="utf-8"))["engine"]
    for entry in engine["env"]:
        read_by = [v for v, r in RECORDS.items() if entry["name"] in r["env"]]
        assert read_by, f"{entry['name']} is read by no scanned vLLM release"
        if entry["name"] not in NEWEST["env"]:
            last = ".".join(read_by[-1].split(".")[:2])
            assert f"up to {last}" in entry["because"], entry["because"]


def test_the_plugin_tables_come_from_the_data() -> None:
    assert set(_versions.SUPPORTED) == {".".join(v.split(".")[:2]) for v in RECORDS}
    for points in _versions.SUPPORTED.values():
        r = RECORDS[points.scanned]
        assert points.record is r
        assert points.dense_warmup_gate in r["warmup"]["gates"]
        assert {o.scheme: o.names for o in points.moe_oracles} == {
            s: tuple(r["moe"][s]["names"]) for s in ("mxfp4", "mxfp8", "nvfp4")
        }
    assert _versions.patch_points_for("0.29.3") is _versions.SUPPORTED["0.29"]
    assert _versions.patch_points_for("0.40.0") is None
    assert _versions.patch_points_for("not a version") is None


# -- the scanner, on a release built here


_LINEAR = """
_POSSIBLE_FP8_KERNELS = {
    PlatformEnum.CUDA: [CutlassFP8ScaledMMLinearKernel, PerTensorTorchFP8ScaledMMLinearKernel],
    PlatformEnum.ROCM: [ROCmFP8ScaledMMLinearKernel],
}
_POSSIBLE_FP8_BLOCK_KERNELS: dict = {PlatformEnum.CUDA: [DeepGemmFp8BlockScaledMMKernel, TritonFp8BlockScaledMMKernel]}
def choose_scaled_mm_linear_kernel(config, possible_kernels, *, quantization=None): ...
class TritonFp8BlockScaledMMKernel: ...
"""
_FP8_ORACLE = """
class Fp8MoeBackend(Enum):
    NONE = 0
    TRITON = 1
    DEEPGEMM = 2
    FLASHINFER_CUTLASS = 3
def _get_priority_backends(moe_config, weight_key, activation_key):
    _AVAILABLE_BACKENDS = [Fp8MoeBackend.DEEPGEMM, Fp8MoeBackend.FLASHINFER_CUTLASS, Fp8MoeBackend.TRITON]
    if current_platform.is_device_capability(90) and weight_key == kBlock:
        if moe_config.ep_size > 1:
            _move_to_front(_AVAILABLE_BACKENDS, Fp8MoeBackend.FLASHINFER_CUTLASS)
        else:
            _move_to_front(_AVAILABLE_BACKENDS, Fp8MoeBackend.TRITON)
    return _AVAILABLE_BACKENDS
def select_fp8_moe_backend(config, weight_key, activation_key):
    if should_auto_disable_deep_gemm(config.model_type): ...
"""
_ORACLE = """
class {enum}(Enum):
    MARLIN = 1
def map_backend(name):
    return {{"marlin": {enum}.MARLIN}}[name]
def select_{scheme}_moe_backend(config): ...
"""
_ENVS = """
environment_variables = {
    "VLLM_USE_DEEP_GEMM": lambda: True,
    "VLLM_HOST_IP": lambda: "",
    "VLLM_USE_FLASHINFER_MOE_FP8": lambda: False,
}
"""


def _release(tmp_path: Path, version: str = "9.1.0", sdist_version: str | None = None) -> tuple[Path, Path]:
    files = {
        f"vllm-{version}.dist-info/METADATA": f"Name: vllm\nVersion: {version}\n"
        "Requires-Dist: torch==3.0.0\nRequires-Dist: nvidia-cutlass-dsl[cu13]==5.0\n"
        'Requires-Dist: flashinfer-python==1.2.0; extra == "x"\nRequires-Dist: numpy>=2\n',
        "vllm/_version.py": "__commit_id__ = commit_id = 'gabc1234'\n",
        "vllm/model_executor/kernels/linear/__init__.py": _LINEAR,
        "vllm/model_executor/layers/fused_moe/oracle/fp8.py": _FP8_ORACLE,
        "vllm/model_executor/layers/quantization/fp8.py": (
            "from vllm.model_executor.layers.fused_moe.oracle.fp8 import (\n    select_fp8_moe_backend,\n)\n"
        ),
        "vllm/model_executor/warmup/deep_gemm_warmup.py": "def _deep_gemm_linear_data(): ...\ndef helper(): ...\n",
        "vllm/envs.py": _ENVS,
        "vllm/third_party/deep_gemm/__init__.py": "__version__ = '3.0.0'\n",
        "vllm/third_party/deep_gemm/include/deep_gemm/impls/sm120_fp8_fp4_gemm_1d1d.cuh": "",
    }
    for scheme, enum in (("mxfp4", "Mxfp4MoeBackend"), ("mxfp8", "Fp8MoeBackend"), ("nvfp4", "NvFp4MoeBackend")):
        files[f"vllm/model_executor/layers/fused_moe/oracle/{scheme}.py"] = _ORACLE.format(enum=enum, scheme=scheme)
    wheel = tmp_path / f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    sdist = tmp_path / f"vllm-{version}.tar.gz"
    cmake = (
        'set(_DEEPGEMM_UPSTREAM_REPO "https://github.com/example/DeepGEMM.git")\n'
        f'set(_DEEPGEMM_UPSTREAM_TAG "{"c0ffee12" * 5}")\n'
    )
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in (
            ("cmake/external_projects/deepgemm.cmake", cmake),
            ("PKG-INFO", f"Version: {sdist_version or version}\n"),
        ):
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return wheel, sdist


def test_scan_reads_a_wheel_and_its_source_tarball(tmp_path: Path) -> None:
    wheel, sdist = _release(tmp_path)
    r = scan_release(wheel, sdist)
    assert r["version"] == "9.1.0" and r["commit"] == "gabc1234"
    assert r["requires"] == {"torch": "3.0.0", "nvidia-cutlass-dsl": "5.0"}  # a pin under an extra is not one
    assert r["dense"]["priority"]["fp8_tensor"] == [
        "CutlassFP8ScaledMMLinearKernel",
        "PerTensorTorchFP8ScaledMMLinearKernel",
    ]
    assert r["dense"]["priority"]["fp8_block"] == ["DeepGemmFp8BlockScaledMMKernel", "TritonFp8BlockScaledMMKernel"]
    assert r["dense"]["priority"]["nvfp4"] == []
    assert r["dense"]["choose_params"] == ["config", "possible_kernels", "*quantization"]
    assert r["dense"]["classes"] == ["TritonFp8BlockScaledMMKernel"]
    fp8 = r["moe"]["fp8"]
    assert fp8["priority"] == ["DEEPGEMM", "FLASHINFER_CUTLASS", "TRITON"]
    assert [(m["backend"], m["gpu"]) for m in fp8["move_to_front"]] == [
        ("FLASHINFER_CUTLASS", {"sm": 90}),
        ("TRITON", {"sm": 90}),
    ]
    assert "not moe_config.ep_size > 1" in fp8["move_to_front"][1]["when"]
    assert fp8["importers"] == ["vllm.model_executor.layers.quantization.fp8"]
    assert fp8["checks_model_type"] is True
    assert r["moe"]["mxfp8"]["backends"] == ["NONE", "TRITON", "DEEPGEMM", "FLASHINFER_CUTLASS"]  # Fp8MoeBackend
    assert r["moe"]["nvfp4"]["names"] == ["marlin"]
    assert r["warmup"]["gates"] == ["_deep_gemm_linear_data"]
    assert r["env"] == ["VLLM_USE_DEEP_GEMM", "VLLM_USE_FLASHINFER_MOE_FP8"]
    assert r["deep_gemm"] == {
        "version": "3.0.0",
        "sm120_fp8_gemm": True,
        "repo": "example/DeepGEMM",
        "commit": "c0ffee12" * 5,
    }


def test_scan_reads_an_unzipped_release_like_its_wheel(tmp_path: Path) -> None:
    wheel, _ = _release(tmp_path)
    tree = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(tree)
    (tree / "numpy").mkdir()  # the rest of site-packages is not read
    (tree / "numpy" / "broken.py").write_text("def (:\n")
    assert scan_release(tree) == scan_release(wheel)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_text("not a wheel"), "is neither a folder, a wheel nor a source tarball"),
        (lambda p: zipfile.ZipFile(p, "w").writestr("x/METADATA", ""), "holds no vllm-*.dist-info/METADATA"),
    ],
)
def test_scan_refuses_what_is_not_a_vllm_release(tmp_path: Path, make: Any, message: str) -> None:
    path = tmp_path / "thing.whl"
    make(path)
    with pytest.raises(ScanError, match=message.replace("*", r"\*")):
        scan_release(path)


def test_scan_refuses_a_source_tarball_of_another_release(tmp_path: Path) -> None:
    wheel, sdist = _release(tmp_path, sdist_version="9.0.0")
    with pytest.raises(ScanError, match="is vLLM 9.0.0, the wheel 9.1.0"):
        scan_release(wheel, sdist)


def test_the_command_merges_releases_into_the_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "releases.json"
    write_releases([{"version": "9.10.0", "x": 1}], out)
    wheel, _ = _release(tmp_path)  # its source tarball lies beside it and is found
    assert main([str(wheel), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert list(data["releases"]) == ["9.1.0", "9.10.0"]  # by version, not by text
    assert data["releases"]["9.1.0"]["deep_gemm"]["commit"] == "c0ffee12" * 5
    assert main([str(tmp_path / "missing.whl"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "kernelpolicy: " in err and "missing.whl" in err and "Traceback" not in err


def test_the_readme_release_table_is_in_sync_with_the_data() -> None:
    from kernelpolicy.releases.vllm.generate import release_table

    assert release_table(RECORDS) in (ROOT / "README.md").read_text(encoding="utf-8"), (
        "README's vLLM release table is out of date: run `python -m kernelpolicy._docs`"
    )


def _order(policy: kp.Policy, oid: str) -> list[str]:
    return list(next(o for o in policy.orders["moe"] if o.id == oid).backends)


def test_the_moe_orders_keep_vllms_fp8_priority(policy: kp.Policy) -> None:
    # the MoE orders stay hand-written (they also order backends vLLM's FP8 oracle does not
    # list); the backends vLLM does list must keep its order, and its sm90 move stays first
    fp8 = NEWEST["moe"]["fp8"]
    ids = list(dict.fromkeys(b for m in fp8["priority"] if (b := _names.moe_id_of(m)) is not None))
    general = _order(policy, "order-moe")
    assert [b for b in ids if b in general] == [b for b in general if b in ids]
    assert len([b for b in ids if b in general]) >= 6
    moved = [m["backend"] for m in fp8["move_to_front"] if m["gpu"] == {"sm": 90} and "not " in m["when"]]
    assert [_names.moe_id_of(m) for m in moved] == _order(policy, "order-moe-sm90-block")[:1]


@pytest.mark.parametrize(
    ("version", "kept"),
    [("0.33.0", False), ("0.29.1", False), ("0.28.0", True), ("0.40.0", True)],  # 0.40: not scanned
)
def test_a_variable_the_release_does_not_read_is_left_out_of_the_facts(
    policy: kp.Policy, version: str, kept: bool
) -> None:
    from kernelpolicy.deployment.pipeline import build_facts

    derived = Facts.from_values({"vllm.version": version, "gpu.sm": "sm90"}, source="vllm")
    env = {"VLLM_TEST_FORCE_FP8_MARLIN": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    built = build_facts(policy, derived=derived, env=env)
    assert ("deploy.env.VLLM_TEST_FORCE_FP8_MARLIN" in built.facts) is kept
    assert built.facts.get("deploy.env.SGLANG_ENABLE_JIT_DEEPGEMM") == "0"  # no vLLM release reads it: kept
    if not kept:
        assert built.warnings == (
            f"`VLLM_TEST_FORCE_FP8_MARLIN` is left out: vLLM {version} does not read it (vLLM 0.24.0 to 0.28.0 does)",
        )
    moe = kp.resolve(built.facts, policy).paths["moe"]
    assert (moe.explicit is not None) is kept


def test_download_fetches_the_wheel_and_source_tarball_the_index_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib.request

    from kernelpolicy.releases.vllm import _scan

    made = tmp_path / "made"
    made.mkdir()
    wheel, sdist = _release(made)
    listing = {
        "urls": [
            {"filename": "vllm-9.1.0-cp38-abi3-manylinux_2_28_aarch64.whl", "packagetype": "bdist_wheel", "url": "x"},
            {"filename": wheel.name, "packagetype": "bdist_wheel", "url": str(wheel)},
            {"filename": sdist.name, "packagetype": "sdist", "url": str(sdist)},
        ]
    }
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: io.BytesIO(json.dumps(listing).encode()))
    monkeypatch.setattr(urllib.request, "urlretrieve", lambda url, dest: Path(dest).write_bytes(Path(url).read_bytes()))
    into = tmp_path / "cache"
    into.mkdir()
    got_wheel, got_sdist = _scan._download("9.1.0", into)
    assert (got_wheel.name, got_sdist.name) == (wheel.name, sdist.name)  # the x86_64 wheel, not aarch64
    assert scan_release(got_wheel, got_sdist)["deep_gemm"]["commit"] == "c0ffee12" * 5
    listing["urls"] = listing["urls"][:2]
    with pytest.raises(ScanError, match="vllm 9.2.0: the index has no sdist"):
        _scan._download("9.2.0", into)
