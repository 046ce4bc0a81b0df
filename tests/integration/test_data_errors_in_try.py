"""An operation that raises for its tensors' data, inside a ``try``, compiled against eager on every backend.

A graph raises such an error (an index out of range, an integer division by zero) only when it runs, after the
traced ``try`` statement was left: the compiled call raised where eager's handler caught the error and returned.
The operation is a graph break there, so Python runs it under the handler. The same operations outside any
``try`` stay in the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from inductor_differential import differential

import dynajit.capture as capture
from dynajit import compiler

BACKENDS = ["eager", "aot_eager", "inductor"]
INDEX = torch.tensor([0, 2])


def _handled(step: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    def fn(x):
        y = x * 2
        try:
            z = step(y)
        except (RuntimeError, IndexError) as error:
            return y - 1, str(error)
        return z + 1

    return fn


def _in_a_callee(step: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    def callee(y):
        return step(y) * 3

    def fn(x):
        try:
            z = callee(x + 1)
        except (RuntimeError, IndexError):
            z = x
        finally:
            w = x.sum()
        return z, w

    return fn


STEPS = {
    "gather": lambda y: y.gather(0, INDEX * y.shape[0]),
    "index with a tensor": lambda y: y[INDEX * y.shape[0]],
    "index_select": lambda y: torch.index_select(y, 0, INDEX * y.shape[0]),
    "embedding": lambda y: F.embedding(INDEX * y.shape[0], y.unsqueeze(1)),
    "one_hot": lambda y: F.one_hot(INDEX * y.shape[0], 3).float().sum(0),
    "integer floor division": lambda y: (y.long() // (INDEX[:1] * 0)).float(),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("step", list(STEPS))
def test_an_error_of_the_data_inside_a_try_is_caught_by_its_handler(fresh_compiler, backend, step):
    fn = _handled(STEPS[step])
    compiled = compiler.compile(fn, backend=backend)
    for n in (1, 3, 4):  # index 2n, a divisor 0: every call raises in eager, and its handler returns
        differential(fn, torch.randn(n), compiled=compiled)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("step", ["gather", "index with a tensor", "integer floor division"])
def test_the_handler_of_a_calling_frame_catches_it_too(fresh_compiler, backend, step):
    fn = _in_a_callee(STEPS[step])
    compiled = compiler.compile(fn, backend=backend)
    for n in (2, 5):
        differential(fn, torch.randn(n), compiled=compiled)


def test_the_same_operation_outside_an_except_stays_in_the_graph(fresh_compiler):
    # (transformers runs every model's forward inside try/finally: a finally body re-raises, as eager does)
    state = []

    def fn(x, index):
        with torch.no_grad():
            try:
                return x.gather(0, index) * 2, x[index] + 1
            finally:
                state.append(1)

    with capture.observe() as seen:
        differential(fn, torch.randn(5), torch.tensor([4, 0]), compiled=compiler.compile(fn, backend="eager"))
    assert len(seen.graphs) == 1 and seen.graph_breaks == []
