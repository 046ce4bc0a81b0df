"""dynajit's graph IR: torch.fx graphs plus node metadata, builders, printers and passes.

It also hosts the two small utilities every layer shares: typed configuration
objects (:class:`Config`) and log artifacts (:func:`artifact_logger`).
"""

from dynajit.fxgraph._builder import GraphBuilder
from dynajit.fxgraph._config import Config, ConfigError, option
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

__all__ = [
    "ARTIFACTS",
    "EXAMPLE_VALUE",
    "NN_MODULE_STACK",
    "SOURCE_FN_STACK",
    "SOURCE_META_KEYS",
    "STACK_TRACE",
    "Config",
    "ConfigError",
    "GraphBuilder",
    "artifact_enabled",
    "artifact_logger",
    "format_stack_trace",
    "option",
    "set_logs",
    "source_meta",
]
