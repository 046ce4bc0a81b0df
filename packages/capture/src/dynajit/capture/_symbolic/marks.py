"""What the runtime's marks registry says about a callable (disable, allow_in_graph, substitutes, ...).

The registry lives in ``dynajit.capture._marks``; this module reads it for the
interpreter and answers "not marked" for everything while no registry module is
importable (a frame converted on its own, as in the converter's unit tests).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "graph_break_function",
    "has_constant_result",
    "is_allowed_in_graph",
    "is_compile_query",
    "is_disabled",
    "is_disabled_frame_only",
    "is_disallowed_in_graph",
    "is_marked",
    "is_nonstrict_traced",
    "is_torch_disabled",
    "nonstrict_trace_function",
    "substitute_for",
]

_COMPILE_QUERIES = ("is_compiling", "is_dynamo_compiling", "is_exporting")


_found: list[Any] = []  # the registry module, once imported (an interpreter asks it at every call it traces)


def _registry() -> Any:
    if _found:
        return _found[0]
    try:
        _found.append(importlib.import_module("dynajit.capture._marks"))
    except ImportError:
        return None
    return _found[0]


_queries: dict[str, Any] = {}  # each query function of the registry, looked up once


def _ask(name: str, fn: Any, default: Any = False) -> Any:
    query = _queries.get(name)
    if query is None:
        registry = _registry()
        if registry is None:
            return default
        query = _queries[name] = getattr(registry, name, None)
    if query is None:
        return default
    try:
        return query(fn)
    except TypeError:
        return default


def is_disabled(fn: Any) -> bool:
    return bool(_ask("is_disabled", fn))


def is_torch_disabled(fn: Any) -> bool:
    return bool(_ask("is_torch_disabled", fn))


def is_disabled_frame_only(fn: Any) -> bool:
    return bool(_ask("is_disabled_frame_only", fn))


def is_allowed_in_graph(fn: Any) -> bool:
    return bool(_ask("is_allowed_in_graph", fn))


def is_disallowed_in_graph(fn: Any) -> bool:
    return bool(_ask("is_disallowed_in_graph", fn))


def is_nonstrict_traced(fn: Any) -> bool:
    return bool(_ask("is_nonstrict_traced", fn))


def has_constant_result(fn: Any) -> bool:
    return bool(_ask("has_constant_result", fn))


def substitute_for(fn: Any) -> Any:
    return _ask("substitute_for", fn, None)


def is_marked(fn: Any) -> bool:
    """Whether any mark of the registry names ``fn`` (or it is the graph-break or nonstrict-trace function)."""
    return bool(
        is_disabled(fn)
        or is_disabled_frame_only(fn)
        or is_allowed_in_graph(fn)
        or is_disallowed_in_graph(fn)
        or is_nonstrict_traced(fn)
        or has_constant_result(fn)
        or substitute_for(fn) is not None
        or fn is graph_break_function()
        or fn is nonstrict_trace_function()
        or is_compile_query(fn)
    )


def graph_break_function() -> Any:
    registry = _registry()
    return getattr(registry, "graph_break", None)


def nonstrict_trace_function() -> Any:
    """``nonstrict_trace`` itself (called inline in traced code as ``nonstrict_trace(fn)(...)``)."""
    registry = _registry()
    return getattr(registry, "nonstrict_trace", None)


def quiet_attr(value: Any, name: str, default: Any = None) -> Any:
    """``getattr(value, name, default)`` that never runs the object's class's own ``__getattr__`` or
    ``__getattribute__``: the interpreter asks every value it meets what it is, and a user's hook run for that
    question would be a visible effect of compiling (a ``__getattr__`` that looks ``name`` up in a dict raised
    ``KeyError`` for ``__name__``, and the frame ran eagerly)."""
    try:
        return object.__getattribute__(value, name)
    except AttributeError:
        return default


def is_compile_query(value: Any) -> str | None:
    """The name of ``is_compiling``-like functions (answered as constants while tracing), else None."""
    name = quiet_attr(value, "__name__")
    module = quiet_attr(value, "__module__", "") or ""
    if name in _COMPILE_QUERIES and callable(value) and module.startswith(("dynajit", "torch.compiler")):
        return name
    if callable(value) and _ask("is_tracing_query", value):
        return "is_compiling"  # a library's own "am I traced?" check (nn.MultiheadAttention's fast path)
    return None
