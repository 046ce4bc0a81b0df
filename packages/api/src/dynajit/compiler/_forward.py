"""The public functions whose implementation lives in capture, inductor-lite or fxgraph.

Each function here is the documented entry point; its body forwards to the layer
that implements it, looked up when called, so ``import dynajit.compiler`` works
whatever the lower layers provide and a missing implementation is an
``AttributeError`` naming the layer and the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import dynajit.capture as _capture
import dynajit.inductor_lite as _inductor
from dynajit import fxgraph as _fxgraph

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "cudagraph_mark_step_begin",
    "disable",
    "inductor_list_mode_options",
    "inductor_list_options",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "reset",
    "set_logs",
    "set_stance",
    "substitute_in_graph",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def reset() -> None:
    """Forget everything compiled so far.

    Clears every code cache entry, guard and compiled graph, so the next call of a
    compiled function compiles again. Use it between tests, or after changing global
    state that guards do not cover.

    Returns:
        None.

    Example:
        >>> import dynajit.compiler
        >>> dynajit.compiler.reset()
    """
    _capture.reset()


def allow_in_graph(fn: Any) -> Any:
    """Put calls to ``fn`` into the graph as one opaque node instead of tracing into it.

    Each call becomes a single ``call_function`` node whose target is ``fn`` (a black
    box for capture; the backend sees it). Capture computes the node's example value by
    running ``fn`` on fake tensors, so ``fn`` must take and return tensors (or
    structures of them) and have no side effects that matter.

    Args:
        fn: a function, or a list/tuple of functions, to allow in the graph.

    Returns:
        ``fn`` itself (or the list), so it works as a decorator.

    Example:
        >>> import torch, dynajit.compiler
        >>> @dynajit.compiler.allow_in_graph
        ... def scaled(x):
        ...     return x * 2
        >>> @dynajit.compiler.compile(backend="eager")
        ... def f(x):
        ...     return scaled(x).sin()
    """
    return _capture.allow_in_graph(fn)


def substitute_in_graph(original_fn: Callable[..., Any], **options: Any) -> Callable[[_F], _F]:
    """Register a traceable Python replacement for ``original_fn`` (typically a C function).

    When capture meets a call to ``original_fn``, it traces the decorated Python
    function instead. The replacement must have the same signature and the same
    behaviour; calling ``original_fn`` eagerly is unchanged.

    Args:
        original_fn: the function to replace while tracing.
        **options: forwarded to capture (``can_constant_fold_through``,
            ``skip_signature_check``).

    Returns:
        A decorator that registers the replacement and returns it.

    Example:
        >>> import operator, dynajit.compiler
        >>> @dynajit.compiler.substitute_in_graph(operator.indexOf)  # doctest: +SKIP
        ... def index_of(seq, value):
        ...     for i, item in enumerate(seq):
        ...         if item is value or item == value:
        ...             return i
        ...     raise ValueError("sequence.index(x): x not in sequence")
    """
    return _capture.substitute_in_graph(original_fn, **options)


def assume_constant_result(fn: _F) -> _F:
    """Treat ``fn``'s result as a constant while tracing.

    Capture calls ``fn`` once, at trace time, and bakes its result into the graph
    as a constant (no guard on the value). Use it for functions whose result never
    changes (a config lookup); if it does change, call ``reset()``.

    Args:
        fn: a function returning a constant (a Python scalar, string, tuple, ...).

    Returns:
        ``fn``, marked; calling it eagerly is unchanged.

    Example:
        >>> import dynajit.compiler
        >>> @dynajit.compiler.assume_constant_result
        ... def scale():
        ...     return 3
    """
    return _capture.assume_constant_result(fn)


def disable(fn: Callable[..., Any] | None = None, *, recursive: bool = True) -> Any:
    """Run ``fn`` without dynajit.

    With ``recursive=True`` (the default) ``fn`` and everything it calls run eagerly:
    none of their operations appear in any graph, and a compiled caller graph-breaks
    around the call. With ``recursive=False`` only ``fn``'s own frame runs eagerly;
    the functions it calls are still compiled.

    Args:
        fn: the function to disable. When omitted, returns a decorator.
        recursive: whether ``fn``'s callees are left alone too.

    Returns:
        The wrapped function (or a decorator).

    Example:
        >>> import torch, dynajit.compiler
        >>> @dynajit.compiler.disable
        ... def log_stats(x):
        ...     print(x.mean().item())
        >>> @dynajit.compiler.disable(recursive=False)
        ... def driver(x):
        ...     return x + 1
    """
    return _capture.disable(fn, recursive=recursive)


def set_stance(stance: str = "default") -> Any:
    """Change how compiled functions behave: as a call, a context manager or a decorator.

    Stances:
        ``"default"``: compile on a cache miss, run compiled code on a hit.
        ``"force_eager"``: run every compiled function eagerly (nothing compiles).
        ``"eager_on_recompile"``: reuse cached code when guards pass, but run eagerly
            instead of recompiling.
        ``"fail_on_recompile"``: raise instead of recompiling (asserts no recompiles).

    ``set_stance(s)`` takes effect at once for the whole process; ``with set_stance(s):``
    restores the previous stance when the block ends; ``@set_stance(s)`` applies it
    only while the decorated function runs.

    Args:
        stance: one of the stances above.

    Returns:
        The setting, already in effect: a context manager and decorator.

    Raises:
        ValueError: an unknown stance (the message lists the stances).

    Example:
        >>> import dynajit.compiler
        >>> with dynajit.compiler.set_stance("force_eager"):
        ...     pass  # compiled functions run eagerly here
    """
    return _capture.set_stance(stance)


def is_compiling() -> bool:
    """True while dynajit traces or exports the calling code, False when it runs eagerly.

    Use it to skip code that should not be traced (logging, assertions). Under
    tracing the check is a constant, so the skipped branch costs nothing.

    Returns:
        Whether the caller is being traced by capture or ``export``.

    Example:
        >>> import dynajit.compiler
        >>> dynajit.compiler.is_compiling()
        False
    """
    return bool(_capture.is_compiling())


def is_dynamo_compiling() -> bool:
    """True only while dynajit's bytecode capture traces the calling code.

    Unlike :func:`is_compiling`, this is False under other tracers (such as
    ``make_fx`` over a captured graph).

    Returns:
        Whether the caller is being traced by capture's symbolic interpreter.

    Example:
        >>> import dynajit.compiler
        >>> dynajit.compiler.is_dynamo_compiling()
        False
    """
    return bool(_capture.is_dynamo_compiling())


def is_exporting() -> bool:
    """True while ``export`` traces the calling code.

    Returns:
        Whether the caller is being traced for export.

    Example:
        >>> import dynajit.compiler
        >>> dynajit.compiler.is_exporting()
        False
    """
    return bool(_capture.is_exporting())


def set_logs(*artifacts: str, **switches: bool) -> None:
    """Switch debug log artifacts on or off (the same as ``DYNAJIT_LOGS=a,b``).

    Artifacts: ``graph_code``, ``graph_breaks``, ``recompiles``, ``guards``,
    ``bytecode``, ``output_code``. Each is a standard ``logging`` logger named
    ``dynajit.<artifact>``; switching one on sets it to INFO and attaches a stderr
    handler once. With no argument, every artifact is switched off.

    Args:
        *artifacts: names to switch on.
        **switches: ``name=True`` / ``name=False`` to switch on or off.

    Returns:
        None.

    Raises:
        ValueError: an unknown artifact name (the message lists the known ones).

    Example:
        >>> import dynajit.compiler
        >>> dynajit.compiler.set_logs("graph_breaks", recompiles=True)
        >>> dynajit.compiler.set_logs(graph_breaks=False, recompiles=False)
        >>> dynajit.compiler.set_logs()
    """
    _fxgraph.set_logs(*artifacts, **switches)


def inductor_list_mode_options(mode: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """Describe the inductor backend's modes: the options each mode sets.

    Args:
        mode: one mode name; when omitted, every mode.
        **kwargs: forwarded to ``dynajit.inductor_lite.list_mode_options``.

    Returns:
        ``{mode: {option: value}}`` for all modes, or ``{option: value}`` for ``mode``.

    Example:
        >>> import dynajit.compiler
        >>> {"default", "reduce-overhead", "max-autotune"} <= set(dynajit.compiler.inductor_list_mode_options())
        True
    """
    return dict(_inductor.list_mode_options(mode, **kwargs))


def inductor_list_options() -> list[str]:
    """List the option names the inductor backend accepts in ``compile(options=...)``.

    Returns:
        The names of ``dynajit.inductor_lite.config``'s fields.

    Example:
        >>> import dynajit.compiler
        >>> "max_autotune" in dynajit.compiler.inductor_list_options()
        True
    """
    return list(_inductor.list_options())


def cudagraph_mark_step_begin() -> None:
    """Mark the start of a new iteration for CUDA graphs (``mode="reduce-overhead"``).

    Outputs of a CUDA-graphed function live in memory the next replay overwrites;
    calling this at the start of each training or inference step tells the backend
    that the previous step's outputs are no longer used. Without CUDA graphs
    (CPU, or other modes) there is nothing to mark and the call does nothing.

    Returns:
        None.

    Example:
        >>> import dynajit.compiler
        >>> dynajit.compiler.cudagraph_mark_step_begin()
    """
    mark = getattr(_inductor, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()
