"""The lowering table: aten op -> function building a TensorValue of the loop-level IR.

Pointwise ops compose loaders (with broadcasting and type promotion); views remap indices;
reductions live in ``_lower_reduce``, ops reading their inputs under a condition (concatenation, padding,
scatters into a slice) in ``_lower_masked``. Ops missing from :data:`LOWERINGS` are called through aten
by the graph lowering (an extern call), never an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from torch.utils._python_dispatch import _disable_current_modes

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._index import Index, flatten, unflatten
from dynajit.inductor_lite._ir import Expr, TensorValue, const, may_overflow, op, opmath_dtype, size_value

__all__ = ["LOWERINGS", "broadcast_loader", "in_dtype", "lowering", "to_value"]

aten = torch.ops.aten
LOWERINGS: dict[Any, Callable[..., Any]] = {}


def lowering(*targets: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a lowering for aten overloads (an overload packet registers all its overloads)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for target in targets:
            if isinstance(target, torch._ops.OpOverloadPacket):
                for name in target.overloads():
                    LOWERINGS.setdefault(getattr(target, name), fn)
            else:
                LOWERINGS[target] = fn
        return fn

    return register


def to_value(ctx: Any, x: Any, dtype: torch.dtype) -> TensorValue:
    """A TensorValue for a tensor or a Python scalar (a 0-d constant)."""
    if isinstance(x, TensorValue):
        return x
    expr = number_expr(x, dtype)
    return TensorValue((), dtype, lambda idx: expr, ctx.device)


def number_expr(x: Any, dtype: torch.dtype) -> Expr:
    """A Python number, or a symbolic one computed per call, as a value of ``dtype``: a symbolic number of a 16-bit
    float type is rounded to it, as eager converts the number (``in_dtype`` rounds a constant while compiling)."""
    if not isinstance(x, sympy.Expr):
        return const(x, dtype)
    if dtype in _HALF_FLOATS:
        return op("cast", dtype, size_value(x, torch.float32))
    return size_value(x, dtype)


def broadcast_loader(value: TensorValue, size: Sequence[int]) -> Callable[[Sequence[Index]], Expr]:
    """Loader of ``value`` broadcast (numpy rules, aligned right) to ``size``."""
    lead = len(size) - len(value.size)
    own = value.size

    # A symbolic size that is not the result's broadcasts when it is 1 at the example inputs: the trace's
    # guards then hold it at 1 (`x[n // 2 + 1:] < x` with n = 3), as broadcasting allows nothing else.
    spread = [
        own[k] == 1 or (not _sym.eq(own[k], size[lead + k]) and _sym.hint(own[k]) == 1 != _sym.hint(size[lead + k]))
        for k in range(len(own))
    ]

    def loader(indices: Sequence[Index]) -> Expr:
        mine = [Index() if spread[k] else indices[lead + k] for k in range(len(own))]
        return value.loader(mine)

    return loader


def make_pointwise(
    ctx: Any,
    inputs: Sequence[Any],
    fn: Callable[..., Expr],
    *,
    compute: torch.dtype | None = None,
    out_dtype: torch.dtype | None = None,
    numbers: torch.dtype | None = None,
) -> TensorValue:
    """Apply ``fn`` elementwise to broadcast ``inputs`` cast to ``compute``; cast the result to the node's dtype.

    ``numbers``: the dtype whose nearest value a Python number among ``inputs`` takes first (see ``in_dtype``).
    """
    val = ctx.current_val()
    size = _sym.shape_of(val)
    out_dtype = out_dtype or val.dtype
    compute = compute or out_dtype
    # (a symbolic number takes ``numbers``' nearest value per call: ``to_value`` in that type)
    values = [
        to_value(ctx, x, numbers) if _symbolic_in_half(x, numbers) else to_value(ctx, in_dtype(x, numbers), compute)
        for x in inputs
    ]
    loaders = [broadcast_loader(v, size) for v in values]

    def loader(indices: Sequence[Index]) -> Expr:
        args = [op("cast", compute, ld(indices)) for ld in loaders]
        return op("cast", out_dtype, fn(*args))

    cost = 1 + sum(v.cost for v in values if v.buffer is None)
    return TensorValue(size, out_dtype, loader, ctx.device, cost=cost)


_HALF_FLOATS = (torch.float16, torch.bfloat16)


def _symbolic_in_half(number: Any, dtype: torch.dtype | None) -> bool:
    return isinstance(number, sympy.Expr) and dtype in _HALF_FLOATS


def in_dtype(number: Any, dtype: torch.dtype | None) -> Any:
    """``number`` as ``dtype``'s nearest value, where that is a 16-bit float; anything else as it is.

    Eager's ``add``, ``sub``, ``remainder``, ``fmod``, ``pow``, ``atan2``, ``hypot`` and comparisons convert a number
    operand to the tensor's type before computing in float: ``half_x == 0.1`` compares with 0.0999755859375 and
    ``half_x % 1e-8`` divides by 0. (``mul`` and the divisions read the number in float: those pass no
    ``numbers``.) A number an op writes out (``where``, ``masked_fill``, a clamp bound, a fill) is its output's
    type too: a later op of the same loop reads it rounded, as it reads eager's stored result.
    """
    if dtype not in _HALF_FLOATS or type(number) not in (int, float):
        return number
    if isinstance(number, float) and not math.isfinite(number):
        return number
    with _disable_current_modes():  # (a plain number, also while a decomposition is traced)
        return float(torch.tensor(number, dtype=torch.float64).to(dtype))


def _promoted(ctx: Any) -> torch.dtype:
    """The type-promotion result of the current node's first two arguments."""
    node = ctx.current_node
    vals = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in node.args[:2]]
    return torch.result_type(*vals)


# Rounding an integer keeps it (eager copies it): computed in double, an int64 above 2**53 would lose digits.
_INTEGERS_KEPT = frozenset({"floor", "ceil", "round", "trunc"})


def _unary(name: str) -> Callable[..., TensorValue]:
    # Exactly one tensor argument: an overload taking more (``round(x, decimals=1)``) has its own lowering or
    # none, never this one, which would drop the rest.
    def lower(ctx: Any, x: TensorValue) -> TensorValue:
        if name in _INTEGERS_KEPT and not x.dtype.is_floating_point:
            return make_pointwise(ctx, [x], lambda a: a)
        return make_pointwise(ctx, [x], lambda a: op(name, a.dtype, a))

    return lower


def _binary(name: str) -> Callable[..., TensorValue]:
    def lower(ctx: Any, a: Any, b: Any) -> TensorValue:
        if name in ("fmod", "remainder") and _integer_division_by_tensor(ctx, b):
            return ctx.fallback("an integer divisor tensor (eager raises ZeroDivisionError for a zero)")
        numbers = ctx.current_val().dtype if name in _NUMBERS_IN_THE_TENSORS_TYPE else None
        return make_pointwise(ctx, [a, b], lambda x, y: op(name, x.dtype, x, y), numbers=numbers)

    return lower


def _integer_division_by_tensor(ctx: Any, divisor: Any) -> bool:
    """Whether the current node divides integers by a tensor: eager raises ZeroDivisionError if an element is 0.

    A kernel would trap (SIGFPE) or make a value up; the op runs through aten, which raises as eager does.
    A number divisor was checked when the graph was traced (``x // 0`` raises there).
    """
    dtype = ctx.current_val().dtype
    return isinstance(divisor, TensorValue) and not (dtype.is_floating_point or dtype.is_complex)


# Binary ops whose eager kernels convert a number operand to the tensor's type (see ``in_dtype``).
_NUMBERS_IN_THE_TENSORS_TYPE = frozenset({"pow", "atan2", "fmod", "remainder", "hypot"})


def _compare(name: str) -> Callable[..., TensorValue]:
    def lower(ctx: Any, a: Any, b: Any) -> TensorValue:
        compute = _promoted(ctx)
        return make_pointwise(ctx, [a, b], lambda x, y: op(name, torch.bool, x, y), compute=compute, numbers=compute)

    return lower


def _logical(name: str) -> Callable[..., TensorValue]:
    def lower(ctx: Any, a: Any, b: Any = None) -> TensorValue:
        inputs = [a] if b is None else [a, b]
        return make_pointwise(ctx, inputs, lambda *xs: op(name, torch.bool, *xs), compute=torch.bool)

    return lower


def _predicate(name: str) -> Callable[..., TensorValue]:
    def lower(ctx: Any, x: TensorValue) -> TensorValue:
        return make_pointwise(ctx, [x], lambda a: op(name, torch.bool, a), compute=x.dtype)

    return lower


_UNARY = """neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh asinh
acosh atanh sigmoid erf erfc floor ceil round trunc sign reciprocal relu bitwise_not lgamma frac""".split()
_BINARY = {
    "mul": "mul",
    "maximum": "maximum",
    "minimum": "minimum",
    "pow": "pow",
    "atan2": "atan2",
    "fmod": "fmod",
    "remainder": "remainder",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "copysign": "copysign",
    "hypot": "hypot",
    "bitwise_left_shift": "lshift",
    "bitwise_right_shift": "rshift",
}
for _name in _UNARY:
    lowering(getattr(aten, _name).default)(_unary(_name))

# Eager takes a float32, float64 or bfloat16 tensor to these powers of a number by other functions than pow
# (ATen's pow_tensor_scalar_kernel), whose special values differ from pow's: sqrt(-0.0) is -0.0 and sqrt(-inf)
# NaN, where pow(-0.0, 0.5) is 0.0 and pow(-inf, 0.5) inf. float16, and an exponent held by a tensor (even a 0-d
# one), go through pow itself.
_POWERS_BY_OTHER_FUNCTIONS = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}


@lowering(aten.pow.Tensor_Scalar)
def _pow_of_a_number(ctx: Any, x: Any, exponent: Any) -> TensorValue:
    dtype = ctx.current_val().dtype
    function = None
    if dtype in (torch.float32, torch.float64, torch.bfloat16) and type(exponent) in (int, float):
        function = _POWERS_BY_OTHER_FUNCTIONS.get(exponent)
    if function is None:
        return _binary("pow")(ctx, x, exponent)
    return make_pointwise(ctx, [x], lambda a: op(function, a.dtype, a))


for _aten_name, _name in _BINARY.items():
    lowering(getattr(aten, _aten_name))(_binary(_name))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    lowering(getattr(aten, _name))(_compare(_name))
for _name in ("logical_and", "logical_or", "logical_xor", "logical_not"):
    lowering(getattr(aten, _name))(_logical(_name))
for _name in ("isnan", "isinf", "signbit"):
    lowering(getattr(aten, _name))(_predicate(_name))


@lowering(aten.add, aten.sub)
def _add_sub(ctx: Any, a: Any, b: Any, *, alpha: Any = 1) -> TensorValue:
    name = "add" if ctx.current_node.target in (aten.add.Tensor, aten.add.Scalar) else "sub"
    alpha = in_dtype(alpha, ctx.current_val().dtype)  # (eager's alpha is a number of the tensor's type too)

    def fn(x: Expr, y: Expr) -> Expr:
        if alpha != 1:
            y = op("mul", y.dtype, y, const(alpha, y.dtype))
        return op(name, x.dtype, x, y)

    return make_pointwise(ctx, [a, b], fn, numbers=ctx.current_val().dtype)


@lowering(aten.gelu)
def _gelu(ctx: Any, x: TensorValue, *, approximate: str = "none") -> TensorValue:
    compute = opmath_dtype(x.dtype)  # rounded once to a 16-bit result, as eager does
    if approximate == "none":
        return make_pointwise(ctx, [x], lambda a: op("gelu", compute, a), compute=compute)

    def tanh_form(a: Expr) -> Expr:
        cube = op("mul", compute, op("mul", compute, a, a), a)
        inner = op("add", compute, a, op("mul", compute, const(0.044715, compute), cube))
        tanh = op("tanh", compute, op("mul", compute, const(math.sqrt(2 / math.pi), compute), inner))
        half = op("mul", compute, a, const(0.5, compute))
        return op("mul", compute, half, op("add", compute, const(1.0, compute), tanh))

    return make_pointwise(ctx, [x], tanh_form, compute=compute)


@lowering(aten.rsub)
def _rsub(ctx: Any, a: Any, b: Any, *, alpha: Any = 1) -> TensorValue:
    return make_pointwise(
        ctx, [a, b], lambda x, y: op("sub", x.dtype, y, op("mul", x.dtype, x, const(alpha, x.dtype))),
        numbers=ctx.current_val().dtype,
    )  # fmt: skip


@lowering(aten.div)
def _div(ctx: Any, a: Any, b: Any, *, rounding_mode: str | None = None) -> TensorValue:
    val = ctx.current_val()
    if rounding_mode is None:
        return make_pointwise(ctx, [a, b], lambda x, y: op("truediv", x.dtype, x, y))
    if _integer_division_by_tensor(ctx, b):
        return ctx.fallback("an integer divisor tensor (eager raises ZeroDivisionError for a zero)")
    name = "floordiv" if rounding_mode == "floor" else "truncdiv"
    return make_pointwise(ctx, [a, b], lambda x, y: op(name, x.dtype, x, y), compute=val.dtype)


@lowering(aten.where)
def _where(ctx: Any, cond: Any, a: Any, b: Any) -> TensorValue:
    val = ctx.current_val()
    dt = val.dtype
    size = _sym.shape_of(val)
    c = broadcast_loader(to_value(ctx, cond, torch.bool), size)
    la = broadcast_loader(to_value(ctx, in_dtype(a, dt), dt), size)
    lb = broadcast_loader(to_value(ctx, in_dtype(b, dt), dt), size)

    def loader(idx: Sequence[Index]) -> Expr:
        return op("where", dt, op("cast", torch.bool, c(idx)), op("cast", dt, la(idx)), op("cast", dt, lb(idx)))

    return TensorValue(size, dt, loader, ctx.device, cost=3)


@lowering(aten.masked_fill)
def _masked_fill(ctx: Any, x: TensorValue, mask: TensorValue, value: Any) -> Any:
    if isinstance(value, TensorValue) and may_overflow(value.dtype, x.dtype):
        # Eager reads the value and raises when it does not fit: aten's kernel checks it at every call.
        return ctx.fallback(f"a {value.dtype} fill value may not fit {x.dtype}")
    return make_pointwise(
        ctx, [mask, x, value], lambda m, a, v: op("where", a.dtype, op("cast", torch.bool, m), v, a), numbers=x.dtype
    )


@lowering(aten.clamp, aten.clamp_min, aten.clamp_max)
def _clamp(ctx: Any, x: TensorValue, lo: Any = None, hi: Any = None) -> TensorValue:
    target = ctx.current_node.target
    if target in (aten.clamp_max.default, aten.clamp_max.Tensor):
        lo, hi = None, lo
    inputs = [x] + [b for b in (lo, hi) if b is not None]

    def fn(a: Expr, *bounds: Expr) -> Expr:
        it = iter(bounds)
        if lo is not None:
            a = op("clamp_min", a.dtype, a, next(it))
        if hi is not None:
            a = op("clamp_max", a.dtype, a, next(it))
        return a

    return make_pointwise(ctx, inputs, fn, numbers=ctx.current_val().dtype)


@lowering(aten._to_copy, aten.clone, aten.alias, aten.lift_fresh_copy, aten.contiguous, aten._assert_tensor_metadata)
def _copy(ctx: Any, x: TensorValue, *_: Any, **kwargs: Any) -> Any:
    if ctx.current_node.target is aten._assert_tensor_metadata.default:
        return None
    val = ctx.current_val()
    if val.device != x.device:
        return ctx.fallback()
    return make_pointwise(ctx, [x], lambda a: a, compute=x.dtype)


@lowering(aten.copy)
def _copy_into(ctx: Any, dst: TensorValue, src: Any, non_blocking: bool = False) -> TensorValue:
    # ``x.copy_(3)``: eager wraps the number in a 0-dim tensor of its own type (double for a float), then casts.
    compute = src.dtype if isinstance(src, TensorValue) else _NUMBER_DTYPES[type(src)]
    return make_pointwise(ctx, [src], lambda a: a, compute=compute)


_NUMBER_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64}


@lowering(aten.fill, aten.full_like, aten.zeros_like, aten.ones_like, aten.empty_like)
def _fill_like(ctx: Any, x: TensorValue, value: Any = 0, **_: Any) -> TensorValue:
    target = ctx.current_node.target
    value = {aten.zeros_like.default: 0, aten.ones_like.default: 1, aten.empty_like.default: 0}.get(target, value)
    return _constant_tensor(ctx, value)


@lowering(
    aten.full, aten.scalar_tensor, aten.zeros, aten.ones, aten.empty, aten.new_zeros, aten.new_ones, aten.new_full
)
def _full(ctx: Any, *args: Any, **_: Any) -> TensorValue:
    target = ctx.current_node.target
    if target in (aten.zeros.default, aten.new_zeros.default):
        value: Any = 0
    elif target in (aten.ones.default, aten.new_ones.default):
        value = 1
    elif target is aten.scalar_tensor.default:
        value = args[0]
    elif target in (aten.empty.memory_format,):
        value = 0
    else:
        value = args[-1]
    return _constant_tensor(ctx, value)


def _constant_tensor(ctx: Any, value: Any) -> TensorValue:
    val = ctx.current_val()
    if isinstance(value, TensorValue):
        return make_pointwise(ctx, [value], lambda a: a, compute=value.dtype)
    if isinstance(value, sympy.Expr) and not _always_fits(value, val.dtype):
        # Eager converts the number with a check ("value cannot be converted to type int without overflow"), which
        # a symbolic one defers to each call: aten's kernel makes it there, where code generation would wrap.
        return ctx.fallback(f"a symbolic number may not fit {val.dtype}")
    expr = number_expr(value if isinstance(value, sympy.Expr) else in_dtype(value, val.dtype), val.dtype)
    return TensorValue(_sym.shape_of(val), val.dtype, lambda idx: expr, ctx.device)


def _always_fits(value: sympy.Expr, dtype: torch.dtype) -> bool:
    """Whether every value a symbolic int (an int64) or float (a double) may take fits ``dtype``."""
    if not may_overflow(torch.int64 if value.is_integer else torch.float64, dtype):
        return True
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return _sym.provably_le(int(info.min), value) and _sym.provably_le(value, int(info.max))


@lowering(aten.arange.start_step, aten.arange.default, aten.arange.start)
def _arange(ctx: Any, *args: Any, **_: Any) -> TensorValue:
    val = ctx.current_val()
    numbers = [a for a in args if isinstance(a, (int, float, sympy.Expr))]
    start, step = (0, 1) if len(numbers) == 1 else (numbers[0], numbers[2] if len(numbers) > 2 else 1)
    dt = val.dtype
    if _rounds(start, step, val.shape[0], dt):
        # Eager's kernel rounds lane by lane from the start of each vector of its CPU's width (and of each thread's
        # range): no formula of the index alone gives its values (arange(0, 1, 0.1)[9] was an ulp off, and 975
        # elements of a bfloat16 arange(0, 8300)), nor an integer arange's of fractional bounds. Where every value
        # is an integer the type holds, none rounds.
        return ctx.fallback("an arange whose values round: eager's kernel rounds them vector lane by lane")
    # (every value an integer ``dt`` holds: computed in ``dt`` itself, exactly)

    def number(value: Any) -> Expr:
        return size_value(value, dt) if isinstance(value, sympy.Expr) else const(value, dt)

    def loader(idx: Sequence[Index]) -> Expr:
        i = op("cast", dt, Expr("index", (idx[0],), torch.int64))
        return op("add", dt, op("mul", dt, i, number(step)), number(start))

    return TensorValue(_sym.shape_of(val), dt, loader, ctx.device)


# Significand bits of each floating type: the integers up to 2 ** bits are exactly its values.
_SIGNIFICAND_BITS = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}


def _rounds(start: Any, step: Any, length: Any, dtype: torch.dtype) -> bool:
    """Whether ``start + k * step`` for ``k < length`` may take a value ``dtype`` does not hold: a fractional bound,
    or in a floating type a value past the integers it holds exactly (or a length not known)."""

    def integral(n: Any) -> bool:
        if isinstance(n, sympy.Expr):
            return bool(n.is_integer)
        return isinstance(n, int) or (isinstance(n, float) and n.is_integer())

    if not (integral(start) and integral(step)):
        return True
    if not dtype.is_floating_point:
        return False
    if not all(isinstance(n, (int, float)) for n in (start, step, length)):
        return True
    largest = max(abs(start), abs(start + (max(int(length), 1) - 1) * step))
    return largest > 2 ** _SIGNIFICAND_BITS.get(dtype, 0)


@lowering(torch.ops.prims.iota.default)
def _iota(ctx: Any, length: int, *, start: int = 0, step: int = 1, **_: Any) -> TensorValue:
    val = ctx.current_val()

    def loader(idx: Sequence[Index]) -> Expr:
        return op("cast", val.dtype, Expr("index", (idx[0] * step + start,), torch.int64))

    return TensorValue(_sym.shape_of(val), val.dtype, loader, ctx.device)


# ---------------------------------------------------------------- views: index arithmetic


def _view_of(ctx: Any, x: TensorValue, remap: Callable[[Sequence[Index]], Sequence[Index]]) -> TensorValue:
    size = _sym.shape_of(ctx.current_val())
    return TensorValue(size, x.dtype, lambda idx: x.loader(remap(idx)), x.device, buffer=None, cost=x.cost)


@lowering(aten.view, aten._unsafe_view, aten.reshape, aten.view.dtype)
def _reshape(ctx: Any, x: TensorValue, *_: Any) -> TensorValue:
    val = ctx.current_val()
    if val.dtype != x.dtype:
        return ctx.fallback()
    old, new = x.size, _sym.shape_of(val)

    def remap(idx: Sequence[Index]) -> list[Index]:
        return unflatten(flatten(idx, new), old)

    return _view_of(ctx, x, remap)


@lowering(aten.permute)
def _permute(ctx: Any, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    dims = [d % max(len(x.size), 1) for d in dims]

    def remap(idx: Sequence[Index]) -> list[Index]:
        out = [Index()] * len(dims)
        for new_pos, old_pos in enumerate(dims):
            out[old_pos] = idx[new_pos]
        return out

    return _view_of(ctx, x, remap)


@lowering(aten.t, aten.transpose.int)
def _transpose(ctx: Any, x: TensorValue, d0: int = 0, d1: int = 1) -> TensorValue:
    if len(x.size) < 2:
        return _view_of(ctx, x, lambda idx: list(idx))
    n = len(x.size)
    d0, d1 = d0 % n, d1 % n

    def remap(idx: Sequence[Index]) -> list[Index]:
        out = list(idx)
        out[d0], out[d1] = idx[d1], idx[d0]
        return out

    return _view_of(ctx, x, remap)


@lowering(aten.expand)
def _expand(ctx: Any, x: TensorValue, *_: Any, **__: Any) -> TensorValue:
    size = _sym.shape_of(ctx.current_val())
    loader = broadcast_loader(x, size)
    return TensorValue(size, x.dtype, loader, x.device, cost=x.cost)


@lowering(aten.unsqueeze, aten.squeeze)
def _squeeze_unsqueeze(ctx: Any, x: TensorValue, *_: Any) -> TensorValue:
    # Both only add or drop size-1 dims: match the non-1 dims in order. A symbolic size may be 1 (a guard can
    # say so where the expression does not): unless it provably is not, which dims match is unknown here.
    new = _sym.shape_of(ctx.current_val())
    for size in (*x.size, *new):
        if not isinstance(size, int) and not (_sym.provably_le(2, size) or _sym.provably_le(size, 0)):
            raise _sym.Unsupported(f"squeeze or unsqueeze next to a size {size} that may be 1")
    old_real = [k for k, s in enumerate(x.size) if s != 1]
    new_real = [k for k, s in enumerate(new) if s != 1]

    def remap(idx: Sequence[Index]) -> list[Index]:
        out = [Index()] * len(x.size)
        for o, n in zip(old_real, new_real):
            out[o] = idx[n]
        return out

    return _view_of(ctx, x, remap)


@lowering(aten.slice.Tensor)
def _slice(ctx: Any, x: TensorValue, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> TensorValue:
    dim = dim % len(x.size)
    length = x.size[dim]
    start = 0 if start is None else _sym.norm(start)
    if isinstance(start, int) and isinstance(length, int):
        start = max(0, min(length, start + length if start < 0 else start))
    elif _sym.provably_le(0, start):
        start = _sym.minimum(start, length)
    else:
        raise _sym.Unsupported(f"slice start {start} may be negative")

    def remap(idx: Sequence[Index]) -> list[Index]:
        out = list(idx)
        out[dim] = idx[dim] * step + start
        return out

    return _view_of(ctx, x, remap)


@lowering(aten.split_with_sizes, aten.split.Tensor)
def _split(ctx: Any, x: TensorValue, sizes: Any, dim: int = 0) -> tuple[TensorValue, ...]:
    dim = dim % len(x.size)
    if isinstance(sizes, int):
        if not isinstance(x.size[dim], int):
            raise _sym.Unsupported(f"split of a symbolic dimension {x.size[dim]} into chunks of {sizes}")
        sizes = [min(sizes, x.size[dim] - start) for start in range(0, x.size[dim], sizes)] or [0]
    parts = []
    start = 0
    for length in sizes:
        size = tuple(length if d == dim else s for d, s in enumerate(x.size))

        def part_loader(idx: Sequence[Index], start: int = start) -> Expr:
            shifted = list(idx)
            shifted[dim] = idx[dim] + start
            return x.loader(shifted)

        parts.append(TensorValue(size, x.dtype, part_loader, x.device, cost=x.cost))
        start += length
    return tuple(parts)


@lowering(aten.select.int)
def _select(ctx: Any, x: TensorValue, dim: int, index: int) -> TensorValue:
    dim = dim % len(x.size)
    if isinstance(index, int) and isinstance(x.size[dim], int):
        index = index % x.size[dim] if x.size[dim] else index
    elif isinstance(index, int) and index < 0:
        index = _sym.norm(index + x.size[dim])
    elif not _sym.provably_le(0, index):
        raise _sym.Unsupported(f"select index {index} may be negative")

    def remap(idx: Sequence[Index]) -> list[Index]:
        return [*idx[:dim], Index.of(index), *idx[dim:]]

    return _view_of(ctx, x, remap)


@lowering(aten.as_strided, aten.diagonal)
def _as_strided(ctx: Any, x: TensorValue, *_: Any, **__: Any) -> TensorValue:
    # Views defined by strides over the base storage: read the base's storage through the node's strides.
    val = ctx.current_val()
    base = ctx.strided_view(x)
    base_val = ctx.current_node.args[0].meta["val"]
    if base is None or base[1] != _sym.strides_of(base_val):
        return ctx.fallback()
    buf, _, offset = base
    offset = _sym.norm(offset + _sym.norm(val.storage_offset()) - _sym.norm(base_val.storage_offset()))
    return ctx.storage_value(buf, _sym.strides_of(val), offset, _sym.shape_of(val))
