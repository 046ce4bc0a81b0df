"""dynajit's default backend: lowering, fusion, and C++/OpenMP and Triton code generation.

``compile_fx(gm, example_inputs, *, mode=None, options=None)`` is the backend callable (declared
as the ``inductor`` entry point of ``dynajit.backends``); ``config`` holds its settings.
"""

from dynajit.inductor_lite._build import BuildError, cache_stats, forget_loaded_libraries
from dynajit.inductor_lite._compile import CompiledGraph, compile_fx, compiled_graphs
from dynajit.inductor_lite._config import (
    InductorConfig,
    config,
    cudagraph_mark_step_begin,
    describe_modes,
    list_mode_options,
    list_options,
)
from dynajit.inductor_lite._decompositions import decomposition_table

__all__ = [
    "BuildError",
    "cache_stats",
    "forget_loaded_libraries",
    "CompiledGraph",
    "InductorConfig",
    "compile_fx",
    "compiled_graphs",
    "config",
    "cudagraph_mark_step_begin",
    "describe_modes",
    "decomposition_table",
    "list_mode_options",
    "list_options",
]
