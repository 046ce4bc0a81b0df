"""Fine-grained marks the interpreter honours: disable(fn, recursive=False) and nonstrict_trace."""

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def cos_plus(x, k=1):
    return torch.cos(x) + k


class Base:
    def step(self, x):
        return torch.tanh(x)


class Helper(Base):
    def step(self, x):
        return super().step(x) * 2

    def scaled(self, x, *, by):
        return torch.exp(x) * by


def driver(x):
    helper = Helper()
    fns = [cos_plus]
    y = torch.sin(x)  # in the driver's own frame: not traced
    y = cos_plus(y, k=2) + fns[0](y) + cos_plus(*(y,))
    y = helper.step(y) + helper.scaled(y, by=3)
    return y + sum(float(v) for v in [1, 2])


def calls_driver(x):
    return driver(torch.relu(x)) - 1


capture.disable(driver, recursive=False)


def _targets(counter):
    return {node.target for gm in counter.graphs for node in gm.graph.nodes if node.op == "call_function"}


@pytest.mark.parametrize("entry", [driver, calls_driver], ids=["compiled-directly", "called-from-traced-code"])
def test_frame_only_disable_compiles_the_callees(t, entry):
    counter = CompileCounter()
    compiled = capture.optimize(counter)(entry)
    x = t(4)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), entry(x))
    targets = _targets(counter)
    assert torch.cos in targets and torch.exp in targets  # callees (functions and methods) compiled
    assert torch.sin not in targets  # the driver's own frame was not traced


# nonstrict_trace: the function's Python runs on fake tensors; its torch calls become graph nodes.


@capture.nonstrict_trace
def normalise(batch, eps):
    x = batch["x"]
    capture.graph_break()  # would break the graph if traced by the interpreter
    scale = x.abs().amax(dim=-1, keepdim=True) + eps
    return {"y": x / scale, "rows": x.shape[0]}, torch.sin(batch["bias"])


def uses_nonstrict(x, bias):
    out, sin_bias = normalise({"x": x * 2, "bias": bias}, eps=1e-3)
    return out["y"] + sin_bias, out["rows"]


def plain_cos(x):
    return torch.cos(x).mul_(2)


def uses_nonstrict_inline(x):
    return capture.nonstrict_trace(plain_cos)(x + 1) - 1


@pytest.mark.parametrize(
    "fn, make", [(uses_nonstrict, lambda t: (t(3, 4), t(4))), (uses_nonstrict_inline, lambda t: (t(4),))]
)
def test_nonstrict_trace_is_one_graph_under_fullgraph(check, t, fn, make):
    counter = check(fn, *make(t), graphs=1, fullgraph=True, calls=2)
    assert torch.sin in _targets(counter) or torch.cos in _targets(counter)
