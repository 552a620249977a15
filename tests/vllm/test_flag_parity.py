"""Flag parity: the plugin reads every flag `explain` reads, alike (the test the mocked agreement
test could not be).

For each vLLM release of tests/vllm/releases.txt and each flag of vLLM's one flag table that maps
to a config field (generated from the table: a new entry is tested without a line here), a serve
line with that flag goes two ways:

- into the release itself: vLLM's own argument parser, ``EngineArgs`` and the ``VllmConfig`` it
  creates, then the plugin's fact gathering and the one fact pipeline, on a simulated GPU;
- into ``kernelpolicy explain --json --no-env -- vllm serve ...`` here, with the facts the plugin
  read from the machine rather than the config (the venv's packages and DeepGEMM build, the host)
  given as ``--fact``.

Equal facts and an equal fingerprint are required. A flag the CLI reads and the plugin cannot is a
failing test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelpolicy.cli import main
from kernelpolicy.engines.vllm.testing import plugin_facts
from kernelpolicy.releases.vllm.flags import FLAGS

pytestmark = pytest.mark.vllm

MODEL = "Qwen/Qwen3-30B-A3B-FP8"  # an FP8 block-quantized MoE: every flag bears on some path
GPU, CC, GPU_NAME = "H100", (9, 0), "NVIDIA H100"
#: vLLM's default batch budget depends on the GPU's memory and the entry point, which `explain`
#: cannot know: every line names it (its own line tests another value)
BASE_TOKENS = ("--max-num-batched-tokens", "8192")

#: every flag that maps to a config field, with the line that sets it (from the table)
MAPPED = [f for f in FLAGS if f.config is not None]


def _flags_of(flag: Any) -> list[str]:
    line = [flag.names[0]] if flag.store_true else [flag.names[0], str(flag.sample)]
    if flag.dest != "max_num_batched_tokens":
        line += list(BASE_TOKENS)
    if flag.dest == "data_parallel_size":
        line += ["--enable-expert-parallel"]  # data parallel bears on a decision through EP only
    return line


LINES: dict[str, list[str]] = {"(none)": list(BASE_TOKENS), **{f.dest: _flags_of(f) for f in MAPPED}}


def test_every_mapped_flag_has_a_line() -> None:
    """A config-mapped flag without a sample value would go untested: the table must give one."""
    assert [f.dest for f in MAPPED if not f.store_true and f.sample is None] == []
    assert {"max_num_batched_tokens", "enable_lora", "enforce_eager", "dtype"} <= {f.dest for f in MAPPED}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, catalog: Any) -> Path:
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_text(json.dumps(catalog(MODEL)), encoding="utf-8")
    return folder


_PLUGIN: dict[str, list[dict[str, Any]]] = {}


def _plugin_side(python: Path, release: str, model_dir: Path) -> dict[str, dict[str, Any]]:
    if release not in _PLUGIN:
        lines = [["--model", str(model_dir), "--skip-tokenizer-init", *line] for line in LINES.values()]
        _PLUGIN[release] = plugin_facts(python, CC, lines, gpu_name=GPU_NAME)
    return dict(zip(LINES, _PLUGIN[release], strict=True))


def _explain_side(machine: dict[str, Any], model_dir: Path, line: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    """``explain`` of the line, given what the plugin read from the machine (not from the config)."""
    given = [a for k, v in sorted(machine.items()) for a in ("--fact", f"{k}={_text(v)}")]
    argv = ["explain", "--gpu", GPU, "--json", "--no-env", *given, "--", "vllm", "serve", str(model_dir), *line]
    code = main(argv)
    out = capsys.readouterr()
    assert code in (0, 3, 5), out.err  # 5: an explicit backend the rules refuse (the facts are what is compared)
    return json.loads(out.out)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@pytest.mark.parametrize("dest", list(LINES))
def test_the_plugin_reads_the_flag_as_explain_does(
    release: str, dest: str, model_dir: Path, venv: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    python = venv(release)
    plugin = _plugin_side(python, release, model_dir)[dest]
    assert not plugin["errors"], f"vLLM {release} `{' '.join(plugin['argv'])}`: {plugin['errors']}\n" + "\n".join(
        plugin.get("log_lines") or ()
    )
    cli = _explain_side(plugin["machine"], model_dir, LINES[dest], capsys)
    theirs, ours = plugin["facts"], cli["facts"]
    differ = {k: (theirs.get(k), ours.get(k)) for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k)}
    assert differ == {}, f"vLLM {release}, `{' '.join(LINES[dest])}`: (plugin, explain) differ"
    assert plugin["fingerprint"] == cli["fingerprint"]


#: values of `--max-num-batched-tokens` as operators write them (vLLM's human integers)
HUMAN_INTS = ("16K", "16k", "25.6k", "2M", "1g", "8192", " 512 ", "1.5K", "lots", "0x10", "-3")


def test_human_integers_parse_as_the_release_parses_them(release: str, venv: Any) -> None:
    """`--max-num-batched-tokens 16K` is read as the release's own `human_readable_int` reads it
    (a value, or a refusal), not refused as `int` would refuse it."""
    import argparse
    import subprocess

    from kernelpolicy.releases.vllm.flags import human_readable_int

    query = (
        "import json, sys; from vllm.utils.argparse_utils import human_readable_int as h\n"
        "out = []\n"
        "for v in json.loads(sys.argv[1]):\n"
        "    try: out.append(h(v))\n"
        "    except Exception as exc: out.append(None)\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run(
        [str(venv(release)), "-c", query, json.dumps(HUMAN_INTS)], capture_output=True, text=True, check=True
    )
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours: list[int | None] = []
    for value in HUMAN_INTS:
        try:
            ours.append(human_readable_int(value))
        except argparse.ArgumentTypeError:
            ours.append(None)
    assert ours == theirs
