"""Layer norm kept whole for the lowering, kernels of one body built once, a scheduler placing each buffer once.

The decomposition table keeps ``native_layer_norm`` whole for a canonical input of one floating type (its values
against eager are in ``tests/integration/test_layer_norm_compiled.py``), and views and ranges the lowering takes as
they are. Kernels that differ in buffer names only are one C++ function.
"""

from __future__ import annotations

import re

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.inductor_lite import _scheduler, compile_fx, compiled_graphs, decomposition_table

aten = torch.ops.aten


def _same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def _traced_ops(x, *affine):
    def fn(x, *affine):
        return aten.native_layer_norm.default(x, [x.shape[-1]], *affine, 1e-5)[0]

    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(x, *affine)
    return {node.target for node in gm.graph.nodes if node.op == "call_function"}


def test_a_canonical_input_keeps_the_op_whole_and_others_decompose():
    weight, bias = torch.randn(8), torch.randn(8)
    assert aten.native_layer_norm.default in _traced_ops(torch.randn(3, 8), weight, bias)
    assert aten.native_layer_norm.default in _traced_ops(torch.randn(1, 8), weight, bias)
    decomposed = [
        (torch.randn(8, 3).t(), weight, bias),  # eager's result is contiguous, the fake kernel's follows the input
        (torch.randn(3, 8, dtype=torch.bfloat16), weight, bias),  # mixed types
        (torch.randn(0, 8), weight, bias),  # empty
    ]
    for args in decomposed:
        ops = _traced_ops(*args)
        assert aten.native_layer_norm.default not in ops and aten.var_mean.correction in ops


def test_views_and_ranges_reach_the_lowering_as_they_are():
    def fn(x):
        return x.t() + x.transpose(0, 1) * torch.arange(3.0) + torch.arange(1, 4)

    ops = {
        node.target for node in make_fx(fn, decomposition_table=decomposition_table())(torch.randn(3, 3)).graph.nodes
    }
    assert {aten.t.default, aten.transpose.int, aten.arange.default, aten.arange.start} <= ops
    assert aten.permute.default not in ops


class _Blocks(torch.nn.Module):
    def __init__(self, count):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.GELU()) for _ in range(count)
        )

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x.softmax(-1)


def test_kernels_of_one_body_are_built_once():
    # Two blocks of one shape differ only in their buffers' names: each kernel body is compiled once and called
    # by both blocks.
    model = _Blocks(3).eval()
    x = torch.randn(4, 16)
    gm = torch.fx.symbolic_trace(model)
    with torch.no_grad():
        graph = compile_fx(gm, [x])
        _same(graph(x), model(x))
    (aten_graph,) = compiled_graphs(graph)
    called = set(re.findall(r"\b(kernel\d+)_\d+\(", aten_graph.wrapper_source))
    bodies = re.findall(r'extern "C" void (kernel\d+)\(', aten_graph.kernel_source)
    assert len(bodies) < len(called), (bodies, called)


def test_the_scheduler_places_each_buffer_once_per_kernel():
    # A chain of pointwise buffers is one kernel; adding a buffer to it places that buffer only, so the work
    # grows with the chain's length, not its square.
    def fn(x):
        for k in range(40):
            x = (x + k).sin()
            x = x * x  # (read twice, a sine is stored: buffers joining one kernel)
        return x

    placed = []
    original = _scheduler._Geometry.place

    def counting(self, buf):
        placed.append(buf.name)
        return original(self, buf)

    x = torch.randn(64)
    _scheduler._Geometry.place = counting
    try:
        graph = compile_fx(make_fx(fn)(x), [x])
    finally:
        _scheduler._Geometry.place = original
    _same(graph(x), fn(x))
    assert len(placed) <= 3 * len(set(placed)), (len(placed), len(set(placed)))


def test_a_small_buffer_joins_the_kernel_writing_its_inputs_when_it_is_their_last_reader():
    # The statistics a training graph saves for the backward (``(var + 1).sqrt() * mean`` here) come last in the
    # graph's order, many matrix products after the normalisation that computed mean and variance, and nothing
    # else reads those two. Computed in that kernel, however far back, mean and variance never reach memory: one
    # row-sized allocation (the saved value), not three.
    def fn(x, w):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        h = (x - mean) * torch.rsqrt(var + 1e-5)
        for _ in range(_scheduler._LOOK_BACK + 2):
            h = h @ w
        return h, (var + 1).sqrt() * mean

    x, w = torch.randn(4, 16), torch.randn(16, 16) / 4
    graph = compile_fx(make_fx(fn)(x, w), [x, w])
    for actual, expected in zip(graph(x, w), fn(x, w)):
        _same(actual, expected)
    (aten_graph,) = compiled_graphs(graph)
    rows = re.findall(r"= new\d+\(\(4, 1\)", aten_graph.wrapper_source)
    assert len(rows) == 1, aten_graph.wrapper_source
