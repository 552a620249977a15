"""The device side of bench on PyTorch: the clock (CUDA events, graph replay or eager) and the cells' data
(random activations and block-quantised weights, the float references, poisoned outputs).

Imported only when bench runs on a GPU; torch is imported lazily through :func:`load_torch`.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import UsageError
from .protocol import Cell

__all__ = ["CudaClock", "DenseData", "Lab", "RouterData", "load_torch", "rel_error", "replicas_for", "unit_calls"]

#: The rotation's copies of a call's data together are this many times the L2, so each call reads
#: its weights from HBM, as when the other layers' weights have passed through the cache.
L2_MULTIPLE: Final = 3
#: At most this many copies (a router's 3.7 MB of weights would otherwise need 49).
MAX_REPLICAS: Final = 32
#: A graph replay holds at least this many calls (its launch latency is shared by them).
MIN_UNIT_CALLS: Final = 8
#: The host time the device is kept busy for before each timed unit, per eager call (the largest
#: host cost of one call seen: DeepGEMM's path, 30-55 us) and per graph replay.
HOST_SECONDS_PER_CALL: Final = 100e-6
HOST_SECONDS_PER_REPLAY: Final = 100e-6
#: Cycles of ``torch.cuda._sleep`` per second (an sm90 part clocks up to 1.98 GHz: never shorter).
SPIN_CYCLES_PER_SECOND: Final = 2.0e9
FP8_MAX: Final = 448.0
GROUP: Final = 128


def load_torch() -> Any:
    """torch with a CUDA device, or one clear error."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        raise UsageError(
            "bench needs PyTorch with CUDA (run it inside the engine's environment)",
            help="e.g. `~/.venvs/vllm/bin/python -m kernelpolicy bench ...`",
        ) from None
    if not torch.cuda.is_available():
        raise UsageError("bench needs a CUDA GPU and none is visible to PyTorch (CUDA_VISIBLE_DEVICES, driver)")
    return torch


class CudaClock:
    """Times calls with CUDA events, as CUDA-graph replays or eager back-to-back calls.

    The host runs ahead: before each timed unit the device spins (``torch.cuda._sleep``) for
    longer than the host takes to enqueue the unit, so the events time the device's work back to
    back, not the host's launch cost, as in a whole forward pass where the host runs ahead.
    No cache flush: the protocol's rotation over copies of the call's data (at least
    :data:`L2_MULTIPLE` times the L2 together, at most :data:`MAX_REPLICAS` copies) keeps the L2
    from serving the weights. An eager timed unit runs the rotation once; a graph replay runs it
    :func:`unit_calls` times over, at least :data:`MIN_UNIT_CALLS` calls, so the replay's launch
    latency is shared by them.
    """

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 1024 * 1024)

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def replicas(self, footprint: int) -> int:
        return replicas_for(footprint, self.l2_bytes)

    def samples(self, calls: Sequence[Callable[[], object]], *, warmup: int, reps: int, mode: str) -> list[float]:
        torch = self.torch
        cuda = torch.cuda
        unit = list(calls) * (unit_calls(len(calls)) if mode == "graph" else 1)
        starts = [cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [cuda.Event(enable_timing=True) for _ in range(reps)]
        if mode == "graph":
            side = cuda.Stream()
            side.wait_stream(cuda.current_stream())
            with cuda.stream(side):  # warm up off the capture: lazy init, workspace allocation
                for fn in calls:
                    fn()
            cuda.current_stream().wait_stream(side)
            cuda.synchronize()
            graph = cuda.CUDAGraph()
            with cuda.graph(graph):
                for fn in unit:
                    fn()
            for _ in range(max(1, warmup)):
                graph.replay()
            cuda.synchronize()
            for i in range(reps):
                self._host_ahead(HOST_SECONDS_PER_REPLAY)
                starts[i].record()
                graph.replay()
                ends[i].record()
            cuda.synchronize()
            del graph
        else:
            for _ in range(warmup):
                for fn in unit:
                    fn()
            cuda.synchronize()
            for i in range(reps):
                self._host_ahead(HOST_SECONDS_PER_CALL * len(unit))
                starts[i].record()
                for fn in unit:
                    fn()
                ends[i].record()
            cuda.synchronize()
        return [s.elapsed_time(e) * 1e-3 / len(unit) for s, e in zip(starts, ends, strict=False)]

    def _host_ahead(self, seconds: float) -> None:
        """Keep the device busy (a spin kernel) while the host enqueues the timed unit, so the unit
        runs back to back on the device: in a whole forward pass the host runs ahead of the device
        and a kernel's launch cost is hidden behind the ops before it."""
        self.torch.cuda._sleep(int(seconds * SPIN_CYCLES_PER_SECOND))


def replicas_for(footprint: int, l2_bytes: int) -> int:
    """Copies of a call's data that together are :data:`L2_MULTIPLE` times the L2 (at most
    :data:`MAX_REPLICAS`; 1 when the footprint is unknown or already that large)."""
    if footprint <= 0:
        return 1
    return max(1, min(MAX_REPLICAS, -(-L2_MULTIPLE * l2_bytes // footprint)))


def unit_calls(replicas: int) -> int:
    """How many times a timed unit runs the rotation: at least :data:`MIN_UNIT_CALLS` calls."""
    return max(1, -(-MIN_UNIT_CALLS // max(1, replicas)))


def rel_error(torch: Any, out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| in float64; nan when *out* holds a non-finite value."""
    o = out.double()
    if not bool(torch.isfinite(o).all()):
        return math.nan
    return float(torch.linalg.vector_norm(o - ref) / torch.linalg.vector_norm(ref))


@dataclass
class DenseData:
    """One dense cell: BF16 activations, block-FP8 weights (1x128 / 128x128, FP32 scales)."""

    a: Any  #: (M, K) bf16
    w: Any  #: (N, K) bf16, the weight before quantisation
    wq: Any  #: (N, K) float8_e4m3fn
    ws: Any  #: (ceil(N/128), K/128) float32
    ref: Any  #: (M, N) float64: dequant(quant(A)) @ dequant(Wq).T


@dataclass
class RouterData:
    """One router cell: BF16 activations and gate weights, the float64 reference."""

    a: Any
    w: Any
    ref: Any


@dataclass
class Lab:
    """The cells' data, made once per layer (weights) and per M (activations), on the GPU."""

    torch: Any
    seed: int = 1234
    _weights: dict[tuple[str, int, int], tuple[Any, ...]] = field(default_factory=dict)
    _cells: dict[tuple[object, ...], Any] = field(default_factory=dict)

    def _gen(self, salt: int) -> Any:
        g = self.torch.Generator(device="cuda")
        g.manual_seed(self.seed + salt)
        return g

    def block_weights(self, n: int, k: int) -> tuple[Any, Any, Any, Any]:
        """(W bf16, Wq fp8, scales fp32 (ceil(N/128), K/128), dequantised W float64)."""
        key = ("block", n, k)
        if key not in self._weights:
            torch = self.torch
            self._weights.clear()  # one layer's weights at a time: the big ones are GBs
            w = (torch.randn((n, k), device="cuda", generator=self._gen(n * 7 + k)) / math.sqrt(k)).to(torch.bfloat16)
            np_ = (n + GROUP - 1) // GROUP * GROUP
            wp = torch.zeros((np_, k), dtype=torch.float32, device="cuda")
            wp[:n] = w.float()
            v = wp.view(np_ // GROUP, GROUP, k // GROUP, GROUP)
            s = v.abs().amax(dim=(1, 3)).clamp(min=1e-10) / FP8_MAX
            q = (v / s[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(np_, k)[:n].contiguous()
            deq = q.double().view(-1, k) * s.double().repeat_interleave(GROUP, 0)[:n].repeat_interleave(GROUP, 1)
            self._weights[key] = (w, q, s.contiguous(), deq)
        w, q, s, deq = self._weights[key]
        return w, q, s, deq

    def _group_dequant(self, a: Any) -> Any:
        """*a* as the FP8 kernels see it: 1x128 groups quantised to e4m3 with FP32 scales
        amax/448 (vLLM's per-token group quantisation), dequantised in float64. Against the
        BF16 activations themselves every correct kernel is off by the FP8 rounding (~2.6e-2)."""
        torch = self.torch
        m, k = a.shape
        v = a.float().view(m, k // GROUP, GROUP)
        sc = v.abs().amax(dim=2).clamp(min=1e-10) / FP8_MAX
        q = (v / sc[:, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return (q.double() * sc.double()[:, :, None]).view(m, k)

    def dense(self, cell: Cell) -> DenseData:
        key = ("dense", cell.layer.n, cell.layer.k, cell.m)
        if key not in self._cells:
            self._cells.clear()
            torch = self.torch
            w, q, s, deq = self.block_weights(cell.layer.n, cell.layer.k)
            a = torch.randn((cell.m, cell.layer.k), device="cuda", generator=self._gen(cell.m)).to(torch.bfloat16)
            self._cells[key] = DenseData(a=a, w=w, wq=q, ws=s, ref=self._group_dequant(a) @ deq.t())
        data: DenseData = self._cells[key]
        return data

    def router(self, cell: Cell) -> RouterData:
        key = ("router", cell.layer.n, cell.layer.k, cell.m)
        if key not in self._cells:
            self._cells.clear()
            torch = self.torch
            w = (torch.randn((cell.layer.n, cell.layer.k), device="cuda", generator=self._gen(3)) * 0.02).to(
                torch.bfloat16
            )
            a = torch.randn((cell.m, cell.layer.k), device="cuda", generator=self._gen(cell.m + 11)).to(torch.bfloat16)
            self._cells[key] = RouterData(a=a, w=w, ref=a.double() @ w.double().t())
        data: RouterData = self._cells[key]
        return data

    def out(self, m: int, n: int, dtype: Any = None) -> Any:
        torch = self.torch
        return torch.full((m, n), float("nan"), dtype=dtype or torch.bfloat16, device="cuda")
