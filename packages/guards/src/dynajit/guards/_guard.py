"""The guard model: a guard is a named kind over some sources, made of checks.

A :class:`Check` is one boolean Python expression over its sources' values
(``{0}``, ``{1}``, ... in its template) and named constants (``{dtype}``), with
a cost class used to order checks cheapest first and an ``explain`` function
that turns the failing values into a sentence. The same template serves the
fast check function and the failure explanation, so the two cannot disagree.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ._sources import Source

__all__ = ["Check", "Cost", "Guard", "hashable_value", "short_repr"]


class Cost:
    """Cost classes; checks run in increasing cost order (stable within a class)."""

    IDENTITY = 0  # `is` / `type() is` comparisons
    CHEAP = 1  # len, ==, hasattr, a C call on global state
    TENSOR = 2  # tensor metadata reads
    RELATION = 3  # relations between several values (aliasing)
    EXPRESSION = 4  # arbitrary expressions (symbolic shapes)


# Values whose repr runs no code of the program's and costs little.
_PLAIN = (int, float, complex, bool, str, bytes, type(None), type(...), range, torch.dtype, torch.device)
# Their own reprs name them without calling anything else (a class's only when its metaclass keeps type's).
_NAMED = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)


def short_repr(value: Any, limit: int = 60) -> str:
    """A description of ``value`` cut to ``limit`` characters, for messages; no ``__repr__`` of the program's runs.

    Guards describe what they hold when they are built, so describing must have no effect the program could
    see: a class's own ``__repr__`` may raise, print or count its calls, and a module without a spec is
    described through its loader (a DeprecationWarning). Such values are described by their class and
    address, as ``object.__repr__`` does. A tensor is described by its class, size and dtype, and a module
    by its class: their reprs format every element or submodule (a model's parameters took a second).
    """
    text = _describe(value, limit)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(value: Any, limit: int, depth: int = 0) -> str:
    if isinstance(value, torch.Tensor):
        return f"{type(value).__name__}(size={list(value.shape)}, dtype={value.dtype})"
    if isinstance(value, torch.nn.Module):
        return f"{type(value).__name__} module"
    if type(value) in _PLAIN:
        return repr(value)
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__!r}>"
    if isinstance(value, _NAMED) or (isinstance(value, type) and type(value).__repr__ is type.__repr__):
        return repr(value)
    if isinstance(value, (type, types.MethodType)):
        return f"<{type(value).__name__} {value.__qualname__}>"
    # Containers are described a few levels deep: one may hold itself (a module's globals, through a function)
    if type(value) in (tuple, list, set, frozenset) and len(value) <= limit and depth < _DEPTH:
        items = ", ".join(_describe(item, limit, depth + 1) for item in value)
        if type(value) is tuple:
            return f"({items}{',' if len(value) == 1 else ''})"
        return f"[{items}]" if type(value) is list else f"{{{items}}}"
    if type(value) is dict and len(value) <= limit and depth < _DEPTH:
        items = (f"{_describe(k, limit, depth + 1)}: {_describe(v, limit, depth + 1)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return f"<{type(value).__qualname__} object at {id(value):#x}>"


_DEPTH = 3


@dataclass(frozen=True, eq=False)
class Check:
    """One boolean expression of a guard.

    ``template`` is formatted with the sources' value expressions as positional
    fields and the generated names of ``constants`` as keyword fields.
    ``explain(values)`` gets the sources' values (in order) when the check
    failed and returns the sentence for the user.
    """

    template: str
    sources: tuple[Source, ...]
    cost: int
    explain: Callable[[tuple[Any, ...]], str]
    constants: Mapping[str, Any] = field(default_factory=dict)

    def render(self, source_exprs: Sequence[str], constant_names: Mapping[str, str]) -> str:
        """The expression with sources and constants replaced by the given code."""
        return self.template.format(*source_exprs, **constant_names)

    def readable(self) -> str:
        """The expression with source names and constant reprs, for ``format(verbose=True)``."""
        return self.render(
            [source.name() for source in self.sources],
            {key: _constant_text(value) for key, value in self.constants.items()},
        )


def _constant_text(value: Any) -> str:
    if isinstance(value, type):
        module = value.__module__
        return value.__qualname__ if module == "builtins" else f"{module}.{value.__qualname__}"
    if callable(value) and isinstance(getattr(value, "__name__", None), str):
        return value.__name__
    return short_repr(value)


@dataclass(frozen=True, eq=False)
class Guard:
    """A guard of one kind over one or more sources.

    Guards compare and hash by ``key`` (kind, sources and expected values), so a
    :class:`~dynajit.guards.GuardSet` keeps one copy of a repeated guard.
    ``label`` overrides the listing's subject (default: the sources' labels).
    """

    kind: str
    sources: tuple[Source, ...]
    checks: tuple[Check, ...]
    detail: str
    key: Hashable
    label: str | None = None

    def subject(self) -> str:
        """What the guard is about, in the seed's form (``local 'a'``; ``global ''`` for global state)."""
        if self.label is not None:
            return self.label
        if not self.sources:
            return "global ''"
        return ", ".join(source.label() for source in self.sources)

    def __str__(self) -> str:
        return f"{self.subject()} {self.kind}"

    def __repr__(self) -> str:
        return f"<Guard {self}: {self.detail}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Guard) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def hashable_value(value: Any) -> Hashable:
    """A key standing for ``value`` in a guard's dedupe key: typed value if hashable, identity otherwise."""
    if type(value) is float:
        return (float, repr(value))  # tells 0.0 from -0.0 and keeps nan equal to itself
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return (type(value), value)
