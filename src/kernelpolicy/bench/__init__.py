"""``kernelpolicy bench``: measure the decision on the GPU it runs on.

The core is engine-free and pure where it can be: the layer shapes of one rank
(:mod:`.shapes`), the measurement protocol (:mod:`.protocol`), the plan and its run over cells
(:mod:`.run`), the ranking and the report (:mod:`.report`) and the policy layer written from it
(:mod:`.emit`). The kernels are adapters at the edge (``_runners``: vLLM's ops, DeepGEMM,
FlashInfer, torch ``scaled_mm``, Triton), with torch and the engines imported only when a GPU
run starts (``_torch``).
"""

from __future__ import annotations

from .emit import policy_layer, render_policy
from .protocol import Cell, Clock, NotRunnable, Outcome, Prepared, Runner, Settings, fastest, measure_cell
from .report import SCHEMA_ID, Candidate, CellReport, Failure, Report, render_text
from .run import Registry, candidates_of, run_cells
from .shapes import BLOCK, Layer, layer_shapes

__all__ = [
    "BLOCK",
    "SCHEMA_ID",
    "Candidate",
    "Cell",
    "CellReport",
    "Clock",
    "Failure",
    "Layer",
    "NotRunnable",
    "Outcome",
    "Prepared",
    "Registry",
    "Report",
    "Runner",
    "Settings",
    "candidates_of",
    "fastest",
    "layer_shapes",
    "measure_cell",
    "policy_layer",
    "render_policy",
    "render_text",
    "run_cells",
]
