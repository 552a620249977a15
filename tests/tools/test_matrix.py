"""`kernelpolicy matrix`: cells agree with `resolve`, docs/matrix.md is in sync, and the HTML page
works in a real headless Chromium (cells, hover text, filters, a screenshot kept)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kernelpolicy as kp
from kernelpolicy.cli import main
from kernelpolicy.tools.matrix import PATHS, Cell, build, color, to_html, to_markdown

from ._webdriver import Browser, find_browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cells(policy: kp.Policy) -> list[Cell]:
    return build(policy)


def test_every_gpu_model_and_path_has_a_cell(policy: kp.Policy, cells: list[Cell]) -> None:
    assert len(cells) == len(policy.gpus) * len(policy.models) * len(PATHS)
    assert len({(c.gpu, c.model, c.path) for c in cells}) == len(cells)


def test_cells_are_what_resolve_decides(policy: kp.Policy, cells: list[Cell]) -> None:
    for c in cells[:: max(len(cells) // 60, 1)]:  # a spread sample
        d = kp.resolve(kp.facts_for(gpu=c.gpu, model=c.model, policy=policy), policy)
        p = d.paths[c.path]
        assert (c.present, c.backend, c.preferred_by) == (
            p.applicable,
            p.backend if p.applicable else None,
            p.preferred_by,
        )
        # the rule that decided, else the `prefer` rule that put the chosen backend first
        assert c.rule == p.rule or (p.rule is None and c.rule in p.preferred_by)
        if c.rule:
            file, _, line = c.origin.rpartition(":")
            assert c.rule in (ROOT / file).read_text(encoding="utf-8").splitlines()[int(line) - 1]
            assert c.reason


def test_docs_matrix_is_in_sync(cells: list[Cell]) -> None:
    current = (ROOT / "docs" / "matrix.md").read_text(encoding="utf-8")
    assert current == to_markdown(cells), (
        "docs/matrix.md is out of date: run `kernelpolicy matrix --out docs/matrix.md`"
    )


def test_markdown_names_the_deciding_rule(cells: list[Cell]) -> None:
    text = to_markdown(cells)
    decided = next(c for c in cells if c.rule and c.present)
    section = text.split(f"## {decided.model}\n", 1)[1].split("\n## ", 1)[0]
    row = next(ln for ln in section.splitlines() if ln.startswith(f"| {decided.gpu} |"))
    assert f"`{decided.backend}` ({decided.rule})" in row


def test_command_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--format", "json", "--out", str(tmp_path / "m.json")]) == 0
    data = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    assert data["schema"] == "kernelpolicy.matrix/1" and data["cells"]
    assert main(["matrix", "--out", str(tmp_path / "no" / "m.md")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_an_engine_release_is_an_axis_of_the_matrix(policy: kp.Policy, capsys: pytest.CaptureFixture[str]) -> None:
    # each cell is what explain decides with the release's facts (its pins and vendored DeepGEMM implied)
    cells = build(policy, "vllm==0.34.0")
    facts = {"deploy.engine": "vllm", "vllm.version": "0.34.0"}
    for c in cells[:: max(len(cells) // 40, 1)]:
        d = kp.resolve(kp.facts_for(gpu=c.gpu, model=c.model, facts=facts, policy=policy), policy)
        p = d.paths[c.path]
        assert (c.present, c.backend, c.preferred_by) == (
            p.applicable,
            p.backend if p.applicable else None,
            p.preferred_by,
        )
        # the rule that decided, else the `prefer` rule that put the chosen backend first
        assert c.rule == p.rule or (p.rule is None and c.rule in p.preferred_by)
    # vLLM 0.34.0 vendors a DeepGEMM with SM120 kernels: the no-layout rule no longer decides anything there
    assert any(c.rule == "deep_gemm-no-sm120-sf-layout" for c in build(policy))
    assert not any(c.rule == "deep_gemm-no-sm120-sf-layout" for c in cells)
    assert "on `vllm==0.34.0`" in to_markdown(cells, "vllm==0.34.0")
    assert main(["matrix", "--engine", "sglang==0.5.19", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "sglang==0.5.19"
    for bad, said in (
        ("vllm==0.21.1", "not a vLLM release"),
        ("sglang==0.5.24", "not an SGLang release"),
        ("x", "form"),
    ):
        assert main(["matrix", "--engine", bad]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1


def test_colours_are_stable_and_distinct(cells: list[Cell]) -> None:
    backends = sorted({c.backend for c in cells if c.backend})
    assert color("triton") == color("triton")
    assert len({color(b) for b in backends}) == len(backends)


# --------------------------------------------------------------------------- the page in Chromium


@pytest.fixture(scope="module")
def browser() -> Browser:
    found = find_browser()
    if found is None:
        pytest.skip("no chromium and chromedriver on PATH (Debian: apt-get install chromium chromium-driver)")
    b = Browser(*found)
    yield b
    b.close()


def _visible(b: Browser, css: str) -> int:
    return int(
        b.js(
            f"return Array.from(document.querySelectorAll({json.dumps(css)})).filter(e => e.offsetParent !== null).length;"
        )
    )


def test_html_page_in_headless_chromium(
    browser: Browser, cells: list[Cell], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    out = tmp_path_factory.mktemp("matrix")
    page = out / "matrix.html"
    page.write_text(to_html(cells), encoding="utf-8")
    browser.get(page.as_uri())
    gpus = list(dict.fromkeys(c.gpu for c in cells))
    rows = len({(c.model, c.path) for c in cells})
    assert browser.js("return document.title;") == "kernelpolicy support matrix"
    assert _visible(browser, "tbody tr") == rows
    assert _visible(browser, "td.cell") == len(cells)

    # a decided cell: its backend, its colour, and the rule, reason and refs on hover
    c = next(c for c in cells if c.rule and c.refs)
    info = browser.js(
        "var r = document.querySelector('tr[data-model=\"' + arguments[0] + '\"][data-path=\"' + arguments[1] + '\"]');"
        "var td = r.querySelector('td[data-gpu=\"' + arguments[2] + '\"]');"
        "return [td.textContent, td.title, getComputedStyle(td).backgroundColor];",
        c.model,
        c.path,
        c.gpu,
    )
    assert info[0] == c.backend
    assert c.rule in info[1] and c.refs[0] in info[1] and c.origin in info[1]
    hexcol = color(c.backend)
    assert info[2] == "rgb({}, {}, {})".format(*(int(hexcol[i : i + 2], 16) for i in (1, 3, 5)))

    # filter by path: only MoE rows stay
    browser.click(browser.find('#f-path option[value="moe"]'))
    assert _visible(browser, "tbody tr") == rows // len(PATHS)
    assert (
        browser.js(
            "return Array.from(document.querySelectorAll('tbody tr')).filter("
            "e => e.offsetParent !== null && e.dataset.path !== 'moe').length;"
        )
        == 0
    )
    # filter by GPU: one column stays
    browser.click(browser.find(f'#f-gpu option[value="{gpus[0]}"]'))
    assert _visible(browser, "thead th[data-gpu]") == 1
    assert _visible(browser, "td.cell") == rows // len(PATHS)
    # filter by quant: only rows of that scheme
    quant = next(c.quant for c in cells if c.path == "moe" and c.present)
    browser.click(browser.find(f'#f-quant option[value="{quant}"]'))
    expected = len({c.model for c in cells if c.path == "moe" and c.quant == quant})
    assert _visible(browser, "tbody tr") == expected
    assert browser.js("return document.getElementById('count').textContent;") == f"{expected} rows"

    shot = out / "matrix-filtered.png"
    browser.screenshot(shot)
    browser.click(browser.find("#f-reset"))
    assert _visible(browser, "tbody tr") == rows
    browser.screenshot(out / "matrix.png")
    assert (out / "matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshots: {out}")  # kept by pytest under its base temp folder (-s shows the path)


def _rgb(hex_colour: str) -> tuple[int, ...]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))


def _distance(a: str, b: str) -> float:
    return float(sum((x - y) ** 2 for x, y in zip(_rgb(a), _rgb(b), strict=True)) ** 0.5)


def test_no_backend_looks_like_no_backend() -> None:
    """Every backend's colour is far from the "no backend" cell's (Triton's pink was 17 RGB
    units from it) and from the white of an n/a cell."""
    from kernelpolicy.facts import BACKENDS
    from kernelpolicy.tools.matrix import NONE_COLOR

    for backend in sorted({b for per_path in BACKENDS.values() for b in per_path}):
        assert _distance(color(backend), NONE_COLOR) > 150, backend
        assert _distance(color(backend), "#ffffff") > 40, backend
    assert color(None) == NONE_COLOR
    page = to_html([Cell("G", "sm90", "m", "fp8_block", "dense", None)])
    assert "td.none{background:repeating-linear-gradient(45deg,#1f1f1f" in page


def test_decided_by_names_only_rules_that_decided(policy: kp.Policy, cells: list[Cell]) -> None:
    """A cell's rules each rejected a candidate ranked above the chosen one; a cell whose
    higher-ranked candidates only the catalog's requirements rule out names no rule and does not
    claim to be the path's first candidate; a cell without a backend names no deciding rule."""
    for c in cells:
        if not c.present:
            continue
        d = kp.resolve(kp.facts_for(gpu=c.gpu, model=c.model, policy=policy), policy)
        p = d.paths[c.path]
        names = [x.backend for x in p.candidates]
        above = p.candidates[: names.index(p.backend)] if p.backend in names else p.candidates
        if c.backend is None:
            assert c.rule is None and c.rules == (), c
            continue
        assert c.rule == (c.rules[0] if c.rules else None)
        for rule in c.rules:
            # a rejection of a higher-ranked candidate, or the `prefer` rule that put the chosen one first
            assert any(rule in x.rules for x in above) or (rule in p.preferred_by and not above), (c, rule)
        if above and not c.rules:
            assert "first candidate" not in c.reason, c
            assert "catalog's requirements" in c.reason


def test_a_path_without_backend_names_its_reason_not_a_rule() -> None:
    from kernelpolicy.decision import Candidate, PathDecision
    from kernelpolicy.tools.matrix import _attribution

    p = PathDecision(
        "moe",
        None,
        (Candidate("triton", "rejected", ("r1",), "r1 says no"), Candidate("marlin", "rejected", ("r2",), "r2 too")),
        rule="r1",
        rules=("r1", "r2"),
        reason="every backend is ruled out",
    )
    assert _attribution(p, kp.load_policy(environ=False)) == (None, "every backend is ruled out", (), ())


def test_matrix_of_a_model_outside_the_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`matrix --model` (issue 36): an operator's own checkpoint on every catalog GPU, with the
    deciding rules, as `explain --model` reads it; the catalog's models are left out."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "num_hidden_layers": 2,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"},
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert main(["matrix", "--format", "json", "--model", str(folder)]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert {c["model"] for c in cells} == {str(folder)}
    gb10 = {c["path"]: c for c in cells if c["sm"] == "sm121"}
    assert gb10["dense"]["backend"] == "cutlass" and gb10["dense"]["rule"] == "deep_gemm-no-sm120-sf-layout"
    assert main(["matrix", "--model", str(tmp_path / "missing")]) == 2
