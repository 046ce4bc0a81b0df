"""Capture's configuration: the one source of truth for the code cache, tracing limits and error handling.

Set a field in code (``config.cache_size_limit = 16``), for a block
(``with config.patch(cache_size_limit=16): ...``) or from the environment
(``DYNAJIT_CACHE_SIZE_LIMIT=16``, ``DYNAJIT_STRICT=1``).
"""

from __future__ import annotations

from dynajit.fxgraph import Config, option

__all__ = ["CaptureConfig", "config"]


class CaptureConfig(Config):
    """Settings read by the capture runtime and the symbolic interpreter."""

    cache_size_limit: int = option(
        8,
        "Compiled entries kept per code object and per identity of the module arguments its entries are guarded "
        "on by identity (each instance of a repeated module has its own count: a graph break inside a transformer "
        "layer's forward compiles it once per layer). Past it, inputs that match no entry run eagerly and a "
        "one-time warning says so.",
    )
    accumulated_cache_size_limit: int = option(
        256, "Compiled entries kept per code object in all (all argument identities and backends together)."
    )
    inline_depth_limit: int = option(24, "How deep the interpreter inlines nested user function calls.")
    automatic_dynamic_shapes: bool = option(
        True, "When a tensor argument's size changes between compilations, recompile with that dimension dynamic."
    )
    assume_static_by_default: bool = option(
        True, "Compile every dimension static first; only sizes seen to change (or marked) become dynamic."
    )
    specialize_int: bool = option(
        False,
        "Always guard on the value of int arguments; when False an int argument seen to change (or any int under "
        "dynamic=True) becomes a symbolic graph input.",
    )
    suppress_errors: bool = option(
        False,
        "An internal error while converting a frame is always reported with a warning and the frame runs "
        "eagerly; when True, this also happens under fullgraph=True instead of raising. Strict mode wins: under "
        "strict=True the failure raises StrictModeError whatever this says.",
    )
    strict: bool = option(
        False,
        "Never fall back to eager silently: a frame whose conversion or backend compile fails, or that reaches "
        "cache_size_limit, raises StrictModeError (naming the frame, the cause chained) instead of running eagerly "
        "with a warning. Graph breaks are not fallbacks and still run in Python.",
    )
    capture_scalar_outputs: bool = option(
        False,
        "Trace Tensor.item() and tolist() into the graph: their values are unbacked symbols of the ShapeEnv, "
        "usable in tensor operations, arithmetic and torch._check; a Python decision on one (a branch, int(), "
        "range()) is still a graph break. When False, item() and tolist() are graph breaks.",
    )
    capture_dynamic_output_shape_ops: bool = option(
        False,
        "Trace operations whose result size depends on tensor data (nonzero, boolean-mask indexing, unique): "
        "their sizes are unbacked symbols. When False they are graph breaks, and backends only ever see sizes "
        "that come from the graph's inputs.",
    )
    verbose: bool = option(False, "Attach full tracebacks to internal-error warnings.")


config = CaptureConfig()
