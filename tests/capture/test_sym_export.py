"""export: one GraphModule with the function's own inputs and output structure; metadata survives re-capture."""

import operator
import re

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


def _first_half_scaled(x, scale=2.0):
    n = x.shape[0]
    return x[: n // 2] * n * scale


def test_an_exported_graph_refuses_inputs_its_guards_refuse():
    # the graph holds the example's facts (the slice's end and the factor 8, the scale 2.0): on another size it
    # would answer for the example's, so it raises naming the guard, as the compiled function would recompile
    gm = capture.export(_first_half_scaled)(torch.ones(8)).graph_module
    x = torch.arange(8.0)
    torch.testing.assert_close(gm(x), _first_half_scaled(x))
    refused = {
        "size()[0]: expected 8, got 6": ((torch.ones(6),), {}),
        "dtype: expected float32, got float64": ((torch.ones(8, dtype=torch.float64),), {}),
        "local 'scale' changed: expected 2.0, got 3.0": ((x,), {"scale": 3.0}),
        "stride()[0]": ((torch.ones(16)[::2],), {}),
    }
    for reason, (args, kwargs) in refused.items():
        with pytest.raises(capture.ExportInputError, match=re.escape(reason)):
            gm(*args, **kwargs)
    # under no_grad (the grad mode is the program's, not the input's) and traced on fakes, it still runs
    with torch.no_grad():
        torch.testing.assert_close(gm(x), _first_half_scaled(x))
    from torch.fx.experimental.proxy_tensor import make_fx

    traced = make_fx(gm, tracing_mode="fake")(torch.ones(8))
    torch.testing.assert_close(traced(x), _first_half_scaled(x))


def test_an_exported_module_refuses_another_batch_but_not_new_weights():
    model = Small()
    gm = capture.export(model)(torch.ones(2, 4)).graph_module
    with pytest.raises(capture.ExportInputError, match=r"L\['x'\] size\(\)\[0\]: expected 2, got 5"):
        gm(torch.ones(5, 4))
    x = torch.randn(2, 4)
    torch.testing.assert_close(gm(x), model(x))


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 2


def test_export_of_a_function_writing_python_state_is_an_error_naming_what_it_writes(t):
    # The exported graph computes on tensors: called, it would leave the list and the attribute as they were.
    def appends(x, log):
        log.append(x.shape[0])
        return x + 1

    with pytest.raises(capture.ExportError, match=r"writes Python state \(the contents of L\['log'\]\)"):
        capture.export(appends)(t(3), [])
    with pytest.raises(capture.ExportError, match=r"writes Python state \(.*\.calls\)"):
        capture.export(_Counter())(t(3))


def test_export_of_a_function_writing_into_its_tensor_arguments_replays_the_writes(t):
    def writes(x, y):
        x.add_(1)
        y[0] = 5
        return x * y

    x, y = t(3), t(3)
    exported = capture.export(writes)(x.clone(), y.clone())
    ex, ey = x.clone(), y.clone()
    ax, ay = x.clone(), y.clone()
    torch.testing.assert_close(exported.graph_module(ax, ay), writes(ex, ey))
    torch.testing.assert_close((ax, ay), (ex, ey))


def test_export_of_an_in_place_layout_change_that_changes_nothing_exports_the_graph(t):
    # The compiled code moves such a tensor's version on after the graph, as eager's no-op does; an exported
    # graph runs on other tensors later, and drops the no-op.
    def squeezes(x):
        x.squeeze_()
        return x * 2

    x = t(3)
    exported = capture.export(squeezes)(x.clone())
    torch.testing.assert_close(exported.graph_module(x.clone()), squeezes(x.clone()))
