"""NumPy scalars passed to torch ops, compiled against eager: values and dtypes.

``np.float64`` is a ``float``, and torch reads it as one in arithmetic, but not where a tensor is made from
data: ``torch.tensor(np.float64(1.5))`` is float64 where ``torch.tensor(1.5)`` is float32. So the graph must
keep the NumPy scalar itself; passing its float instead would be a silent wrong dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from inductor_differential import assert_same

from dynajit import compiler

CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "tensor of a float64": lambda x: torch.tensor(np.float64(1.5)) + x.sum(),
    "tensor of a list holding a float64": lambda x: torch.tensor([np.float64(1.5), 2.0]) * x[:2],
    "tensor product": lambda x: x * np.float64(0.5),
    "full": lambda x: torch.full((2,), np.float64(1.5)) + x[:2],
    "new_tensor": lambda x: x.new_tensor(np.float64(2.5)) * x,
    "half plus a float64 tensor": lambda x: x.half() + torch.tensor(np.float64(1.5)),
}


@pytest.mark.parametrize(
    "backend",
    [
        "inductor",
        "aot_eager",
        pytest.param(
            "eager",
            marks=pytest.mark.xfail(
                np.lib.NumpyVersion(np.__version__) >= "2.0.0",
                strict=True,
                raises=NameError,
                reason="the graph's code is written from reprs, and NumPy 2's repr of a scalar names np",
            ),
        ),
    ],
)
@pytest.mark.parametrize("case", list(CASES))
def test_a_numpy_scalar_passed_to_torch_gives_eagers_values_and_dtype(fresh_compiler, backend, case):
    fn = CASES[case]
    x = torch.randn(4)
    expected = fn(x)
    assert_same(expected, compiler.compile(fn, backend=backend)(x))
