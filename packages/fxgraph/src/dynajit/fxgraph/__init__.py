"""dynajit's graph IR: torch.fx graphs plus node metadata, builders, printers and passes.

It also hosts the two small utilities every layer shares: typed configuration
objects (:class:`Config`) and log artifacts (:func:`artifact_logger`).
"""

from dynajit.fxgraph._below_autograd import running_below_autograd
from dynajit.fxgraph._builder import GraphBuilder, batch_norms_in_eager_layout, in_canonical_layout, in_suggested_layout
from dynajit.fxgraph._config import Config, ConfigError, option
from dynajit.fxgraph._cpu_formulas import (
    EAGER_BRANCH_KERNELS,
    matching_eager_backward_formulas,
    rewrite_spread_gradients,
)
from dynajit.fxgraph._dtype_views import dtype_views_from_sources
from dynajit.fxgraph._forward_views import returning_no_views
from dynajit.fxgraph._gc_deferral import full_collections_deferred
from dynajit.fxgraph._inference import compiling_outside_inference_mode
from dynajit.fxgraph._inplace import (
    AUGMENTED_OPERATORS,
    keep_written_strides,
    passes_inplace,
    writes_elements,
    writes_in_place,
)
from dynajit.fxgraph._logs import ARTIFACTS, artifact_enabled, artifact_logger, set_logs
from dynajit.fxgraph._meta import (
    EXAMPLE_VALUE,
    NN_MODULE_STACK,
    SOURCE_FN_STACK,
    SOURCE_META_KEYS,
    STACK_TRACE,
    format_stack_trace,
    source_meta,
)
from dynajit.fxgraph._passes import (
    GraphStats,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    graph_stats,
)
from dynajit.fxgraph._powers import spelled_as_calls, written_as_call
from dynajit.fxgraph._printers import format_readable, format_tabular, user_source_line
from dynajit.fxgraph._python_kernels import (
    DECOMPOSED_UNLIKE_EAGER,
    EAGER_MESSAGE_KERNELS,
    VIEWED_UNLIKE_EAGER,
    python_kernels_replaced,
    with_eager_views,
)
from dynajit.fxgraph._reached_saves import (
    checking_saved_versions,
    conditionally_saved,
    recording_saved_versions,
    stashing_conditional_saves,
)
from dynajit.fxgraph._real_layouts import input_view_chain, view_or_copy, viewing_real_layouts
from dynajit.fxgraph._recapture import is_generated_forward, line_node_map, recapture_meta
from dynajit.fxgraph._symbolic import SizeName, is_symbolic, reads_data, symbolic_fake, symbolic_int, symbols_of
from dynajit.fxgraph._targets import has_side_effects, is_random, mutates, target_name
from dynajit.fxgraph._view_bits import detaching_outputs, owning_eager_products, restoring_view_bits
from dynajit.fxgraph._zero_tangents import prune_zero_tangents, reporting_reached_outputs, skipping_zero_tangents

__all__ = [
    "ARTIFACTS",
    "AUGMENTED_OPERATORS",
    "DECOMPOSED_UNLIKE_EAGER",
    "VIEWED_UNLIKE_EAGER",
    "EAGER_BRANCH_KERNELS",
    "EAGER_MESSAGE_KERNELS",
    "EXAMPLE_VALUE",
    "NN_MODULE_STACK",
    "SOURCE_FN_STACK",
    "SOURCE_META_KEYS",
    "STACK_TRACE",
    "SizeName",
    "Config",
    "ConfigError",
    "GraphBuilder",
    "GraphStats",
    "artifact_enabled",
    "artifact_logger",
    "checking_saved_versions",
    "compiling_outside_inference_mode",
    "batch_norms_in_eager_layout",
    "conditionally_saved",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_constants",
    "format_readable",
    "format_stack_trace",
    "format_tabular",
    "full_collections_deferred",
    "graph_stats",
    "has_side_effects",
    "is_generated_forward",
    "is_random",
    "detaching_outputs",
    "dtype_views_from_sources",
    "is_symbolic",
    "in_canonical_layout",
    "in_suggested_layout",
    "input_view_chain",
    "keep_written_strides",
    "python_kernels_replaced",
    "with_eager_views",
    "reads_data",
    "line_node_map",
    "matching_eager_backward_formulas",
    "mutates",
    "rewrite_spread_gradients",
    "option",
    "owning_eager_products",
    "passes_inplace",
    "prune_zero_tangents",
    "reporting_reached_outputs",
    "recapture_meta",
    "recording_saved_versions",
    "restoring_view_bits",
    "returning_no_views",
    "running_below_autograd",
    "set_logs",
    "skipping_zero_tangents",
    "source_meta",
    "spelled_as_calls",
    "stashing_conditional_saves",
    "view_or_copy",
    "viewing_real_layouts",
    "symbolic_fake",
    "symbolic_int",
    "symbols_of",
    "writes_elements",
    "writes_in_place",
    "written_as_call",
    "target_name",
    "user_source_line",
]
