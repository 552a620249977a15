"""Print the scale figures of hostile input (issue 26, N16); no assertions: figures, not tests.

    python benchmarks/bench_hostile.py

- a serve line of N ignored ``--foo 1`` pairs, parsed (``_parse_serve``) and its warning's length;
- ``kernelpolicy fmt`` and ``fmt --check`` of a 3,000-rule file;
- ``kernelpolicy explain`` with a 7,000-rule operator policy, the rule cache off.

tests/hostile/test_scale.py bounds the work (flags per argparse call, finding comparisons, layout
passes); this prints the time it takes on this machine.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from kernelpolicy.deployment.serve import _parse_serve, ignored_note


def _cli(*argv: str) -> float:
    env = {**os.environ, "KERNELPOLICY_NO_CACHE": "1", "HF_HUB_OFFLINE": "1"}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kernelpolicy", *argv], check=False, capture_output=True, env=env)
    return time.perf_counter() - t


def main() -> None:
    print(f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    for pairs in (4_000, 16_000, 50_000):
        tokens = ["vllm", "serve", "m", *["--foo", "1"] * pairs]
        t = time.perf_counter()
        serve = _parse_serve(tokens)
        took = time.perf_counter() - t
        print(f"serve line, {pairs:>6} ignored pairs: {took:6.2f} s, warning {len(ignored_note(serve.ignored))} chars")
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "r3000.yaml"
        rules.write_text(
            "rules:\n"
            + "".join(
                f"  - id: op-r{i}\n    when: {{gpu.sm: sm90, model.type: m{i}}}\n    deny: marlin\n"
                f"    severity: perf\n    because: reason {i}\n    refs: [vllm#{i}]\n"
                for i in range(3_000)
            ),
            encoding="utf-8",
        )
        print(f"fmt, 3,000 rules: {_cli('fmt', str(rules)):6.2f} s")
        print(f"fmt --check, 3,000 rules (laid out): {_cli('fmt', '--check', str(rules)):6.2f} s")
        policy = Path(tmp) / "r7000.yaml"
        policy.write_text(
            "rules:\n"
            + "".join(
                f"  - {{id: r{i}, when: {{model.type: m{i}}}, deny: marlin, severity: perf, because: b, refs: [x]}}\n"
                for i in range(7_000)
            ),
            encoding="utf-8",
        )
        seed = ("explain", "--gpu", "H100", "--model", "deepseek-ai/DeepSeek-V3", "--no-env")
        print(f"explain, 7,000-rule policy, uncached: {_cli(*seed, '--policy', str(policy)):6.2f} s")


if __name__ == "__main__":
    main()
