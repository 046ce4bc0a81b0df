"""Backward formulas that branch on the data: the compiled gradient takes the branch eager's takes.

Eager's gradient of ``prod`` is ``grad * result / x`` when ``x`` holds no zero and the product of the other
elements otherwise; traced on fake tensors, autograd always takes the second. Beside an infinity or a NaN the
two differ (``inf / inf`` is NaN, the product of the others is finite), so each case runs the same function
eagerly and compiled on copies of the same leaf and compares values and gradients, NaNs included.
"""

from __future__ import annotations

import pytest
import torch

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")

INF, NAN = float("inf"), float("nan")

# rows: no zero beside an infinity or a NaN, one zero, two zeros, ordinary values
_VALUES = {
    "infinity": [[INF, 2.0, 0.5], [1.5, -2.0, 3.0]],
    "nan": [[NAN, 2.0, 0.5], [1.5, -INF, 3.0]],
    "one_zero": [[0.0, INF, 0.5], [1.5, -2.0, 3.0]],
    "two_zeros": [[0.0, INF, 0.0], [1.5, NAN, 3.0]],
    "finite": [[0.25, 2.0, 0.5], [1.5, -2.0, 3.0]],
    "size_one": [[INF], [-2.0]],
}

_FORMS = {
    "whole": lambda x: (x * 2).prod(),
    "dim": lambda x: (x * 2).prod(-1),
    "keepdim": lambda x: (x * 2).prod(1, keepdim=True),
    "first_dim": lambda x: torch.prod(x * 2, 0),
    "dtype": lambda x: (x * 2).prod(-1, dtype=torch.float64),
}


def _value_and_gradient(fn, values):
    x = torch.tensor(values, requires_grad=True)
    out = fn(x)
    out.backward(torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).reshape(out.shape))
    return out.detach(), x.grad


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("form", list(_FORMS))
def test_the_gradient_of_prod_takes_eagers_branch(backend, dynamic, form):
    fn = _FORMS[form]
    compiled = compiler.compile(fn, backend=backend, dynamic=dynamic)
    for name, values in _VALUES.items():
        expected = _value_and_gradient(fn, values)
        actual = _value_and_gradient(compiled, values)
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m, name=name: f"{name}: {m}")


def test_prod_without_gradients_and_eager_prod_after_a_compile_are_untouched():
    compiled = compiler.compile(_FORMS["dim"], backend="inductor")
    x = torch.tensor(_VALUES["infinity"])
    torch.testing.assert_close(compiled(x), _FORMS["dim"](x), equal_nan=True)
    compiled(x.clone().requires_grad_())  # a training compile installs the kernels for its trace alone
    # eager's own formula afterwards: the infinity's gradient is inf / inf
    _, grad = _value_and_gradient(_FORMS["dim"], _VALUES["infinity"])
    assert grad[0, 0].isnan()
    assert torch._C.DispatchKey.Autograd not in torch.ops.aten.prod.dim_int.py_kernels
