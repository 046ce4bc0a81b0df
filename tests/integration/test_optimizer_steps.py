"""Training steps compiled whole: forward, backward and the optimizer's step, against the same steps in eager.

The optimizer's ``zero_grad`` and ``step`` open profiler ranges (``torch.profiler.record_function``); a graph
records none of the ranges traced into it, so they are traced as if absent, and the step's in-place updates of
the parameters under ``no_grad`` are one graph (momentum's state, a dict keyed by the parameters, is not traced
yet: those steps break the graph and run in Python). Each case runs three steps eagerly and compiled from the same
weights and data and compares the losses and every parameter after each step.
"""

from __future__ import annotations

import copy

import pytest
import torch

from dynajit import capture, compiler

BACKENDS = ["inductor", "aot_eager", "eager"]


def _step_of(model: torch.nn.Module, optimizer: torch.optim.Optimizer):
    def step(x, y):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("options", [{}, {"weight_decay": 0.01}, {"maximize": True}])
def test_an_sgd_training_step_is_compiled_with_its_update(backend, options):
    compiler.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    twin = copy.deepcopy(model)
    eager = _step_of(model, torch.optim.SGD(model.parameters(), lr=0.1, **options))
    compiled = compiler.compile(_step_of(twin, torch.optim.SGD(twin.parameters(), lr=0.1, **options)), backend=backend)
    data = torch.Generator().manual_seed(1)
    with capture.observe() as seen:
        for _ in range(3):
            x, y = torch.randn(5, 4, generator=data), torch.randn(5, 2, generator=data)
            torch.testing.assert_close(compiled(x, y), eager(x, y))
            for expected, actual in zip(model.parameters(), twin.parameters()):
                torch.testing.assert_close(actual, expected)
    reasons = [brk.reason for brk in seen.graph_breaks]
    assert not [r for r in reasons if "record_function" in r], reasons
    nodes = [node for frame in seen.frames for graph in frame.graphs for node in graph.graph_module.graph.nodes]
    assert any(str(node.target).endswith("add_") for node in nodes), [
        (f.name, f.kind, f.reason[:80], [b.reason[:80] for b in f.graph_breaks], f.recompile_reasons)
        for f in seen.frames
    ]


def ranges_around_ops(x):
    with torch.profiler.record_function("scaled") as scope:
        y = x * 2
    with torch.autograd.profiler.record_function("shifted"):
        z = y + 1
    return z, scope is not None


def test_profiler_ranges_are_traced_as_if_absent():
    compiler.reset()
    x = torch.randn(3)
    with capture.observe() as seen:
        actual = compiler.compile(ranges_around_ops, backend="eager")(x)
    expected = ranges_around_ops(x)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1] == expected[1]
    assert not seen.graph_breaks and len(seen.frames) == 1
