"""dynajit.compiler: the documented user surface of dynajit.

``compile(model)`` makes an unmodified PyTorch function or ``nn.Module`` faster:
it captures the tensor operations into FX graphs, guards them, and runs them
through a backend compiler (``"inductor"`` by default). The other functions
control what is traced (``disable``, ``allow_in_graph``, ``substitute_in_graph``,
``assume_constant_result``), how compiled code behaves (``set_stance``,
``reset``, ``config``), and what it reports (``explain``, ``set_logs``).
"""

from dynajit.capture import StrictModeError
from dynajit.compiler._compile import compile
from dynajit.compiler._config import config
from dynajit.compiler._explain import explain
from dynajit.compiler._forward import (
    allow_in_graph,
    assume_constant_result,
    cudagraph_mark_step_begin,
    disable,
    inductor_list_mode_options,
    inductor_list_options,
    is_compiling,
    is_dynamo_compiling,
    is_exporting,
    reset,
    set_logs,
    set_stance,
    substitute_in_graph,
)
from dynajit.compiler._registry import list_backends

__all__ = [
    "StrictModeError",
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "config",
    "cudagraph_mark_step_begin",
    "disable",
    "explain",
    "inductor_list_mode_options",
    "inductor_list_options",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "list_backends",
    "reset",
    "set_logs",
    "set_stance",
    "substitute_in_graph",
]
