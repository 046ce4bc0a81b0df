"""A straight-line tensor function through all five layers: api -> capture (bytecode -> FX) -> guards -> backend."""

from __future__ import annotations

import torch

import dynajit.compiler
from dynajit._dynamo import register_backend


def straight_line(x, y):
    z = torch.sin(x) * y + 2
    w = z.relu() - x.mean()
    return w / (y.abs() + 1), z


def test_eager_backend_matches_eager_and_sees_one_graph() -> None:
    graphs: list[torch.fx.GraphModule] = []

    def recording(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        graphs.append(gm)
        return dynajit.compiler._registry.lookup_backend("eager")(gm, example_inputs)

    register_backend(recording, "recording_eager_for_first_path")
    compiled = dynajit.compiler.compile(straight_line, backend="recording_eager_for_first_path")
    for _ in range(3):
        x, y = torch.randn(4, 5), torch.randn(4, 5)
        expected = straight_line(x, y)
        actual = compiled(x, y)
        for e, a in zip(expected, actual, strict=True):
            torch.testing.assert_close(a, e)
            assert a.dtype == e.dtype and a.shape == e.shape
    assert len(graphs) == 1, "the same input types and shapes reuse the first compiled entry"
    targets = {str(node.target) for node in graphs[0].graph.nodes if node.op in ("call_function", "call_method")}
    assert {"relu", "mean", "abs"} <= {t.rsplit(".", 1)[-1] for t in targets}


def test_a_new_dtype_fails_the_guards_and_recompiles() -> None:
    calls = []

    def counting(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    compiled = dynajit.compiler.compile(straight_line, backend=counting)
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), straight_line(x, y))
    xd, yd = x.double(), y.double()
    result = compiled(xd, yd)
    torch.testing.assert_close(result, straight_line(xd, yd))
    assert result[0].dtype == torch.float64
    assert len(calls) == 2
