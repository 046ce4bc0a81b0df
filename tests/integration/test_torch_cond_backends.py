"""``torch.cond`` on a tensor predicate through AOT autograd and the default backend: values and gradients."""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
from dynajit import compiler

WEIGHT = torch.nn.Linear(4, 4)


def step(x, y):
    before = y.tanh()
    out = torch.cond(
        x.sum() > 0,
        lambda a, b: WEIGHT(a).relu() * before + b,
        lambda a, b: (a * b).sin() - before,
        (x, y),
    )
    return out * 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("shift", [3.0, -3.0], ids=["true", "false"])
def test_values_and_gradients_equal_eager(backend, shift):
    compiler.reset()
    compiled = compiler.compile(step, backend=backend, fullgraph=True)
    torch.manual_seed(0)
    base = (torch.randn(2, 4) + shift, torch.randn(2, 4))
    eager_args = [t.clone().requires_grad_() for t in base]
    compiled_args = [t.clone().requires_grad_() for t in base]
    with capture.observe() as seen:
        actual = compiled(*compiled_args)
    expected = step(*eager_args)
    torch.testing.assert_close(actual, expected)
    expected.sum().backward()
    actual.sum().backward()
    for a, e in zip(compiled_args, eager_args):
        torch.testing.assert_close(a.grad, e.grad)
    assert [len(f.graphs) for f in seen.frames] == [1]
    with torch.no_grad():  # the other branch, on the same compiled code
        flipped = [-t for t in base]
        torch.testing.assert_close(compiled(*flipped), step(*flipped))
