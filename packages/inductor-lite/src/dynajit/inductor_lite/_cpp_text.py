"""How inductor-lite's C++ spells values: dtypes' storage and compute types, literals, reductions' starting values
and combines, and the scope of the named temporaries one block of a kernel writes."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._index import Index
from dynajit.inductor_lite._ir import Expr
from dynajit.inductor_lite._scheduler import Placed

__all__ = [
    "LANES",
    "REDUCE",
    "ROUND",
    "SIMD_COMBINE",
    "SIMD_REDUCE",
    "Scope",
    "compute_ctype",
    "extreme",
    "index_text",
    "initial_value",
    "literal",
    "size_text",
    "storage_ctype",
]

_STORAGE = {
    torch.float32: "float",
    torch.float64: "double",
    torch.float16: "_Float16",
    torch.bfloat16: "uint16_t",
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    torch.int16: "int16_t",
    torch.int32: "int32_t",
    torch.int64: "int64_t",
    torch.bool: "bool",
}


def storage_ctype(dtype: torch.dtype) -> str:
    try:
        return _STORAGE[dtype]
    except KeyError:
        raise NotImplementedError(f"inductor-lite C++ codegen: dtype {dtype} is not supported") from None


def compute_ctype(dtype: torch.dtype) -> str:
    return "float" if dtype in (torch.float16, torch.bfloat16) else storage_ctype(dtype)


# reduction type -> (initial value template, combine template over accumulator {a} and value {v}).
REDUCE = {
    "sum": ("0", "{a} + {v}"),
    "prod": ("1", "{a} * {v}"),
    "max": ("LOWEST", "dj_max<{T}>({a}, {v})"),
    "min": ("HIGHEST", "dj_min<{T}>({a}, {v})"),
    "any": ("false", "{a} || {v}"),
    "all": ("true", "{a} && {v}"),
}
LANES = 16
# reduction type -> OpenMP reduction identifier and the combine the loop body writes (NaNs tracked apart).
SIMD_REDUCE = {"sum": "+", "prod": "*", "max": "max", "min": "min", "any": "||", "all": "&&"}
SIMD_COMBINE = {
    "sum": "{a} + {v}",
    "prod": "{a} * {v}",
    "max": "({a} > {v} ? {a} : {v})",
    "min": "({a} < {v} ? {a} : {v})",
    "any": "{a} || {v}",
    "all": "{a} && {v}",
}
ROUND = {torch.float16: "dj_round_f16", torch.bfloat16: "dj_round_bf16"}


def index_text(index: Index) -> str:
    # Index arithmetic is non-negative: C++'s truncating division is floor division.
    return index.source("/", _sym.c_text)


size_text = _sym.c_text


def literal(value: Any, dtype: torch.dtype) -> str:
    ctype = compute_ctype(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return f"dj_nan<{ctype}>()"
        if math.isinf(value):
            return f"{'-' if value < 0 else ''}dj_inf<{ctype}>()"
        return f"{ctype}({value!r})"
    # a Python int past 64 bits wraps as eager's conversion wraps it (``x < 2**63`` compares with -2**63)
    value = (int(value) + 2**63) % 2**64 - 2**63
    if value == -(2**63):
        return f"{ctype}(INT64_MIN)" if ctype != "int64_t" else "INT64_MIN"
    return f"{ctype}({value}LL)" if ctype != "int64_t" else f"INT64_C({value})"


def extreme(which: str, dtype: torch.dtype) -> str:
    ctype = compute_ctype(dtype)
    if dtype.is_floating_point:
        return f"{'-' if which == 'LOWEST' else ''}dj_inf<{ctype}>()"
    if dtype == torch.bool:
        return "false" if which == "LOWEST" else "true"
    if which == "LOWEST" and not dtype.is_signed:
        return f"{ctype}(0)"
    return f"{ctype[:-2].upper()}_{'MIN' if which == 'LOWEST' else 'MAX'}"  # <cstdint>'s INT32_MIN, UINT8_MAX...


def initial_value(p: Placed) -> str:
    """The C++ value a reduction's accumulator starts from."""
    init = REDUCE[p.buf.reduction_type][0]
    return extreme(init, p.expr.dtype) if init in ("LOWEST", "HIGHEST") else init


class Scope:
    """Named temporaries of one C++ block, with common-subexpression reuse through parent blocks."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.cse: dict[Expr, str] = {}
        self.locals: dict[str, str] = {}  # buffer name -> variable holding the element this block owns

    def _chain(self) -> Iterator[Scope]:
        scope: Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def lookup(self, expr: Expr) -> str | None:
        return next((scope.cse[expr] for scope in self._chain() if expr in scope.cse), None)

    def local(self, name: str) -> str | None:
        return next((scope.locals[name] for scope in self._chain() if name in scope.locals), None)
