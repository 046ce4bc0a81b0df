"""The private names without a public counterpart, documented here and forwarded to capture.

``graph_break`` and ``nonstrict_trace`` are not here: they are called inside
compiled code, where the interpreter recognises capture's own functions, so
``dynajit._dynamo`` re-exports those objects unchanged.

``optimize`` and ``optimize_assert`` take a backend name or callable (names are
resolved by api's registry, since capture knows no backend names) and return a
decorator that also accepts ``nn.Module``s (giving an ``OptimizedModule``).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

import dynajit.capture as _capture
from dynajit.compiler._compile import CompileSettings

__all__ = [
    "disallow_in_graph",
    "export",
    "mark_dynamic",
    "mark_static",
    "mark_static_address",
    "maybe_mark_dynamic",
    "optimize",
    "optimize_assert",
]


class _Optimizer:
    """The decorator ``optimize`` returns: compiles functions, methods and modules with fixed settings."""

    def __init__(self, settings: CompileSettings) -> None:
        self._settings = settings
        settings.decorator()  # resolve the backend now, so a bad name fails at the optimize() call

    def __call__(self, model: Any) -> Any:
        return self._settings.apply(model)

    def __repr__(self) -> str:
        return f"optimize({self._settings.backend!r}, fullgraph={self._settings.fullgraph})"


def optimize(
    backend: str | Callable[..., Any] = "inductor",
    *,
    nopython: bool = False,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    disable: bool = False,
) -> Callable[[Any], Any]:
    """Return a decorator compiling functions and modules with ``backend`` (``compile``'s older form).

    Args:
        backend: a backend name or a callable ``(gm, example_inputs) -> callable``.
        nopython: the older spelling of ``fullgraph``.
        fullgraph: any graph break is an error.
        dynamic: as ``compile(dynamic=...)``.
        disable: return a decorator that leaves its argument unchanged.

    Returns:
        A decorator; applied to an ``nn.Module`` it returns an ``OptimizedModule``.

    Example:
        >>> import torch, dynajit._dynamo
        >>> def f(x):
        ...     return torch.relu(x) + 1
        >>> dynajit._dynamo.optimize("eager")(f)(torch.zeros(2))
        tensor([1., 1.])
    """
    if disable:
        return lambda model: model
    return _Optimizer(CompileSettings(backend=backend, fullgraph=bool(fullgraph or nopython), dynamic=dynamic))


def optimize_assert(
    backend: str | Callable[..., Any] = "inductor", *, dynamic: bool | None = None
) -> Callable[..., Any]:
    """``optimize`` with ``fullgraph=True``: any graph break raises, naming its reason and line.

    Args:
        backend: a backend name or callable.
        dynamic: as ``compile(dynamic=...)``.

    Returns:
        A decorator for functions and modules.

    Example:
        >>> import torch, dynajit._dynamo
        >>> def f(x):
        ...     return torch.cos(x) * 2
        >>> dynajit._dynamo.optimize_assert("eager")(f)(torch.zeros(2))
        tensor([2., 2.])
    """
    return _Optimizer(CompileSettings(backend=backend, fullgraph=True, dynamic=dynamic))


def export(fn: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    """Capture ``fn`` as one whole graph, without running a backend.

    Args:
        fn: the function or module to export.
        **kwargs: forwarded to ``dynajit.capture.export``.

    Returns:
        A function taking ``fn``'s arguments and returning an ``ExportResult``
        (``graph_module``, ``guards``); a graph break raises instead.

    Example:
        >>> import torch, dynajit._dynamo
        >>> def f(x):
        ...     return torch.sin(x) + 1
        >>> result = dynajit._dynamo.export(f)(torch.zeros(2))
        >>> result.graph_module(torch.zeros(2))
        tensor([1., 1.])
    """
    return _capture.export(fn, **kwargs)


def disallow_in_graph(fn: Any) -> Any:
    """Make a torch-level op a graph break: calls to it run eagerly, outside any graph.

    Only for callables capture would otherwise put in the graph (torch functions and
    ops); for a user function it raises and suggests ``disable`` or ``graph_break``.
    ``allow_in_graph(fn)`` undoes it.

    Args:
        fn: the torch callable.

    Returns:
        ``fn`` itself.

    Raises:
        ValueError: ``fn`` is a user function (capture traces into those instead of
            putting them in the graph); the message suggests ``disable`` or ``graph_break``.

    Example:
        >>> import torch, dynajit._dynamo
        >>> dynajit._dynamo.disallow_in_graph(torch.sub)
        <built-in method sub ...>
        >>> import dynajit.compiler
        >>> _ = dynajit.compiler.allow_in_graph(torch.sub)  # undo it
    """
    for each in fn if isinstance(fn, (list, tuple)) else (fn,):
        if not _is_graph_callable(each):
            raise ValueError(
                f"disallow_in_graph expects a torch-level op that capture puts in the graph (torch.*, "
                f"torch.ops.*, or a function passed to allow_in_graph), but {getattr(each, '__qualname__', each)!r} "
                f"is a user function, which capture traces into. To run it eagerly use "
                f"dynajit.compiler.disable(fn); to cut the graph at a point call dynajit._dynamo.graph_break()."
            )
    return _capture.disallow_in_graph(fn)


def _is_graph_callable(fn: Any) -> bool:
    """True for callables capture records as graph nodes rather than tracing into them."""
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if not isinstance(fn, (types.FunctionType, types.MethodType)):
        return callable(fn)  # builtins, C functions and method descriptors are never traced into
    is_allowed = getattr(_capture, "is_allowed_in_graph", None)
    if is_allowed is not None and is_allowed(fn):
        return True
    module = getattr(fn, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def mark_dynamic(tensor: Any, index: int | list[int], **kwargs: Any) -> None:
    """Compile ``tensor``'s dimension(s) ``index`` as dynamic from the first compile; specializing is an error.

    Args:
        tensor: an input tensor.
        index: a dimension or a list of dimensions.
        **kwargs: forwarded to capture (``min``, ``max``).

    Returns:
        None.

    Example:
        >>> import torch, dynajit._dynamo
        >>> x = torch.ones(4, 3)
        >>> dynajit._dynamo.mark_dynamic(x, 0)
    """
    _capture.mark_dynamic(tensor, index, **kwargs)


def maybe_mark_dynamic(tensor: Any, index: int | list[int]) -> None:
    """Like ``mark_dynamic``, but capture may still specialize the dimension without an error.

    Args:
        tensor: an input tensor.
        index: a dimension or a list of dimensions.

    Returns:
        None.

    Example:
        >>> import torch, dynajit._dynamo
        >>> dynajit._dynamo.maybe_mark_dynamic(torch.ones(4), 0)
    """
    _capture.maybe_mark_dynamic(tensor, index)


def mark_static(value: Any, index: int | list[int] | None = None) -> None:
    """Never treat ``value``'s dimension(s) ``index`` (or a module's, or a whole tensor's) as dynamic.

    Args:
        value: a tensor or an ``nn.Module``.
        index: dimension(s) of a tensor; None for all.

    Returns:
        None.

    Example:
        >>> import torch, dynajit._dynamo
        >>> dynajit._dynamo.mark_static(torch.ones(4), 0)
    """
    _capture.mark_static(value, index)


def mark_static_address(tensor: Any, **kwargs: Any) -> None:
    """Promise that ``tensor``'s storage address stays the same across calls (for CUDA graphs).

    Args:
        tensor: a tensor kept alive and updated in place (a KV cache, a buffer).
        **kwargs: forwarded to capture (``guard``).

    Returns:
        None.

    Example:
        >>> import torch, dynajit._dynamo
        >>> dynajit._dynamo.mark_static_address(torch.zeros(4))
    """
    _capture.mark_static_address(tensor, **kwargs)
