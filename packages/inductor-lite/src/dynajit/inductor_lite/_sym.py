"""Symbolic sizes: sizes are ints, or sympy expressions over the graph's ShapeEnv symbols.

Every size, stride and index coefficient of the loop-level IR is a :data:`Size`. Static graphs
only ever see ints (so their generated code is unchanged); a dynamic graph's sizes come from the
symbolic fake values AOT autograd traced with. Two kinds of question are asked about sizes:

- *semantic* ones (is this index below that size? are two sizes equal?) are answered only when
  provable from the symbols' value ranges, never by guarding: an unprovable answer takes the
  general (still correct) road;
- *heuristic* ones (loop order, vector lanes, parallelisation, block sizes) use :func:`hint`,
  the sizes of the example inputs.

:func:`use_shapes` makes a ShapeEnv's ranges and hints current while one graph is compiled.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import sympy
import torch
from torch.utils._sympy.functions import (
    FloatTrueDiv,
    FloorDiv,
    IntTrueDiv,
    Max,
    Min,
    Mod,
    ModularIndexing,
    PythonMod,
    ToFloat,
)
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

__all__ = [
    "Size",
    "Unsupported",
    "as_size",
    "current_symbols",
    "is_dynamic_graph",
    "backed",
    "c_text",
    "divisible",
    "eq",
    "exact_quotient",
    "floordiv",
    "floordiv_max",
    "free_symbols",
    "hint",
    "is_symbolic",
    "kernel_py_text",
    "maximum",
    "minimum",
    "norm",
    "prod",
    "provably_le",
    "provably_lt",
    "py_text",
    "shape_of",
    "strides_of",
    "tuple_text",
    "use_shapes",
]

Size = Any  # int | sympy.Expr


class Unsupported(NotImplementedError):
    """A node cannot be generated for symbolic sizes without specialising; its op is called through aten."""


class _Shapes:
    def __init__(self, ranges: dict[sympy.Symbol, ValueRanges], hints: dict[sympy.Symbol, int]) -> None:
        self.ranges = ranges
        self.hints = hints
        self.bounds: dict[sympy.Expr, ValueRanges] = {}  # index simplification asks about the same sizes often


_current = _Shapes({}, {})


@contextlib.contextmanager
def use_shapes(shape_env: Any) -> Iterator[None]:
    """Make ``shape_env``'s value ranges and size hints the ones size questions are answered with."""
    global _current
    previous = _current
    if shape_env is not None:
        hints = getattr(shape_env, "backed_var_to_val", None)
        if hints is None:
            hints = shape_env.var_to_val
        _current = _Shapes(dict(shape_env.var_to_range), {k: int(v) for k, v in hints.items()})
    try:
        yield
    finally:
        _current = previous


def is_dynamic_graph() -> bool:
    """True while a graph with shape symbols is being compiled."""
    return bool(_current.hints)


def current_symbols() -> list[str]:
    return [s.name for s in _current.hints]


def norm(value: Any) -> Size:
    """An int for a constant, else the expanded sympy expression (so equal sizes compare equal).

    A float computed from sizes (a SymFloat: batch norm's ``n / (n - 1)``) is its expression too,
    printed as double arithmetic, so it is evaluated per call instead of fixed to one size.
    """
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        value = value.node.expr
    if isinstance(value, sympy.Float):
        return float(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, sympy.Expr):
        if value.is_Integer:
            return int(value)
        value = sympy.expand(value)
        return int(value) if value.is_Integer else value
    if hasattr(value, "__index__"):
        return int(value)
    return value


as_size = norm


def is_symbolic(value: Any) -> bool:
    return isinstance(value, sympy.Expr) and not value.is_number


def backed(value: Any) -> bool:
    """True unless ``value`` (a SymInt, a tensor, or a list of them) has a size with no example value (unbacked)."""
    if isinstance(value, (list, tuple)):
        return all(backed(v) for v in value)
    sizes: list[Any] = []
    if isinstance(value, torch.Tensor):
        sizes = [*value.shape, *value.stride()]
    elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        sizes = [value]
    symbols = free_symbols(s.node.expr for s in sizes if isinstance(s, (torch.SymInt, torch.SymFloat, torch.SymBool)))
    return all(s in _current.hints for s in symbols)


def shape_of(val: torch.Tensor) -> tuple[Size, ...]:
    """The sizes of a (fake) tensor without guarding on them."""
    return tuple(norm(s) for s in val.shape)


def strides_of(val: torch.Tensor) -> tuple[Size, ...]:
    return tuple(norm(s) for s in val.stride())


def prod(values: Iterable[Size]) -> Size:
    return norm(math.prod(values))


def eq(a: Size, b: Size) -> bool:
    """Equal sizes for every allowed value of the symbols (their value ranges settle a ``Max``/``Min``)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    difference = norm(sympy.sympify(a) - b)
    return difference == 0 or norm(_settled(difference)) == 0


def _settled(expr: Any) -> Any:
    """``expr`` with each two-way ``Max``/``Min`` its symbols' ranges decide replaced by the argument it is
    (a fake's storage of ``(2, n // 2)`` has ``4 * (n // 2) + 4 * Max(1, n // 2)`` bytes, ``n >= 2``)."""
    if not isinstance(expr, sympy.Basic):
        return expr
    return expr.replace(
        lambda e: isinstance(e, (Max, Min)) and len(e.args) == 2,
        lambda e: _extreme(_settled(e.args[0]), _settled(e.args[1]), isinstance(e, Max)),
    )


def nonempty(value: Size) -> Size:
    """``value`` with each ``Max(1, e)`` taken as ``e``: what it is where no size it counts is 0."""
    if not isinstance(value, sympy.Basic):
        return value
    return norm(value.replace(lambda e: isinstance(e, Max) and 1 in e.args and len(e.args) == 2,
                              lambda e: next(a for a in e.args if a != 1)))  # fmt: skip


def hint(value: Size) -> int:
    """The value of a size at the example inputs: for heuristics only."""
    if isinstance(value, int):
        return value
    if isinstance(value, torch.SymInt):
        value = value.node.expr
    return int(sympy.sympify(value).xreplace({s: _current.hints.get(s, 2) for s in value.free_symbols}))


def _bounds(value: Size) -> ValueRanges:
    if isinstance(value, int):
        return ValueRanges(value, value)
    found = _current.bounds.get(value)
    if found is not None:
        return found
    ranges = {s: _current.ranges.get(s, ValueRanges(0, sympy.oo)) for s in value.free_symbols}
    try:
        found = bound_sympy(value, ranges)
        # Intervals bound `s - 100 * (s // 100)` as if `s // 100` could be anything: written with `s % 100`
        # (`a // c == (a - a % c) / c` for c > 0), the same value is bounded by [0, 99].
        quotients = {
            q: (q.args[0] - PythonMod(*q.args)) / q.args[1] for q in value.atoms(FloorDiv) if _positive(q.args[1])
        }
        if quotients:
            found = found & bound_sympy(sympy.expand(value.xreplace(quotients)), ranges)
    except Exception:  # an expression bound_sympy cannot bound is not provably anything
        found = ValueRanges.unknown_int()
    _current.bounds[value] = found
    return found


def _positive(value: Any) -> bool:
    return isinstance(value, (int, sympy.Integer)) and int(value) > 0


def provably_lt(a: Size, b: Size) -> bool:
    """``a < b`` for every allowed value of the symbols (from their value ranges; never a guard)."""
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return bool(_bounds(norm(sympy.sympify(b) - a)).lower > 0)


def provably_le(a: Size, b: Size) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    return bool(_bounds(norm(sympy.sympify(b) - a)).lower >= 0)


def _extreme(a: Size, b: Size, larger: bool) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b) if larger else min(a, b)
    if provably_le(b, a):
        return a if larger else b
    if provably_le(a, b):
        return b if larger else a
    return Max(a, b) if larger else Min(a, b)


def maximum(a: Size, b: Size) -> Size:
    return _extreme(a, b, True)


def minimum(a: Size, b: Size) -> Size:
    return _extreme(a, b, False)


def divisible(value: Size, div: Size) -> bool:
    """``value`` is a multiple of ``div`` for every value of the symbols."""
    if isinstance(value, int) and isinstance(div, int):
        return value % div == 0
    return sympy.Mod(value, div) == 0


def exact_quotient(value: Size, div: Size) -> Size:
    """``value / div`` where :func:`divisible` holds: a polynomial (sympy keeps ``(64*s + 64)/(32*s + 32)`` as a
    fraction until it is cancelled, and a fraction is no index)."""
    if isinstance(value, int) and isinstance(div, int):
        return value // div
    return norm(sympy.cancel(sympy.sympify(value) / div))


def floordiv(value: Size, div: Size) -> Size:
    if isinstance(value, int) and isinstance(div, int):
        return value // div
    return norm(FloorDiv(value, div))


def floordiv_max(top: Size, div: Size) -> Size:
    """``top // div`` for an upper bound ``top``, simplified when ``top`` is a multiple of ``div`` plus a small rest."""
    if isinstance(top, int) and isinstance(div, int):
        return top // div
    if divisible(norm(top + 1), div):  # the common full range: div * k - 1
        return norm(exact_quotient(norm(top + 1), div) - 1)
    terms = sympy.Add.make_args(sympy.sympify(top))
    high = norm(sum(t for t in terms if divisible(t, div)))
    rest = norm(sympy.sympify(top) - high)
    if provably_le(0, rest) and provably_lt(rest, div):
        return exact_quotient(high, div)
    return floordiv(top, div)


def free_symbols(values: Iterable[Any]) -> set[sympy.Symbol]:
    found: set[sympy.Symbol] = set()
    for v in values:
        if isinstance(v, sympy.Expr):
            found |= v.free_symbols
    return found


# ------------------------------------------------------------------ printing (integer arithmetic)


def _nonnegative(expr: Any) -> bool:
    return expr >= 0 if isinstance(expr, int) else getattr(expr, "is_nonnegative", None) is True


def _render(expr: Any, lang: str) -> str:
    if isinstance(expr, int) or (isinstance(expr, sympy.Expr) and expr.is_Integer):
        value = int(expr)
        if lang == "c" and not -(2**31) < value < 2**31:
            return f"INT64_C({value})"
        return str(value) if value >= 0 else f"({value})"
    if isinstance(expr, sympy.Symbol):
        return expr.name
    if isinstance(expr, (float, sympy.Float)):
        return repr(float(expr))
    args = [_render(a, lang) for a in expr.args]
    # Python's (and Triton's) `/` of ints is already true division; `* 1.0` makes a float in both.
    to_double = "(double)" if lang == "c" else ""
    if isinstance(expr, IntTrueDiv):
        return f"({to_double}({args[0]}) / {to_double}({args[1]}))"
    if isinstance(expr, FloatTrueDiv):
        return f"(({args[0]}) / ({args[1]}))"
    if isinstance(expr, ToFloat):
        return f"((double)({args[0]}))" if lang == "c" else f"(({args[0]}) * 1.0)"
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + "*".join(args) + ")"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return "(" + "*".join([args[0]] * int(expr.exp)) + ")"
    div = "/" if lang == "c" else "//"
    # C's `/` and `%` truncate: where an operand may be negative (``-s0 // 3`` of a size a program computes), the
    # prelude's floor division and Python remainder give Python's answers.
    floor = lang == "c" and not all(_nonnegative(a) for a in expr.args)
    if isinstance(expr, FloorDiv):
        return f"dj_floordiv<int64_t>({args[0]}, {args[1]})" if floor else f"({args[0]} {div} {args[1]})"
    if isinstance(expr, (Mod, PythonMod, sympy.Mod)):
        return f"dj_remainder<int64_t>({args[0]}, {args[1]})" if floor else f"({args[0]} % {args[1]})"
    if isinstance(expr, ModularIndexing):
        return f"(({args[0]} {div} {args[1]}) % {args[2]})"
    if isinstance(expr, (Max, Min, sympy.Max, sympy.Min)):
        name = "max" if isinstance(expr, (Max, sympy.Max)) else "min"
        name = f"dj_i{name}" if lang == "c" else name  # the kernels' prelude defines dj_imax / dj_imin
        out = args[0]
        for a in args[1:]:
            out = f"{name}({out}, {a})"
        return out
    raise Unsupported(f"inductor-lite: cannot print size expression {expr} ({type(expr).__name__})")


def _fits_in_64_bits(expr: Any) -> bool:
    """Whether a kernel may compute ``expr`` in int64: no constant of 32 bits or more and no cube or higher power
    of a symbol. Sizes and their products fit (they count elements in memory); a program's own arithmetic on
    them in Python ints (``x.shape[0] * 2**62 % 7``) may not, and wrapped around where Python's ints do not."""
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Integer) and abs(int(node)) >= 2**32:
            return False
        if isinstance(node, sympy.Pow) and node.exp.is_Integer and int(node.exp) >= 3 and node.free_symbols:
            return False
    return True


def c_text(expr: Size) -> str:
    """C++ source of a size (int64 arithmetic, floor division and Python remainder where an operand may be negative)."""
    if isinstance(expr, int):
        return str(expr)
    if not _fits_in_64_bits(expr):
        raise Unsupported(
            f"inductor-lite: size expression {expr} may exceed 64 bits in a kernel, where Python's ints do not"
        )
    return _render(expr, "c")


def kernel_py_text(expr: Size) -> str:
    """Source of a size for a Triton kernel (int64 arithmetic there, as in C++)."""
    if not isinstance(expr, int) and not _fits_in_64_bits(expr):
        raise Unsupported(
            f"inductor-lite: size expression {expr} may exceed 64 bits in a kernel, where Python's ints do not"
        )
    return py_text(expr)


def py_text(expr: Size) -> str:
    """Python source of a size."""
    return str(expr) if isinstance(expr, int) else _render(expr, "py")


def tuple_text(values: Sequence[Size]) -> str:
    """Python source of a tuple of sizes (``repr`` for all-int tuples, so static wrappers read as before)."""
    if all(isinstance(v, int) for v in values):
        return repr(tuple(values))
    inner = ", ".join(py_text(v) for v in values)
    return f"({inner}{',' if len(values) == 1 else ''})"
