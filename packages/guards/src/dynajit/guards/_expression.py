"""EXPRESSION guards: a Python boolean expression over sources, written with the sources' own names.

``expression("L['x'].size()[0] == L['y'].size()[0]", [LocalSource('x'), LocalSource('y')], ...)``
is parsed once; every subexpression spelling a source's name is replaced by
that source's value, so the guard prints exactly as written and compiles into
the same generated function as the other guards.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from ._guard import Check, Cost, Guard
from ._sources import Source

__all__ = ["expression"]

_MARKER = "___dynajit_field_{}___"


class _SourceReplacer(ast.NodeTransformer):
    """Replaces each subtree spelling a source's name, and each bound name, by a marker (outermost match wins)."""

    def __init__(self, names: Mapping[str, int], bound: frozenset[str]) -> None:
        self.names = names
        self.bound = bound

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr):
            index = self.names.get(ast.unparse(node))
            if index is not None:
                return ast.copy_location(ast.Name(_MARKER.format(index), ast.Load()), node)
            if isinstance(node, ast.Name) and node.id in self.bound:
                return ast.copy_location(ast.Name(_MARKER.format(node.id), ast.Load()), node)
        return super().generic_visit(node)


def _normalized(code: str) -> str:
    return ast.unparse(ast.parse(code, mode="eval").body)


def _template(code: str, sources: Sequence[Source], bound: frozenset[str]) -> str:
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError as error:
        raise ValueError(f"expression() got invalid Python {code!r}: {error.msg}") from None
    names = {_normalized(source.name()): index for index, source in enumerate(sources)}
    body = _SourceReplacer(names, bound).visit(tree).body
    leftover = [
        ast.unparse(node)
        for node in ast.walk(body)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ("L", "G", "C")
    ]
    if leftover:
        raise ValueError(
            f"expression() {code!r} refers to {leftover[0]}, which is not among its sources; "
            "pass every source the expression reads in `sources`"
        )
    text = ast.unparse(body).replace("{", "{{").replace("}", "}}")
    for field_name in [*range(len(sources)), *bound]:
        text = text.replace(_MARKER.format(field_name), f"{{{field_name}}}")
    return text


def expression(
    code: str, sources: Sequence[Source], description: str, bindings: Mapping[str, Any] | None = None
) -> Guard:
    """EXPRESSION: ``code`` (a Python boolean expression naming its sources as ``L['x']``, ``G['n']``, ...)
    is true.

    ``description`` says in words what the condition protects; it is part of
    the failure sentence. ``bindings`` supplies any other names the expression
    uses (helper functions, constants); builtins are available as usual.
    """
    sources = tuple(sources)
    for source in sources:
        if not isinstance(source, Source):
            raise TypeError(f"expression() takes a sequence of Sources, got {source!r}")
    constants = dict(bindings or {})
    for name in constants:
        if not name.isidentifier():
            raise ValueError(f"expression() binding name {name!r} is not a Python identifier")
    template = _template(code, sources, frozenset(constants))
    shown = _normalized(code)

    def explain(values: tuple[Any, ...]) -> str:
        return f"{description}: expected {shown}, which is false"

    check = Check(template, sources, Cost.EXPRESSION, explain, constants)
    return Guard("EXPRESSION", sources, (check,), f"{shown}  # {description}", ("EXPR", shown, sources), shown)
