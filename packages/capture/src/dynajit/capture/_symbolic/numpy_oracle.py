"""What eager NumPy returns for a traced NumPy call, found by running NumPy itself on stand-in arrays.

``torch._numpy`` follows NumPy 1.x and differs from the installed NumPy in
places (NumPy 2 keeps single precision in FFTs, ``median`` returns 0-d where
it returns shape ``(1,)``, ``cumsum`` of int32 gives int64, ...). So each
traced call is also run by NumPy at trace time on stand-in arrays of the same
dtypes and shapes (identity matrices, ones; zeros for integer indices): NumPy's
result says the type (ndarray, NumPy scalar, Python value), dtype and shape
eager produces, independent of the data. The graph's result must match: a
dtype that ``torch._numpy`` computes in more precision is cast down, any
other difference is a graph break naming it. Arrays too large to stand in for,
or calls NumPy refuses on the stand-ins (a singular matrix), are not checked;
functions known to differ are then a graph break.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from dynajit.capture._symbolic.variables.base import VT

__all__ = ["KNOWN_DIVERGENT", "MAX_STANDIN_ELEMENTS", "Refused", "Unchecked", "hint", "reference_result"]

# Stand-in arrays larger than this (in elements, over all arguments) are not made: the call goes unchecked.
MAX_STANDIN_ELEMENTS = 1 << 20

# Functions whose torch._numpy counterpart differs from NumPy 2 for some inputs (found by comparing both):
# traced only when the stand-in run confirms the result.
KNOWN_DIVERGENT = frozenset(
    {
        "median",
        "percentile",
        "quantile",
        "nanmedian",
        "nanpercentile",
        "nanquantile",
        "cov",
        "corrcoef",
        "histogram",
        "histogram2d",
        "histogramdd",
        "modf",
        "reciprocal",
        "square",
        "trunc",
        "rint",
        "fabs",
        "fix",
        "i0",
        "sinc",
        "vander",
        "cumsum",
        "cumprod",
        "tril_indices_from",
        "triu_indices_from",
        "conj",
        "conjugate",
        "around",
        "round",
        "result_type",
        "common_type",
        "min_scalar_type",
    }
)


class Unchecked(Exception):
    """NumPy's result could not be found on stand-ins (too large, or sizes without hints)."""


class Refused(Exception):
    """NumPy raised on the stand-ins: eager (with its own data) most likely raises too."""


def reference_result(reference: Callable[..., Any], args: list[VT], kwargs: dict[str, VT], index: bool = False) -> Any:
    """What ``reference`` (the NumPy callable) returns on stand-ins for the traced arguments.

    ``index``: integer arrays stand for indices (zeros, valid in every non-empty dimension).
    Raises :class:`Unchecked` when stand-ins cannot be made, :class:`Refused` when NumPy raises on them.
    """
    budget = [MAX_STANDIN_ELEMENTS]
    real_args = [_standin(a, budget, index) for a in args]
    real_kwargs = {k: _standin(v, budget, index) for k, v in kwargs.items()}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return reference(*real_args, **real_kwargs)
        except Exception as error:
            raise Refused(f"{type(error).__name__}: {str(error)[:120]}") from None


def _standin(vt: VT, budget: list[int], index: bool) -> Any:
    from dynajit.capture._symbolic.variables.containers import DictVar, ListVar, SliceVar, TupleVar
    from dynajit.capture._symbolic.variables.ndarrays import NdarrayVar, numpy_dtype

    if isinstance(vt, NdarrayVar):
        shape = tuple(hint(s) for s in vt.example.shape)
        budget[0] -= math.prod(shape)
        if budget[0] < 0:
            raise Unchecked("arrays too large to stand in for")
        dtype = numpy_dtype(vt.example.dtype)
        array = _values(shape, dtype, index)
        return array[()] if vt.scalar else array
    if isinstance(vt, (TupleVar, ListVar)):
        return vt.kind(_standin(item, budget, index) for item in vt.items)
    if isinstance(vt, SliceVar):
        return slice(*(_standin(p, budget, index) for p in vt.parts))
    if isinstance(vt, DictVar):
        return {k: _standin(v, budget, index) for k, v in vt.items.items()}
    if vt.is_const():
        return vt.const()
    raise Unchecked(f"no stand-in for {vt}")


def hint(size: Any) -> int:
    """A size as an int: its hint when it is symbolic (:class:`Unchecked` without one)."""
    if isinstance(size, torch.SymInt):
        hint = size.node.hint
        if hint is None:
            raise Unchecked("a size without a hint")
        return int(hint)
    return int(size)


def _values(shape: tuple[int, ...], dtype: np.dtype, index: bool) -> np.ndarray:
    if index and dtype.kind in "iu":
        return np.zeros(shape, dtype)
    if len(shape) >= 2:
        # Identity matrices: invertible and positive definite, so linear algebra accepts them.
        eye = np.eye(shape[-2], shape[-1])
        return np.broadcast_to(eye, shape).astype(dtype)
    return np.ones(shape, dtype)
