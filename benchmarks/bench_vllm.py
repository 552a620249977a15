"""What kernelpolicy's plugin adds to a model's start-up inside vLLM, and that it adds nothing
per forward pass (issue #11, target 5).

    python benchmarks/bench_vllm.py [--vllm VERSION] [--model ID] [--gpu SM] [--layers N] [--rounds R] [--record]

Runs in a vLLM venv of ``scripts/vllm-venv.sh VERSION`` (default: the newest release of
``tests/vllm/releases.txt`` whose venv exists) on a simulated GPU
(:func:`kernelpolicy.engines.vllm.testing.plugin_cost`): vLLM's ``VllmConfig`` for the model, then for
each of N decoder layers its four FP8 linear kernels, the MoE backend, the router gate and the
DeepGEMM warmup gates, as vLLM asks them while it builds a model. Rounds with and without the
plugin alternate in one process, every memoised answer cleared before each (so each plugin
round gathers the facts, loads the rules and decides afresh). Then, with the plugin, it counts
calls into kernelpolicy during one start-up and during a simulated decode step (every layer's
router forward on CPU), and lists what kernelpolicy code the objects the forward pass calls
could reach. Figures, not assertions (``tests/vllm/test_plugin_cost.py`` asserts the counts).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
from pathlib import Path

from _figures import Recorder, add_record_option

import kernelpolicy as kp
from kernelpolicy.engines.vllm.testing import default_venv_python, plugin_cost

ROOT = Path(__file__).resolve().parents[1]


def _releases() -> list[str]:
    lines = (ROOT / "tests" / "vllm" / "releases.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", help="vLLM release (its venv from scripts/vllm-venv.sh)")
    parser.add_argument("--model", default="deepseek-ai/DeepSeek-V3", help="a catalog model id")
    parser.add_argument("--gpu", default="sm90")
    parser.add_argument("--layers", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=7)
    add_record_option(parser)
    args = parser.parse_args()
    version = args.vllm or next((v for v in reversed(_releases()) if default_venv_python(v).exists()), None)
    if version is None or not default_venv_python(version).exists():
        sys.exit(f"bench_vllm: no vLLM venv; run `scripts/vllm-venv.sh {version or _releases()[-1]}` first")
    policy = kp.load_policy(environ=False)
    model = next((m for m in policy.models if m.id == args.model), None)
    if model is None:
        sys.exit(f"bench_vllm: `{args.model}` is not a catalog model")
    cost = plugin_cost(
        default_venv_python(version), args.gpu, model.config, layers=args.layers, rounds=args.rounds, model_id=model.id
    )
    off, on = statistics.median(cost.off_s), statistics.median(cost.on_s)
    ratios = [b / a for a, b in zip(cost.off_s, cost.on_s, strict=True)]
    per_round = on - off
    once = cost.import_s + per_round
    asks = cost.calls_to("kernelpolicy.engines.vllm.plugin.current_decision")
    print(f"vLLM {cost.vllm_version}, {args.model}, {args.gpu} (simulated), {args.layers} layers, {args.rounds} rounds")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(f"vLLM import with the simulated platform (once per process):  {cost.setup_s * 1e3:9.1f} ms")
    print(f"start-up without the plugin (config + every layer's kernels): {off * 1e3:9.1f} ms")
    print(f"start-up with the plugin (facts, rules, decision, wrappers):  {on * 1e3:9.1f} ms")
    print(f"  with/without, median of per-round ratios:                   {statistics.median(ratios):9.3f} x")
    print(f"importing the plugin and kernelpolicy (once per process):     {cost.import_s * 1e3:9.1f} ms")
    print(f"selection points asked per start-up:                          {asks:9d}")
    print(f"one selection point once decided:                             {cost.per_point_s * 1e6:9.2f} us")
    gathered = cost.calls_to("kernelpolicy.engines.vllm._facts.facts_from_vllm")
    resolved = cost.calls_to("kernelpolicy.resolver.resolve")
    print(f"facts gathered / decisions resolved per start-up:             {gathered:5d} / {resolved}")
    print(f"calls into kernelpolicy during one start-up:                  {sum(cost.startup_calls.values()):9d}")
    step = f"calls into kernelpolicy during a decode step ({cost.step['router_forwards']} router forwards):"
    print(f"{step:62s}{sum(cost.step_calls.values()):9d}")
    for name, reach in cost.reaches.items():
        print(f"  {name}: {', '.join(reach) if reach else 'no kernelpolicy code'}")
    print(f"plugin's added time per process: {once * 1e3:.1f} ms = {once / off:.1%} of the start-up without it")
    print(f"  of which per round (facts, rules, decision, wrappers): {per_round * 1e3:.1f} ms = {per_round / off:.1%}")
    print(f"plugin's added time against the vLLM import alone: {once / cost.setup_s:.1%}")
    fig = Recorder("benchmarks/bench_vllm.py", record=args.record)
    fig.add("vllm.added", once * 1e3, "ms", f"plugin's added time per process (vLLM {cost.vllm_version}, {args.model})")
    fig.add(
        "vllm.round_of_selection",
        100 * per_round / off,
        "%",
        "per start-up (facts, rules, decision, wrappers), of the selection calls without the plugin",
    )
    fig.add("vllm.added_of_import", 100 * once / cost.setup_s, "%", "plugin's added time, of the vLLM import alone")
    fig.add("vllm.per_point", cost.per_point_s * 1e6, "us", "one selection point once decided")
    fig.save()


if __name__ == "__main__":
    main()
