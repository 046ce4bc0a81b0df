"""Dynamic shapes for one trace: which sizes are symbolic, and the guards the ShapeEnv's facts become.

A dimension is symbolic when ``compile(dynamic=True)``, when it changed since
an earlier compile of the same code (automatic dynamic, ``dynamic=None``), or
when the tensor was passed to ``mark_dynamic`` / ``maybe_mark_dynamic``;
``mark_static`` keeps it static whatever else says. Int arguments follow the
same rules. Sizes 0 and 1 always stay static, as in torch.compile.

Every condition the trace relies on (``bool(s0 == s1)`` while broadcasting, a
branch on a size, the range a symbol may take) is recorded by the ShapeEnv;
:meth:`ShapePlan.guards` prints each one with the sources' own names
(``L['x'].size()[0] == L['y'].size()[0]``, ``2 <= L['x'].size()[0]``) and
makes it a ``dynajit.guards.expression`` guard.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from typing import TYPE_CHECKING, Any

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError, ShapeEnv, free_unbacked_symbols
from torch.utils._sympy.printers import PythonPrinter

import dynajit.guards as guards
from dynajit.capture._frame import Unsupported
from dynajit.fxgraph import symbolic_fake, symbolic_int

if TYPE_CHECKING:
    from dynajit.capture._frame import FrameContext
    from dynajit.capture._symbolic.paths import Path

__all__ = ["DynamicShapeError", "ShapePlan"]

Bounds = tuple[int | None, int | None]


class DynamicShapeError(ValueError):
    """A ``mark_dynamic`` request the program or the input contradicts (a size outside its range, or specialised)."""


@dataclasses.dataclass
class _Symbolic:
    """One symbolic value: its guard source and, for ``mark_dynamic``, its declared range."""

    source: Any
    strict: Bounds | None = None


class _SourcePrinter(PythonPrinter):
    def __init__(self, names: dict[sympy.Symbol, str]) -> None:
        super().__init__()
        self.names = names

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self.names[expr]

    # A guard reads Python numbers, not symbolic ones: their plain functions, from the names guards bind
    # (torch's printer writes ``torch.sym_float``, for guards run on SymInts)
    def _print_ToFloat(self, expr: sympy.Expr) -> str:
        return f"float({self._print(expr.args[0])})"

    def _helper_sqrt(self, expr: sympy.Expr) -> str:
        return f"math.sqrt({self._print(expr)})"


class ShapePlan:
    """Decides what is symbolic in one trace and turns the ShapeEnv's facts into guards."""

    def __init__(self, ctx: FrameContext, fake_mode: FakeTensorMode) -> None:
        self.ctx = ctx
        self.fake_mode = fake_mode
        assert fake_mode.shape_env is not None, "dynamic shapes need a FakeTensorMode with a ShapeEnv"
        self.shape_env: ShapeEnv = fake_mode.shape_env
        self.values: dict[str, _Symbolic] = {}  # by guard-style name (``L['x'].size()[0]``)
        # (source, expected) for sizes and strides TENSOR_MATCH leaves unchecked because the dim is dynamic
        self.layout: list[tuple[Any, Any]] = []
        self.origins: dict[sympy.Symbol, tuple[Path, int | None]] = {}  # how Python reaches each symbol

    # ----------------------------------------------------------------- what is dynamic

    def _tensor_dims(self, value: torch.Tensor, path: Path) -> tuple[dict[int, Bounds | None], dict[int, Bounds]]:
        """The dims of ``value`` to make symbolic (with any bounds), and those ``mark_dynamic`` asked for."""
        from dynajit.capture._symbolic.marks import _registry

        registry = _registry()
        if registry is None or value.is_sparse:
            return {}, {}
        strict = registry.dynamic_dims(value)
        dims: dict[int, Bounds | None] = {}
        if self.ctx.dynamic is True:
            dims = dict.fromkeys(range(value.dim()))
        elif self.ctx.dynamic is None:
            local = _root_local(path)
            hinted = self.ctx.dynamic_hints.get(local, set()) if local is not None else set()
            if local is None:  # reached through an attribute or an item: sizes compared between compiles
                hinted = self.ctx.traced_dynamic_dims(path.name(), tuple(value.shape))
            dims = dict.fromkeys(d for d in hinted if d < value.dim())
        dims.update(dict.fromkeys(registry.weak_dynamic_dims(value)))
        dims.update(strict)
        static = registry.static_dims(value)
        return {d: b for d, b in dims.items() if d not in static}, strict

    def fake_input(self, value: torch.Tensor, path: Path) -> tuple[torch.Tensor, tuple[int, ...]]:
        """The fake example value of input ``value`` and the dims whose sizes (or strides) are symbolic."""
        dims, strict = self._tensor_dims(value, path)
        if dims:
            name = path.name()
            try:
                fake = symbolic_fake(self.fake_mode, value, name, dims, duck=False)
            except ConstraintViolationError as error:
                raise DynamicShapeError(_range_message(name, value, strict, str(error))) from None
            except ValueError:  # not dense in memory: its strides cannot follow its sizes, so it stays static
                return self.fake_mode.from_tensor(value, static_shapes=True), ()
            tensor_source = path.to_source()
            sizes, strides = list(fake.shape), list(fake.stride())
            sized = [d for d in range(value.dim()) if isinstance(sizes[d], torch.SymInt)]
            for dim in sized:
                self.origins.setdefault(_expr(sizes[dim]), (path, dim))
                source = guards.SizeSource(tensor_source, dim)
                self.values.setdefault(source.name(), _Symbolic(source, strict.get(dim)))
            # a size-1 dim's stride that no product of sizes gives is a symbol of its own (symbolic_fake): only
            # the conditions the trace puts on it are guarded
            free = [
                d for d in range(value.dim()) if _is_stride_symbol(strides[d], guards.StrideSource(tensor_source, d))
            ]
            for dim in free:
                source = guards.StrideSource(tensor_source, dim)
                self.values.setdefault(source.name(), _Symbolic(source))
            if sized and value.is_contiguous():
                # TENSOR_MATCH checks contiguity instead of each stride, and contiguity ignores a size-1 dim's
                # stride, which ops read (a convolution lays its output out by it): it is guarded as the fake has it
                for dim in range(value.dim()):
                    if value.shape[dim] == 1 and dim not in free:
                        stride = strides[dim]
                        expected = _expr(stride) if isinstance(stride, torch.SymInt) else stride
                        self.layout.append((guards.StrideSource(tensor_source, dim), expected))
                return fake, tuple(sized)
            strided = [d for d in range(value.dim()) if isinstance(strides[d], torch.SymInt)]
            for dim in strided:
                if dim not in free:
                    self.layout.append((guards.StrideSource(tensor_source, dim), _expr(strides[dim])))
                if dim not in sized:
                    self.layout.append((guards.SizeSource(tensor_source, dim), value.shape[dim]))
            if sized or strided:
                return fake, tuple(sorted({*sized, *strided}))
        return self.fake_mode.from_tensor(value, static_shapes=True), ()

    def wants_symbolic_int(self, value: Any, path: Path | None) -> bool:
        """True when the int ``value`` should be a graph input rather than a constant: an argument under
        ``dynamic=True`` or once seen to change; an int reached through an attribute or an item once an earlier
        compile of this code read another value there."""
        if type(value) is not int or path is None or not _SYMBOLIC_INT_MIN <= value <= _SYMBOLIC_INT_MAX:
            return False  # (a graph's ints are within int64, as its kernels take them: a larger int stays a constant)
        from dynajit.capture.config import config

        if config.specialize_int:
            return False
        local = _root_local(path)
        if local is None:
            # (as TorchDynamo: an int reached from a global, a closure or a default stays a constant)
            return _under_a_local(path) and self.ctx.traced_int_changed(path.name(), value) and _nameable(path)
        return self.ctx.dynamic is True or (self.ctx.dynamic is None and local in self.ctx.dynamic_ints)

    def symbolic_int(self, value: int, path: Path) -> torch.SymInt | int:
        # (named as its source prints it: a guard's code reads it, and a path's name is for people, `layers.0`)
        name = path.to_source().name()
        example = symbolic_int(self.shape_env, value, name)
        if isinstance(example, torch.SymInt):
            # its guards keep it within int64: a value past that misses the entry and compiles as a constant
            self.shape_env.constrain_symbol_range(example.node.expr, _SYMBOLIC_INT_MIN, _SYMBOLIC_INT_MAX)
            self.origins.setdefault(example.node.expr, (path, None))
            self.values.setdefault(name, _Symbolic(path.to_source()))
        return example

    def python_of(self, value: torch.SymInt) -> tuple[Any, list[tuple[Path, int | None]]] | None:
        """A Python function computing ``value`` from the sizes (and ints) it depends on, and where those are."""
        expr = value.node.expr
        symbols = sorted(expr.free_symbols, key=str)
        if not symbols or any(s not in self.origins for s in symbols):
            return None
        printer = _SourcePrinter({s: f"a{i}" for i, s in enumerate(symbols)})
        params = ", ".join(f"a{i}" for i in range(len(symbols)))
        fn = eval(
            f"lambda {params}: int({printer.doprint(expr)})", {"math": math}
        )  # our own printout of the expression
        return fn, [self.origins[s] for s in symbols]

    # ----------------------------------------------------------------- guards

    def _names(self) -> dict[sympy.Symbol, str]:
        names = {}
        for symbol, sources in self.shape_env.var_to_sources.items():
            known = [s.name for s in sources if s.name in self.values]
            if known:
                names[symbol] = known[0]
        return names

    def check_marks(self) -> None:
        """``mark_dynamic`` promised a dimension varies: it is an error if the trace fixed it to one size."""
        env = self.shape_env
        for symbol, sources in env.var_to_sources.items():
            for source in sources:
                info = self.values.get(source.name)
                if info is None or info.strict is None:
                    continue
                fixed = env.replacements.get(symbol)
                vr = env.var_to_range.get(symbol)
                if isinstance(fixed, sympy.Integer) or (vr is not None and vr.is_singleton()):
                    value = int(fixed) if isinstance(fixed, sympy.Integer) else int(vr.lower)  # type: ignore[union-attr]
                    raise DynamicShapeError(
                        f"{source.name} was marked dynamic with mark_dynamic, but the program specialises it to "
                        f"{value} (it relies on that exact size). Remove the mark_dynamic call for this dimension, "
                        "or use maybe_mark_dynamic, which lets the program specialise it."
                    )

    def guards(self) -> list[guards.Guard]:
        """Expression guards for every condition the ShapeEnv recorded, the ranges, and duck-sized equalities."""
        if not self.values and not self.layout:
            return []
        self.check_marks()
        env = self.shape_env
        names = self._names()
        printer = _SourcePrinter(names)
        made: dict[str, guards.Guard] = {}

        def add(expr: Any, description: str) -> None:
            if expr is sympy.false or expr is False:  # torch could not state the condition: nothing can check it
                raise Unsupported(f"a shape condition torch records as False ({description})")
            if expr is sympy.true or isinstance(expr, bool):
                return
            free = expr.free_symbols
            if free_unbacked_symbols(expr):
                return  # a fact about values read from tensor data: no input holds them, the graph checks them
            if not free or not free <= names.keys():
                if free - names.keys():
                    raise Unsupported(f"a shape condition on a value with no source ({expr})")
                return
            code = printer.doprint(expr)
            if code not in made:
                sources = [self.values[names[s]].source for s in sorted(free, key=str)]
                made[code] = guards.expression(code, sources, description, _GUARD_NAMES)

        for symbol, sources in env.var_to_sources.items():
            first = names.get(symbol)
            for source in sources[1:]:
                if first is not None and source.name in self.values and source.name != first:
                    made.setdefault(
                        f"{first} == {source.name}",
                        guards.expression(
                            f"{first} == {source.name}",
                            [self.values[first].source, self.values[source.name].source],
                            "the two sizes were equal when compiled, so they share one symbol",
                        ),
                    )
        for source, expected in self.layout:
            free: set[sympy.Symbol] = getattr(expected, "free_symbols", set())
            code = f"{source.name()} == {printer.doprint(expected) if free else expected}"
            made.setdefault(
                code,
                guards.expression(
                    code,
                    [source, *(self.values[names[s]].source for s in sorted(free, key=str))],
                    "the memory layout the graph was compiled for",
                ),
            )
        for shape_guard in env.guards:
            add(shape_guard.expr, "the compiled graph relies on this shape condition")
        for asserts in env.deferred_runtime_asserts.values():
            for runtime_assert in asserts:  # checks torch defers to run time: checked up front instead
                add(runtime_assert.expr, "an operation requires this shape condition")
        for symbol in names:
            vr = env.var_to_range.get(symbol)
            if vr is None:
                continue
            if isinstance(vr.lower, sympy.Integer) and int(vr.lower) != 0:
                add(sympy.Le(int(vr.lower), symbol, evaluate=False), "the range of a dynamic size")
            if isinstance(vr.upper, sympy.Integer):
                add(sympy.Le(symbol, int(vr.upper), evaluate=False), "the range of a dynamic size")
        return list(made.values())


# The range of an int made symbolic: within int64, and held exactly by a float, since the shape env refines a
# symbol's range through floats when it solves an equation (an int equal to `5 * size` got the bound of
# `(2**63 - 1) / 5` rounded up, then refused the product as out of the int's range: a failed compile).
_SYMBOLIC_INT_MIN, _SYMBOLIC_INT_MAX = -(2**53), 2**53
_GUARD_NAMES = {"math": math}  # what printed shape conditions call (``math.floor``, ``math.inf``)


def _expr(value: Any) -> sympy.Expr:
    """The sympy expression behind a SymInt."""
    return value.node.expr


def _is_stride_symbol(stride: Any, source: guards.StrideSource) -> bool:
    """Whether ``stride`` is the symbol ``symbolic_fake`` made for this stride itself."""
    if not isinstance(stride, torch.SymInt) or not isinstance(_expr(stride), sympy.Symbol):
        return False
    sources = stride.node.shape_env.var_to_sources.get(_expr(stride), [])
    return any(s.name == source.name() for s in sources)


def _under_a_local(path: Path) -> bool:
    """Whether ``path`` reaches its value through attributes and items of one of the frame's locals."""
    from dynajit.capture._symbolic.paths import Attr, Item, Local

    while isinstance(path, (Attr, Item)):
        path = path.base
    return isinstance(path, Local)


def _nameable(path: Path) -> bool:
    """Whether the source of ``path`` prints as Python, as the shape guards over its symbol are written
    (an attribute named ``0``, a ModuleList's child, prints ``.'0'``)."""
    try:
        ast.parse(path.to_source().name(), mode="eval")
    except SyntaxError:
        return False
    return True


def _root_local(path: Path) -> str | None:
    from dynajit.capture._symbolic.paths import Local

    return path.local if isinstance(path, Local) else None


def _range_message(name: str, value: torch.Tensor, strict: dict[int, Bounds], detail: str) -> str:
    for dim, (low, high) in strict.items():
        size = value.shape[dim]
        if (low is not None and size < low) or (high is not None and size > high):
            return (
                f"{name}.size()[{dim}] is {size}, outside the range [{low}, {high}] given to mark_dynamic; "
                "pass a tensor whose size is in range, or widen min/max in the mark_dynamic call"
            )
    return f"{name}: {detail}"
