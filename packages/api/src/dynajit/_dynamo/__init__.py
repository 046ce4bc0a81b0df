"""dynajit._dynamo: the private names kept working.

Names with a public counterpart in :mod:`dynajit.compiler` (``explain``, ``reset``,
``disable``, ``allow_in_graph``, ``assume_constant_result``, ``list_backends``,
``is_compiling``, ``set_stance``, ``config``) are deprecated aliases: marked for
type checkers and in their docstrings, with no run-time warning. ``config`` is the
same object as ``dynajit.compiler.config`` (an object cannot carry a
type-checker deprecation; use the public name). The other names (``optimize``,
``optimize_assert``, ``OptimizedModule``, ``export``, ``disallow_in_graph``,
``graph_break``, ``nonstrict_trace``, ``mark_dynamic``, ``maybe_mark_dynamic``,
``mark_static``, ``mark_static_address``, ``register_backend``,
``lookup_backend``) have no public counterpart and are not deprecated;
``graph_break`` and ``nonstrict_trace`` are capture's own functions, which the
interpreter recognises inside compiled code.
"""

from dynajit._dynamo._aliases import (
    allow_in_graph,
    assume_constant_result,
    disable,
    explain,
    is_compiling,
    list_backends,
    reset,
    set_stance,
)
from dynajit._dynamo._private import (
    disallow_in_graph,
    export,
    mark_dynamic,
    mark_static,
    mark_static_address,
    maybe_mark_dynamic,
    optimize,
    optimize_assert,
)
from dynajit.capture import graph_break, nonstrict_trace
from dynajit.compiler._config import config
from dynajit.compiler._module import OptimizedModule
from dynajit.compiler._registry import lookup_backend, register_backend

__all__ = [
    "OptimizedModule",
    "allow_in_graph",
    "assume_constant_result",
    "config",
    "disable",
    "disallow_in_graph",
    "explain",
    "export",
    "graph_break",
    "is_compiling",
    "list_backends",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "mark_static_address",
    "maybe_mark_dynamic",
    "nonstrict_trace",
    "optimize",
    "optimize_assert",
    "register_backend",
    "reset",
    "set_stance",
]
