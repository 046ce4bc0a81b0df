"""NumPy calls as graph nodes: each runs the same-named ``torch._numpy`` function on its tensor arguments.

An ndarray lives in the graph as the tensor holding its data. A NumPy call
becomes one ``call_function`` node whose target wraps its tensor arguments in
``torch._numpy.ndarray``, calls the ``torch._numpy`` counterpart (which follows
NumPy's semantics: dtype promotion, float64/int64 defaults, axis arguments) and
unwraps the result back to tensors. Fake tensors run through it at trace time;
AOT autograd traces through it to torch operations. A target that writes into
its first argument is named with a trailing ``_``, which the graph passes read
as "mutates" (it is never removed or merged).

Also here: the helpers the transformed bytecode calls to turn an ndarray
argument into the graph's tensor input and a graph output back into the
ndarray (or NumPy scalar) eager NumPy returns.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch._numpy as tnp

__all__ = [
    "NUMPY_DTYPES",
    "as_tnp_dtype",
    "numpy_attr",
    "numpy_function",
    "numpy_method",
    "numpy_operator",
    "tnp_counterpart",
    "to_ndarray",
]

# The dtypes both NumPy and torch._numpy know (an ndarray of another dtype is not traced).
NUMPY_DTYPES: dict[np.dtype, torch.dtype] = {
    np.dtype(name): getattr(torch, name)
    for name in (
        "bool",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
}


def to_ndarray(tensor: torch.Tensor, scalar: bool) -> Any:
    """The ndarray eager NumPy returns for a graph output (its NumPy scalar when ``scalar``); shares memory."""
    # A lazily conjugated or negated view (torch._numpy's conj) is materialised: NumPy has no such bits.
    array = tensor.detach().resolve_conj().resolve_neg().numpy()
    return array[()] if scalar else array


def tnp_counterpart(fn: Any) -> Any:
    """The ``torch._numpy`` function standing for NumPy callable ``fn`` (same module path and name), or None."""
    name = getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None) or ""
    if not isinstance(name, str) or name.startswith("_"):
        return None
    for sub in ("linalg", "fft", "random"):
        if module.startswith(f"numpy.{sub}") or module.startswith(f"numpy._core.{sub}"):
            owner = getattr(np, sub)
            return getattr(getattr(tnp, sub), name, None) if getattr(owner, name, None) is fn else None
    return getattr(tnp, name, None) if getattr(np, name, None) is fn else None


def as_tnp_dtype(value: Any) -> Any:
    """A NumPy dtype (or scalar type) as the name torch._numpy accepts; other values unchanged."""
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    if value in (float, int, bool, complex):
        return np.dtype(value).name
    return value


def _wrap_arg(value: Any) -> Any:
    return tnp.ndarray(value) if isinstance(value, torch.Tensor) else value


def _unwrap(value: Any) -> Any:
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    if isinstance(value, tnp.DType):
        return value.name
    return value


def _integers_as_double(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Integer and bool operands of a true division as float64: NumPy divides them in double precision
    (torch._numpy would give torch's default float)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or any(t.is_floating_point() or t.is_complex() for t in tensors):
        return args
    if any(isinstance(a, (float, complex)) for a in args):
        return args
    return tuple(a.to(torch.float64) if isinstance(a, torch.Tensor) else a for a in args)


def _all_integers(args: tuple[Any, ...]) -> bool:
    return all(
        (isinstance(a, torch.Tensor) and not (a.is_floating_point() or a.is_complex()))
        or (isinstance(a, int) and not isinstance(a, bool))
        for a in args
    )


def _integer_division(fn: Callable[..., Any], a: Any, b: Any) -> torch.Tensor:
    """``a // b`` or ``a % b`` on integers as NumPy computes them: 0 where ``b`` is 0 (torch would raise)."""
    if not isinstance(b, torch.Tensor):
        result = _unwrap(fn(_wrap_arg(a), b or 1))
        return torch.zeros_like(result) if b == 0 else result
    zero = b == 0
    safe = torch.where(zero, torch.ones_like(b), b)
    result = _unwrap(fn(_wrap_arg(a), tnp.ndarray(safe)))
    return torch.where(zero, torch.zeros_like(result), result)


# torch._numpy's ufuncs are made at import time (not visible to type checkers): looked up by name.
_TRUE_DIVISIONS = tuple(getattr(tnp, name) for name in ("true_divide", "divide"))
_FLOOR_DIVISIONS = tuple(getattr(tnp, name) for name in ("floor_divide", "remainder", "mod"))

_INTEGER_DIVISIONS = {
    operator.floordiv: operator.floordiv,
    operator.mod: operator.mod,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
}


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    return fn


@functools.cache
def numpy_function(tnp_fn: Callable[..., Any], qualname: str) -> Callable[..., Any]:
    """The graph target calling ``tnp_fn`` (``np.<qualname>``) on ndarrays made from its tensor arguments."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if tnp_fn in _TRUE_DIVISIONS:
            args = _integers_as_double(args)
        if tnp_fn in _FLOOR_DIVISIONS and len(args) == 2 and not kwargs:
            if _all_integers(args):
                return _integer_division(tnp_fn, *args)
        return _unwrap(tnp_fn(*[_wrap_arg(a) for a in args], **{k: _wrap_arg(v) for k, v in kwargs.items()}))

    return _named(call, "numpy_" + qualname.replace(".", "_"))


@functools.cache
def numpy_method(name: str, mutating: bool = False) -> Callable[..., Any]:
    """The graph target calling method ``name`` of the ndarray made from its first argument."""

    def call(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        method = getattr(tnp.ndarray(self), name)
        return _unwrap(method(*[_wrap_arg(a) for a in args], **{k: _wrap_arg(v) for k, v in kwargs.items()}))

    return _named(call, f"ndarray_{name.strip('_')}" + ("_" if mutating else ""))


@functools.cache
def numpy_attr(name: str) -> Callable[..., Any]:
    """The graph target reading computed attribute ``name`` (``T``, ``real``, ...) of an ndarray."""

    def read(self: torch.Tensor) -> Any:
        return _unwrap(getattr(tnp.ndarray(self), name))

    return _named(read, f"ndarray_attr_{name}")


@functools.cache
def numpy_operator(op: Any) -> Callable[..., Any]:
    """The graph target applying operator ``op`` with ndarrays for its tensor operands (NumPy's promotion)."""
    mutating = is_inplace_operator(op) or op is operator.setitem

    def apply(*args: Any) -> Any:
        if op in (operator.truediv, operator.itruediv) and not mutating:
            args = _integers_as_double(args)
        if op in _INTEGER_DIVISIONS and _all_integers(args):
            result = _integer_division(_INTEGER_DIVISIONS[op], *args)
            if not mutating:
                return result
            return args[0].copy_(result)
        wrapped = [_wrap_arg(a) for a in args]
        if op is operator.setitem:
            wrapped[0][wrapped[1]] = wrapped[2]
            return args[0]
        return _unwrap(op(*wrapped))

    name = getattr(op, "__name__", str(op)).strip("_")
    return _named(apply, f"ndarray_{name}" + ("_" if mutating else ""))


def is_inplace_operator(op: Any) -> bool:
    """True for ``operator.iadd`` and the other in-place operators (they write into their left operand)."""
    from dynajit.capture._symbolic.output import OUT_OF_PLACE

    return op in OUT_OF_PLACE


def is_numpy_callable(value: Any) -> bool:
    """True for NumPy's functions and ufuncs (``np.sin``, ``np.linalg.norm``, ``np.random.rand``)."""
    if isinstance(value, np.ufunc):
        return True
    if isinstance(value, type) or not callable(value):
        return False
    module = getattr(value, "__module__", None) or ""
    return module == "numpy" or module.startswith("numpy.")
