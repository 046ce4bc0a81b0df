"""The private names that have a public counterpart: deprecated aliases of ``dynajit.compiler``.

Each alias is its own function (so marking it deprecated leaves the public one
alone), decorated with ``typing_extensions.deprecated(..., category=None)``:
type checkers flag its use, nothing warns at run time. Its docstring says
which public name replaces it, followed by that name's documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typing_extensions import deprecated

from dynajit import compiler as _public

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "disable",
    "explain",
    "is_compiling",
    "list_backends",
    "reset",
    "set_stance",
]


# Literal messages: type checkers read the deprecation text only from a string literal.
@deprecated("dynajit._dynamo.explain is deprecated; use dynajit.compiler.explain", category=None)
def explain(fn: Callable[..., Any], *, backend: str | Callable[..., Any] = "eager") -> Any:
    return _public.explain(fn, backend=backend)


@deprecated("dynajit._dynamo.reset is deprecated; use dynajit.compiler.reset", category=None)
def reset() -> None:
    _public.reset()


@deprecated("dynajit._dynamo.disable is deprecated; use dynajit.compiler.disable", category=None)
def disable(fn: Callable[..., Any] | None = None, *, recursive: bool = True) -> Any:
    return _public.disable(fn, recursive=recursive)


@deprecated("dynajit._dynamo.allow_in_graph is deprecated; use dynajit.compiler.allow_in_graph", category=None)
def allow_in_graph(fn: Any) -> Any:
    return _public.allow_in_graph(fn)


@deprecated(
    "dynajit._dynamo.assume_constant_result is deprecated; use dynajit.compiler.assume_constant_result", category=None
)
def assume_constant_result(fn: Any) -> Any:
    return _public.assume_constant_result(fn)


@deprecated("dynajit._dynamo.list_backends is deprecated; use dynajit.compiler.list_backends", category=None)
def list_backends(exclude_tags: Any = ("debug", "experimental")) -> list[str]:
    return _public.list_backends(exclude_tags)


@deprecated("dynajit._dynamo.is_compiling is deprecated; use dynajit.compiler.is_compiling", category=None)
def is_compiling() -> bool:
    return _public.is_compiling()


@deprecated("dynajit._dynamo.set_stance is deprecated; use dynajit.compiler.set_stance", category=None)
def set_stance(stance: str = "default") -> Any:
    return _public.set_stance(stance)


def _document() -> None:
    for name in __all__:
        alias = globals()[name]
        public = getattr(_public, name)
        alias.__doc__ = (
            f"Deprecated alias of :func:`dynajit.compiler.{name}` (kept working, no run-time warning).\n\n"
            f".. deprecated:: use ``dynajit.compiler.{name}`` instead.\n\n{public.__doc__}"
        )


_document()
