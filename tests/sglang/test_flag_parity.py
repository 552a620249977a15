"""Flag parity on SGLang: the plugin reads every flag of SGLang's one flag table from
``ServerArgs`` as ``explain`` reads it from a launch line (generated from the table).

For each SGLang release of tests/sglang/releases.txt and each flag that maps to a ``ServerArgs``
field, a launch line with that flag goes into SGLang itself (its own argument parser and
``ServerArgs``, then the plugin's fact gathering and the one pipeline, on a simulated GPU) and into
``kernelpolicy explain --json --no-env -- python3 -m sglang.launch_server ...`` here, with what the
plugin read from the machine given as ``--fact``. Equal facts and fingerprint are required.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelpolicy.cli import main
from kernelpolicy.engines.sglang.flags import FLAGS
from kernelpolicy.engines.sglang.testing import plugin_facts

from .conftest import RELEASES, ROOT, venv_python

pytestmark = pytest.mark.sglang

MODEL = "Qwen/Qwen3-30B-A3B-FP8"
GPU, CC, GPU_NAME = "H100", (9, 0), "NVIDIA H100"
MAPPED = [f for f in FLAGS if f.config is not None and f.dest != "model_path"]


def _flags_of(flag: Any) -> list[str]:
    return [flag.names[0]] if flag.store_true else [flag.names[0], str(flag.sample)]


LINES: dict[str, list[str]] = {"(none)": [], **{f.dest: _flags_of(f) for f in MAPPED if f.sample is not None}}


def test_every_mapped_flag_has_a_line() -> None:
    untested = [f.dest for f in MAPPED if not f.store_true and f.sample is None]
    assert untested in ([], ["fp4_gemm_runner_backend"])  # FP4: no FP4 checkpoint in this line's model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = yaml.safe_load((ROOT / "rules" / "models.yaml").read_text(encoding="utf-8"))
    config = next(dict(m["config"]) for m in data["models"] if m["id"] == MODEL)
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


_PLUGIN: dict[str, dict[str, dict[str, Any]]] = {}


def _plugin_side(release: str, model_dir: Path) -> dict[str, dict[str, Any]]:
    if release not in _PLUGIN:
        lines = [["--model-path", str(model_dir), "--skip-tokenizer-init", *line] for line in LINES.values()]
        cells = plugin_facts(venv_python(release), CC, GPU_NAME, lines)
        _PLUGIN[release] = dict(zip(LINES, cells, strict=True))
    return _PLUGIN[release]


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("dest", list(LINES))
def test_the_plugin_reads_the_flag_as_explain_does(
    release: str, dest: str, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = _plugin_side(release, model_dir)[dest]
    assert not plugin["errors"], f"SGLang {release} `{' '.join(plugin['argv'])}`: {plugin['errors']}"
    given = [a for k, v in sorted(plugin["machine"].items()) for a in ("--fact", f"{k}={_text(v)}")]
    line = ["python3", "-m", "sglang.launch_server", "--model-path", str(model_dir), *LINES[dest]]
    code = main(["explain", "--gpu", GPU, "--json", "--no-env", *given, "--", *line])
    out = capsys.readouterr()
    assert code in (0, 3, 5), out.err  # 5: an explicit backend the rules refuse (the facts are what is compared)
    cli = json.loads(out.out)
    theirs, ours = plugin["facts"], cli["facts"]
    differ = {k: (theirs.get(k), ours.get(k)) for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k)}
    assert differ == {}, f"SGLang {release}, `{' '.join(LINES[dest])}`: (plugin, explain) differ"
    assert plugin["fingerprint"] == cli["fingerprint"]
