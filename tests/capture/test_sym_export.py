"""export: one GraphModule with the function's own inputs and output structure; metadata survives re-capture."""

import operator

import pytest
import torch
from torch import nn

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        return torch.relu(y)


def structured(x, pair, scale=2.0):
    a, b = pair
    return {"sum": x + a * scale, "both": (x * b, 3)}


def test_export_function_signature_and_structure(t):
    x, pair = t(3), (t(3), t(3))
    result = capture.export(structured)(x, pair)
    gm = result.graph_module
    assert isinstance(gm, torch.fx.GraphModule)
    out = gm(x, pair, 2.0)
    expected = structured(x, pair)
    torch.testing.assert_close(out["sum"], expected["sum"])
    torch.testing.assert_close(out["both"][0], expected["both"][0])
    assert out["both"][1] == 3
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["x", "pair", "scale"]
    assert "TENSOR_MATCH" in str(result.guards)


def test_export_module(t):
    torch.manual_seed(0)
    m = Small()
    x = t(2, 4)
    result = capture.export(m)(x)
    torch.testing.assert_close(result.graph_module(x), m(x))
    assert [n.name for n in result.graph_module.graph.nodes if n.op == "placeholder"] == ["x"]


def test_export_graph_break_is_an_error(t):
    def breaks(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(capture.ExportError, match="data-dependent"):
        capture.export(breaks)(t(3))


def test_node_metadata(t):
    torch.manual_seed(0)
    m = Small()
    counter = CompileCounter()
    capture.optimize(counter)(Small.forward)(m, t(2, 4))
    (gm,) = counter.graphs
    linear = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch._C._nn.linear)
    assert "self.linear(x)" in linear.meta["stack_trace"]
    assert "return F.linear" in linear.meta["stack_trace"]  # innermost frame last
    assert any("linear" in key for key in linear.meta["nn_module_stack"])
    assert linear.meta["source_fn_stack"][-1][1] is torch._C._nn.linear


def test_recaptured_graph_module_keeps_original_stack_trace(t):
    torch.manual_seed(0)
    m = Small()
    x = t(2, 4)
    exported = capture.export(m)(x).graph_module
    graph = exported.graph
    relu = next(n for n in graph.nodes if n.op == "call_function" and n.target is torch.relu)
    with graph.inserting_after(relu):
        extra = graph.call_function(operator.add, (relu, 1.0))
    relu.replace_all_uses_with(extra, delete_user_cb=lambda user: user is not extra)
    exported.recompile()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(type(exported).forward)
    torch.testing.assert_close(compiled(exported, x), m(x) + 1.0)
    (gm,) = counter.graphs
    traces = [n.meta.get("stack_trace", "") for n in gm.graph.nodes if n.op == "call_function"]
    assert any("self.linear(x)" in trace for trace in traces)
