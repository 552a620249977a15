"""``kernelpolicy lsp``: how long after a change its diagnostics arrive, as an editor sees them.

    python benchmarks/bench_lsp.py [--repeat R] [--soak N]

Starts the server as an editor does (``python -m kernelpolicy lsp``, stdio), opens the example
operator policy's first rule, and prints (figures, not assertions; the median of R edits,
default 5) the time from sending ``didChange`` to receiving ``publishDiagnostics`` for:

- a one-rule edit of an operator file on the shipped tables (a new ``when`` each time): the
  whole check with the proof, 300 ms debounce included (issue #37's target: <= 1.5 s);
- a schema error (a rule without ``because``): 50 ms debounce included (target: <= 100 ms);
- a YAML syntax error (a half-typed ``{...}``);

the first hover on a shipped rule id (where it fires, from the compiled diagrams: the index's
diagrams are built then) and a later one; and the server's resident memory after the edits. With
``--soak N`` (an hour-like edit loop: the issue's "server left open on the project's own
``rules/``"), N more rounds, each a one-rule edit of the operator file (proven), an edit of the
shipped ``rules/known/marlin.yaml`` as a buffer (a new comment: proven too), a hover and a
completion; the memory after them, and how many megabytes it grew by per 100 rounds.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _figures import Recorder, add_record_option  # noqa: E402
from tests.lsp._client import Client  # noqa: E402  (the tests' client: JSON-RPC over stdio)

RULE = """\
rules:
  - id: fleet-no-marlin-moe-on-gb10
    when: {{gpu.sm: sm121, triton.version: ">=3.6", triton.sm121a_ok: true, deploy.lora: false{extra}}}
    paths: [moe]
    deny: marlin
    severity: accuracy
    because: not yet validated on our GB10 fleet
    refs: [vllm#49546]
# see marlin-nvfp4-gpt_oss-topk-weights
"""
NO_BECAUSE = RULE.replace("    because: not yet validated on our GB10 fleet\n", "")
HALF_TYPED = RULE.split("deploy.lora", maxsplit=1)[0]


def _at(uri: str, line: int, character: int, *, hover: bool = False) -> dict[str, object]:
    """A position of the operator file (``hover``: its comment naming a shipped rule id)."""
    if hover:
        line, character = RULE.count("\n") - 1, 8
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--soak", type=int, default=0, metavar="N", help="N more one-rule edits, for memory")
    add_record_option(parser)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "KERNELPOLICY_POLICY"}
    client = Client(env)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.yaml"
        client.request("initialize", {"processId": os.getpid(), "rootUri": Path(tmp).as_uri(), "capabilities": {}})
        client.notify("initialized", {})
        t0 = time.perf_counter()
        uri = client.open(path, RULE.format(extra=""))
        client.diagnostics(uri, version=1, timeout=300)
        first = time.perf_counter() - t0
        version = 1
        figures: dict[str, list[float]] = {"rule": [], "schema": [], "yaml": []}
        for i in range(args.repeat):
            for kind, text in (
                ("rule", RULE.format(extra=f', model.intermediate_size: "<= {1024 + 64 * i}"')),
                ("schema", NO_BECAUSE),
                ("yaml", HALF_TYPED),
            ):
                version += 1
                t = time.perf_counter()
                client.change(uri, text, version)
                found = client.diagnostics(uri, version=version, timeout=300)
                figures[kind].append(time.perf_counter() - t)
                if kind != "rule":
                    assert found, kind
                    assert found[0]["severity"] == 1, found
        version += 1
        client.change(uri, RULE.format(extra=""), version)
        client.diagnostics(uri, version=version, timeout=300)
        hovers = []
        for _ in range(3):
            t = time.perf_counter()
            shown = client.request("textDocument/hover", _at(uri, 0, 0, hover=True), timeout=300)
            hovers.append(time.perf_counter() - t)
            assert shown is not None, "no hover"
            assert "fires in" in shown["contents"]["value"], shown
        rss = _rss_mb(client.proc.pid)
        shipped = ROOT / "rules" / "known" / "marlin.yaml"
        shipped_text = shipped.read_text()
        shipped_uri = client.open(shipped, shipped_text) if args.soak else ""
        if args.soak:
            client.diagnostics(shipped_uri, version=1, timeout=300)
        soak_t0 = time.perf_counter()
        trace: list[tuple[int, float]] = []  #: (rounds done, resident MB): the plateau, or not
        for i in range(args.soak):
            if i % max(args.soak // 8, 1) == 0:
                trace.append((i, _rss_mb(client.proc.pid)))
            version += 1
            client.change(uri, RULE.format(extra=f', model.intermediate_size: "<= {4096 + 64 * i}"'), version)
            client.diagnostics(uri, version=version, timeout=300)
            client.change(shipped_uri, shipped_text + f"# edit {i}\n", i + 2)
            client.diagnostics(shipped_uri, version=i + 2, timeout=300)
            client.request("textDocument/hover", _at(uri, 0, 0, hover=True), timeout=300)
            client.request("textDocument/completion", _at(uri, 2, 20), timeout=300)
        soak_s = time.perf_counter() - soak_t0
        soaked = _rss_mb(client.proc.pid)
        client.close()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"kernelpolicy lsp, {when}, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median of {args.repeat} edits"
    )
    fig = Recorder("benchmarks/bench_lsp.py", record=args.record)
    rows = [
        ("lsp.first", "first diagnostics after didOpen (cold server):", first * 1000, "ms", ""),
        (
            "lsp.one_rule_edit",
            "one-rule edit, whole check with the proof:",
            statistics.median(figures["rule"]) * 1000,
            "ms",
            "target <= 1500 ms (300 ms debounce included)",
        ),
        (
            "lsp.schema_error",
            "schema error (a rule without `because`):",
            statistics.median(figures["schema"]) * 1000,
            "ms",
            "target <= 100 ms (50 ms debounce included)",
        ),
        (
            "lsp.yaml_error",
            "YAML syntax error (a half-typed flow mapping):",
            statistics.median(figures["yaml"]) * 1000,
            "ms",
            "",
        ),
        ("lsp.hover_first", "hover on a shipped rule id, first (diagrams built):", hovers[0] * 1000, "ms", ""),
        ("lsp.hover_later", "hover on a shipped rule id, later:", statistics.median(hovers[1:]) * 1000, "ms", ""),
        ("lsp.memory", f"server resident memory after {3 * args.repeat + 1} versions:", rss, "MB", ""),
    ]
    if args.soak:
        growth = (soaked - rss) / args.soak * 100
        rows.append(
            (
                "lsp.memory_soak",
                f"after {args.soak} edit rounds ({2 * args.soak} proven edits):",
                soaked,
                "MB",
                f"({growth:+.1f} MB per 100 rounds, {soak_s:.0f} s)",
            )
        )
    for key, what, value, unit, note in rows:
        fig.add(key, value, unit, what)
        print(f"{what:<52} {value:8.0f} {unit}   {note}".rstrip())
    if args.soak:
        trace.append((args.soak, soaked))
        print("resident memory over the soak (rounds: MB):", ", ".join(f"{r}: {mb:.0f}" for r, mb in trace))
    fig.save()


if __name__ == "__main__":
    main()
