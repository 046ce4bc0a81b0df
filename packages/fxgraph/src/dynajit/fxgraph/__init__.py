"""dynajit's graph IR: torch.fx graphs plus node metadata, builders, printers and passes.

It also hosts the two small utilities every layer shares: typed configuration
objects (:class:`Config`) and log artifacts (:func:`artifact_logger`).
"""

from dynajit.fxgraph._config import Config, ConfigError, option
from dynajit.fxgraph._logs import ARTIFACTS, artifact_enabled, artifact_logger, set_logs

__all__ = [
    "ARTIFACTS",
    "Config",
    "ConfigError",
    "artifact_enabled",
    "artifact_logger",
    "option",
    "set_logs",
]
