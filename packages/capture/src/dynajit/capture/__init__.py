"""dynajit's capture: call interception, the symbolic bytecode interpreter, graph breaks and the code cache.

``optimize(backend)(fn)`` compiles ``fn``: each call runs a generated
dispatcher that tries the cached entries' guards and runs the hit, or
converts the frame into FX graphs (compiled by ``backend``) plus rewritten
bytecode. ``export(fn)(*args)`` captures one whole graph. The marks
(``disable``, ``allow_in_graph``, ``mark_dynamic``, ...) steer what gets traced.
``observe()`` reports every converted frame: graphs, graph breaks, guards, recompile reasons.
"""

from dynajit.capture import testing
from dynajit.capture._export import ExportError, ExportInputError, ExportResult, export
from dynajit.capture._frame import CompiledGraph, GraphBreak
from dynajit.capture._marks import (
    allow_in_graph,
    assume_constant_result,
    disable,
    disallow_in_graph,
    graph_break,
    is_allowed_in_graph,
    is_compiling,
    is_disabled,
    is_dynamo_compiling,
    is_exporting,
    mark_dynamic,
    mark_static,
    mark_static_address,
    maybe_mark_dynamic,
    nonstrict_trace,
    substitute_in_graph,
)
from dynajit.capture._observe import FRAME_KINDS, FrameRecord, Observation, observe
from dynajit.capture._runtime import (
    InternalCompilerError,
    RecompileError,
    RecompileLimitWarning,
    StrictModeError,
    current_backend,
    intercept,
    optimize,
    optimize_assert,
    reset,
)
from dynajit.capture._stance import set_stance
from dynajit.capture._symbolic.shapes import DynamicShapeError
from dynajit.capture.config import CaptureConfig, config

__all__ = [
    "FRAME_KINDS",
    "CaptureConfig",
    "CompiledGraph",
    "DynamicShapeError",
    "ExportError",
    "ExportInputError",
    "ExportResult",
    "FrameRecord",
    "GraphBreak",
    "InternalCompilerError",
    "RecompileError",
    "RecompileLimitWarning",
    "StrictModeError",
    "allow_in_graph",
    "assume_constant_result",
    "config",
    "current_backend",
    "disable",
    "disallow_in_graph",
    "export",
    "graph_break",
    "intercept",
    "is_allowed_in_graph",
    "is_compiling",
    "is_disabled",
    "is_dynamo_compiling",
    "is_exporting",
    "mark_dynamic",
    "mark_static",
    "mark_static_address",
    "maybe_mark_dynamic",
    "nonstrict_trace",
    "Observation",
    "observe",
    "optimize",
    "optimize_assert",
    "reset",
    "set_stance",
    "substitute_in_graph",
    "testing",
]
