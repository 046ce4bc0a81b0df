"""dynajit.compiler: the documented user surface of dynajit.

``compile(model)`` makes an unmodified PyTorch function or ``nn.Module`` faster:
it captures the tensor operations into FX graphs, guards them, and runs them
through a backend compiler (``"inductor"`` by default).
"""

from dynajit.compiler._compile import compile
from dynajit.compiler._registry import list_backends

__all__ = ["compile", "list_backends"]
