"""The loop-level IR: value expressions over index variables, buffers, and lazily computed tensors.

A lowered tensor is a :class:`TensorValue`: a size, a dtype and a *loader* mapping a multi-index
(one :class:`Index` per dimension) to an :class:`Expr`. Pointwise ops compose loaders, so a chain of
pointwise ops is one expression until something *realizes* it into a :class:`ComputedBuffer`.
Reductions are always realized; extern calls (aten) produce :class:`ExternBuffer`.

Expression ops are the names the code generators render, plus four structural ones: ``const``,
``load`` (a buffer element), ``index`` (an index value) and ``masked`` (``masked(cond, value)``:
``value`` where ``cond`` holds, else 0, with ``value``'s loads made only where ``cond`` holds, so a
value may read a buffer at indices that are valid only under ``cond``, as a concatenation's
pieces do).

An *indirect* load (:func:`indirect_load`: an embedding's row, chosen by a value read from another
tensor) is a ``load`` with three more arguments: the :class:`Var` standing in its index for the value,
the value (an int64 expression), and the error eager raises for a value outside ``[0, var.size)``.
To every analysis of indices the stand-in is a variable that is no loop's, so it is never taken for
a plain strided read; the C++ generator checks the value and reads through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._index import Index, Var

__all__ = [
    "Buffer",
    "ComputedBuffer",
    "ConstantBuffer",
    "Expr",
    "ExternBuffer",
    "IndexFault",
    "InputBuffer",
    "TensorValue",
    "const",
    "contiguous_strides",
    "indirect_load",
    "load",
    "masked",
    "may_overflow",
    "op",
    "opmath_dtype",
    "size_value",
]

Loader = Callable[[Sequence[Index]], "Expr"]


@dataclass(frozen=True)
class Expr:
    """One value computed per index point. ``dtype`` is the logical (storage) dtype of the value."""

    op: str
    args: tuple[Any, ...]
    dtype: torch.dtype

    def size(self) -> int:
        return 1 + sum(a.size() for a in self.args if isinstance(a, Expr))


def opmath_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype eager computes ``dtype`` values in: float32 for 16-bit floats, the dtype itself otherwise."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def op(name: str, dtype: torch.dtype, *args: Any) -> Expr:
    """Build an expression node, folding casts that change nothing."""
    if name == "cast" and args[0].dtype == dtype:
        return args[0]
    return Expr(name, tuple(args), dtype)


def const(value: Any, dtype: torch.dtype) -> Expr:
    if dtype == torch.bool:
        value = bool(value)
    elif not dtype.is_floating_point and not dtype.is_complex and not (isinstance(value, float) and math.isinf(value)):
        value = int(value)
    else:
        value = float(value)
        if value == 0.0 and math.copysign(1.0, value) < 0:
            value = NegativeZero()
    return Expr("const", (value,), dtype)


class NegativeZero(float):
    """-0.0 as a constant: equal to -0.0 only. A float -0.0 equals 0.0 and hashes alike, and the kernels'
    common-subexpression reuse would compute ``x * -0.0`` as the ``x * 0.0`` beside it (a zero of the wrong
    sign, which ``1 / v`` turns into the wrong infinity)."""

    def __new__(cls) -> NegativeZero:
        return super().__new__(cls, -0.0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and float(other) == 0.0 and math.copysign(1.0, other) < 0

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((NegativeZero, 0.0))

    def __reduce__(self) -> tuple[type[NegativeZero], tuple[()]]:
        return NegativeZero, ()


def size_value(value: Any, dtype: torch.dtype) -> Expr:
    """A size (an int, or a sympy expression evaluated from the kernel's shape arguments) as a value."""
    value = _sym.norm(value)
    if isinstance(value, int):
        return const(value, dtype)
    return Expr("size", (value,), dtype)


def load(name: str, index: Index, dtype: torch.dtype) -> Expr:
    return Expr("load", (name, index), dtype)


@dataclass(frozen=True)
class IndexFault:
    """The error eager raises for an index read from a tensor that is out of range: the exception's name and
    its message, a C format given the value (``%lld``) and the size it indexes (a second ``%lld``)."""

    exception: str  # "IndexError" or "RuntimeError"
    message: str


def indirect_load(read: Expr, slot: Var, value: Expr, fault: IndexFault) -> Expr:
    """``read`` (a plain load whose index uses ``slot``) made at ``slot = value``, once ``value`` is checked to lie
    in ``[0, slot.size)``."""
    if read.op != "load" or len(read.args) != 2:
        raise ValueError(f"an indirect load wraps a plain load, not {read.op!r}")
    if value.dtype != torch.int64:
        value = op("cast", torch.int64, value)
    return Expr("load", (*read.args, slot, value, fault), read.dtype)


def masked(cond: Expr, value: Expr) -> Expr:
    """``value`` where ``cond`` holds, else 0; ``value``'s loads are made only where ``cond`` holds."""
    return Expr("masked", (cond, value), value.dtype)


def contiguous_strides(size: Sequence[Any]) -> tuple[Any, ...]:
    strides = []
    acc: Any = 1
    for s in reversed(size):
        strides.append(acc)
        acc = _sym.norm(acc * _sym.maximum(s, 1))
    return tuple(reversed(strides))


@dataclass(eq=False)
class Buffer:
    """Storage with a fixed layout that kernels read and write."""

    name: str
    dtype: torch.dtype
    size: tuple[Any, ...]  # ints, or sympy expressions over shape symbols
    stride: tuple[Any, ...]
    device: torch.device

    def numel(self) -> Any:
        return _sym.prod(self.size)

    def store_index(self, indices: Sequence[Index]) -> Index:
        out = Index()
        for idx, st in zip(indices, self.stride):
            out = out + idx * st
        return out


@dataclass(eq=False)
class InputBuffer(Buffer):
    position: int = 0


@dataclass(eq=False)
class ConstantBuffer(Buffer):
    value: torch.Tensor | None = None


@dataclass(eq=False)
class ComputedBuffer(Buffer):
    """A buffer written by a kernel: pointwise over ``size``, or a reduction over ``reduction_ranges``.

    ``fn(index)`` gives the value (pointwise); ``fn(index, rindex)`` gives the reduced value and
    ``reduction_type`` names the combine (sum, prod, max, min, argmax, argmin, any, all).
    """

    fn: Any = None  # Callable[..., Expr]: index (and rindex) -> value
    reduction_ranges: tuple[Any, ...] = ()
    reduction_type: str = ""
    reads: set[str] = field(default_factory=set)

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduction_type)


@dataclass(eq=False)
class ExternBuffer(Buffer):
    """The result of calling an aten op from the wrapper; ``args`` hold TensorValues and constants."""

    target: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    tuple_index: int | None = None
    reads: set[str] = field(default_factory=set)


@dataclass(eq=False)
class TensorValue:
    """A lowered tensor: lazily a loader, or backed by a buffer (``buffer`` set)."""

    size: tuple[Any, ...]
    dtype: torch.dtype
    loader: Loader
    device: torch.device
    buffer: Buffer | None = None
    cost: int = 0

    def numel(self) -> Any:
        return _sym.prod(self.size)

    def fresh_vars(self, prefix: str = "i") -> list[Var]:
        return [Var(f"{prefix}{k}", s) for k, s in enumerate(self.size)]


def _range(dtype: torch.dtype) -> tuple[float, float]:
    if dtype is torch.bool:
        return 0.0, 1.0
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return float(info.min), float(info.max)


def may_overflow(source: torch.dtype, target: torch.dtype) -> bool:
    """Whether a value of ``source`` may lie out of ``target``'s range: eager's conversion of a tensor's one value
    into a scalar of another type raises then ("value cannot be converted to type uint8_t without overflow")."""
    if source.is_complex or target.is_complex:
        return source.is_complex and not target.is_complex
    if target is torch.bool or source is torch.bool:
        return False
    low, high = _range(source)
    target_low, target_high = _range(target)
    if not target.is_floating_point and not target.is_signed and source.is_signed and not source.is_floating_point:
        target_low = -target_high  # a negative integer wraps into an unsigned type, as far as its magnitude fits
    return low < target_low or high > target_high
