"""keep_written_strides: in-place writes into tensors not contiguous keep eager's strides under functionalization."""

import operator

import torch
import torch.fx
from torch.func import functionalize
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.fxgraph import (
    EXAMPLE_VALUE,
    eliminate_dead_code,
    keep_written_strides,
    passes_inplace,
    writes_in_place,
)


def _traced(fn, example):
    gm = torch.fx.symbolic_trace(fn)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta[EXAMPLE_VALUE] = example
    return gm


def _strides_seen_after_write(gm, x):
    """The strides the written argument has, inside a functionalized trace, right after its write."""
    seen = []

    def probe(t):
        seen.append(t.stride())
        return t

    graph = gm.graph
    write = next(n for n in graph.nodes if n.op.startswith("call_"))
    with graph.inserting_after(write):
        graph.call_function(probe, (next(iter(graph.nodes)),))
    gm.recompile()
    make_fx(functionalize(gm))(x)
    return seen[0]


def sub_then_flatten(x):
    x.sub_(1)
    return x.flatten()


def test_a_write_into_a_dense_tensor_is_left_as_it_is():
    gm = _traced(sub_then_flatten, torch.randn(2, 3))
    assert keep_written_strides(gm) is gm


def test_a_write_into_a_tensor_with_gaps_keeps_its_strides_under_functionalization():
    x = torch.randn(4, 3)[::2]
    assert _strides_seen_after_write(_traced(sub_then_flatten, x), x) == (3, 1)  # what the fix is for
    assert _strides_seen_after_write(keep_written_strides(_traced(sub_then_flatten, x)), x) == (6, 1)


def tril_then_flatten(x):
    x.tril_()
    return x.flatten()


def test_a_write_into_a_transposed_tensor_keeps_its_order_under_functionalization():
    x = torch.randn(3, 4).t()  # dense, but tril's out-of-place result is contiguous
    assert _strides_seen_after_write(_traced(tril_then_flatten, x), x) == (3, 1)  # what the fix is for
    assert _strides_seen_after_write(keep_written_strides(_traced(tril_then_flatten, x)), x) == (1, 4)


def test_the_rewritten_graph_does_what_eager_does():
    def writes(x, y):
        x.add_(y)
        torch.add(x, 1, out=x)
        torch.nn.functional.relu(x, inplace=True)
        x.index_put_((torch.tensor([0]),), torch.tensor(5.0))
        torch.mul(x, y).clamp_(min=0)  # a write into a fresh, dense tensor
        x.mul_(y)
        return x.flatten(), x.contiguous()

    x, y = torch.randn(4, 3)[::2], torch.randn(3)
    gm = keep_written_strides(_traced(writes, x))
    assert "keeping_strides" in gm.code
    eager_x, graph_x = torch.randn(4, 3)[::2].copy_(x), torch.randn(4, 3)[::2].copy_(x)
    expected, actual = writes(eager_x, y), gm(graph_x, y)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e)
        assert a.stride() == e.stride()
    torch.testing.assert_close(graph_x, eager_x)
    assert graph_x.stride() == eager_x.stride() == (6, 1)


def test_inplace_passed_by_position_is_a_write_passes_keep():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(torch.nn.functional.hardtanh, (x, -1.0, 1.0, True))  # only its write matters
    graph.output(graph.call_function(operator.mul, (x, 2)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert passes_inplace(torch.nn.functional.hardtanh, (None, -1.0, 1.0, True), {})
    assert not passes_inplace(torch.nn.functional.hardtanh, (None, -1.0, 1.0, False), {})
    assert eliminate_dead_code(gm) == 0
    x = torch.randn(5) * 3
    torch.testing.assert_close(gm(x.clone()), x.clamp(-1, 1) * 2)


def _writes(fn, example):
    gm = keep_written_strides(_traced(fn, example))
    return [writes_in_place(n) for n in gm.graph.nodes if n.op.startswith("call_")]


def test_writes_in_place_names_every_form_of_write_and_nothing_else():
    def writes(x):
        y = x * 2
        y.add_(1)
        torch.add(y, 1, out=y)
        torch.nn.functional.relu(y, inplace=True)
        y.copy_(x)
        return y

    assert _writes(writes, torch.ones(2, 3)) == [False, True, True, True, True]
    graph = torch.fx.Graph()  # (as capture records ``x += 1`` and ``x[0] = 3``; symbolic_trace cannot)
    x = graph.placeholder("x")
    assert writes_in_place(graph.call_function(operator.iadd, (x, 1)))
    assert writes_in_place(graph.call_function(operator.setitem, (x, 0, 3.0)))

    def reads(x):
        y = x.t_()  # (a layout change: the aten trace shows it, as ``as_strided_``)
        return (y.relu() & y.bool()).float()

    assert _writes(reads, torch.ones(2, 3)) == [False, False, False, False, False]


def test_a_write_routed_through_a_copy_is_a_write():
    def write(x):
        x.sub_(1)
        return x

    gm = keep_written_strides(_traced(write, torch.ones(3, 4).t()))
    (node,) = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert node.target.__name__ == "sub__keeping_strides"
    assert writes_in_place(node)
