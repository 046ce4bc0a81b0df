"""Int arithmetic on sizes that Python refuses for some values, compiled against eager on every backend.

Once a size is dynamic its arithmetic becomes graph nodes over a size symbol. ``n // (n - 3)`` has no value at
``n == 3``: Python raises ZeroDivisionError there, and a ``try`` around it catches that. An entry traced at
``n == 4`` must not accept ``n == 3`` (the graph divided by zero when it ran, outside the ``try``, and inductor-lite's
C++ division by zero killed the process). Likewise ``1 << (n - 5)`` raises ValueError for ``n < 5``, where the
symbol's expression (``2 ** (n - 5)``) gave 0. And a power of a negative number, ``(-2) ** k``, was written into the
graph's code as ``-2 ** k``, which Python reads as ``-(2 ** k)``. Each case is called at sizes that first make the
size dynamic and then hit the refused values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from inductor_differential import differential

from dynajit import compiler

BACKENDS = ["eager", "aot_eager", "inductor"]
SIZES = [3, 4, 6, 3, 5, 7, 2, 9]


def _caught(value: Callable[[int], Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    def fn(x):
        try:
            z = value(x.shape[0])
        except (ZeroDivisionError, ValueError) as error:
            z = -len(type(error).__name__)
        return x * z

    return fn


CAUGHT = {
    "floor division by n - 3": lambda n: n // (n - 3),
    "remainder by n - 3": lambda n: n % (n - 3),
    "a number floor-divided by n - 3": lambda n: 7 // (n - 3),
    "divisor and dividend symbolic": lambda n: (n * 7) % (n - 2),
    "left shift by n - 5": lambda n: 1 << (n - 5),
    "right shift by n - 5": lambda n: 64 >> (n - 5),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CAUGHT))
def test_a_refused_size_arithmetic_raises_where_python_raises_and_the_try_catches_it(fresh_compiler, backend, case):
    fn = _caught(CAUGHT[case])
    compiled = compiler.compile(fn, backend=backend)
    for n in SIZES:
        differential(fn, torch.randn(n), compiled=compiled)


def _message_read(x):
    try:
        z = x.shape[0] // 0.0
    except ZeroDivisionError as error:
        z = len(str(error))  # "float floor division by zero", not the int's "integer division or modulo by zero"
    return x * z


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_caught_division_by_zero_has_pythons_message(fresh_compiler, backend):
    compiled = compiler.compile(_message_read, backend=backend)
    for n in [4, 6, 5]:
        differential(_message_read, torch.randn(n), compiled=compiled)


UNCAUGHT = {
    "by a size that is 0": lambda x: x * (x.shape[0] // (x.shape[0] - 3)),
    "by the float 0.0": lambda x: x * (x.shape[0] // 0.0),  # (float floor division by zero)
    "by the int 0": lambda x: x * (x.shape[0] % 0),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(UNCAUGHT))
def test_an_uncaught_division_by_zero_raises_eagers_zero_division_error(fresh_compiler, backend, case):
    fn = UNCAUGHT[case]
    compiled = compiler.compile(fn, backend=backend)
    for n in [4, 6, 3, 5, 3]:
        differential(fn, torch.randn(n), compiled=compiled)  # the same ZeroDivisionError, message and all


POWERS = {
    "of -2 to a size": lambda x: x * ((-2) ** (x.shape[0] - 2)),
    "of -2 to a tensor": lambda x: (-2) ** x.round(),
    "of -2.0 to a tensor": lambda x: (-2.0) ** x.round(),
    "of -0.0 to a tensor": lambda x: (-0.0) ** x.round().abs(),
    "of -inf to a tensor": lambda x: (-float("inf")) ** x.round(),
    "negated power, as written": lambda x: -(2 ** x.round()),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(POWERS))
def test_a_power_of_a_negative_number_is_the_power_python_computes(fresh_compiler, backend, case):
    fn = POWERS[case]
    compiled = compiler.compile(fn, backend=backend)
    for n in [3, 4, 6, 5]:
        differential(fn, torch.linspace(-3, 3, n), compiled=compiled)
