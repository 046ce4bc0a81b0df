"""Reductions over every dim but one in the middle (a batch norm's per-channel statistics and its backward):
the pointwise values they reduce are computed in the reduction's own loops, one kernel with them.

Each case runs eagerly and through ``compile_fx`` on clones of the same inputs and compares values; and checks
how many kernels the graph became.
"""

from __future__ import annotations

import re

import pytest
import torch
from ilite_helpers import compiled
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.inductor_lite import compiled_graphs


def _batch_norm_backward(grad, x, mean, rstd, weight):
    # As AOT autograd's backward of relu(batch_norm(x)) in training computes it from the forward's saved
    # statistics: the masked gradient, its sum per channel, the normalised input recomputed, the sum of their
    # product, then the input's gradient from all of them.
    g = torch.where(x > 0, grad, 0.0)
    total = g.sum((0, 2, 3), keepdim=True)
    x_hat = (x - mean.view(1, -1, 1, 1)) * rstd.view(1, -1, 1, 1)
    dot = (g * x_hat).sum((0, 2, 3), keepdim=True)
    n = x.numel() // x.shape[1]
    grad_input = (weight * rstd).view(1, -1, 1, 1) * (g - total / n - x_hat * dot / n)
    return grad_input, total.flatten(), dot.flatten()


def _channel_sums(x, y):
    p = x * y  # returned and reduced twice: written out by its own kernel unless the reductions take it
    return p, p.sum((0, 2, 3)), p.amax((0, 2, 3))


@pytest.mark.parametrize(
    ("fn", "shapes", "most_kernels"),
    [
        (_batch_norm_backward, [(4, 6, 5, 7), (4, 6, 5, 7), (6,), (6,), (6,)], 1),
        (_channel_sums, [(3, 8, 4, 4), (3, 8, 4, 4)], 1),
        (_channel_sums, [(1, 8, 1, 9), (1, 8, 1, 9)], 1),
    ],
)
def test_pointwise_values_a_channel_reduction_reads_share_its_kernel(fn, shapes, most_kernels):
    inputs = [torch.randn(s) for s in shapes]
    expected = fn(*[t.clone() for t in inputs])
    c = compiled(make_fx(fn)(*inputs), *inputs)
    actual = c(*[t.clone() for t in inputs])
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
    (graph,) = compiled_graphs(c)
    assert graph.info["kernels"] <= most_kernels, graph.info


def test_a_channels_last_input_keeps_its_values():
    x = torch.randn(2, 5, 3, 4).to(memory_format=torch.channels_last)
    y = torch.randn(2, 5, 3, 4)
    expected = _channel_sums(x.clone(), y.clone())
    c = compiled(make_fx(_channel_sums)(x, y), x, y)
    torch.testing.assert_close(c(x.clone(), y.clone()), expected, atol=1e-5, rtol=1e-5)


def _batch_norm_forward(x, weight, bias):
    # Training mode: its decomposition reduces the mean, then the variance about it (per-channel steps between
    # them), then writes every element of the output from them.
    return (torch.relu(torch.nn.functional.batch_norm(x, None, None, weight, bias, training=True)),)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("fn", "per_channel"), [(_batch_norm_forward, 2), (_batch_norm_backward, 3)], ids=["forward", "backward"]
)
def test_channels_last_statistics_and_what_reads_them_run_over_column_blocks(fn, per_channel, dtype):
    # Channels-last, a channel's elements are a column: each kernel walks blocks of contiguous channels row by
    # row (16 of the 20 channels, then 4), through every reduction, per-channel step and pass of the kernel. 140
    # rows: two runs of 64 and a ragged one.
    gen = torch.Generator().manual_seed(0)
    big = [torch.randn(4, 20, 5, 7, generator=gen, dtype=dtype).to(memory_format=torch.channels_last) for _ in range(2)]
    small = [torch.rand(20, generator=gen, dtype=dtype) + 0.5 for _ in range(per_channel)]
    inputs = (big if fn is _batch_norm_backward else big[:1]) + small
    expected = fn(*[t.clone() for t in inputs])
    c = compiled(make_fx(fn)(*inputs), *inputs)
    actual = c(*[t.clone() for t in inputs])
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)
    assert actual[0].stride() == expected[0].stride()
    (graph,) = compiled_graphs(c)
    assert "x0_b += 16" in graph.kernel_source
    if fn is _batch_norm_forward:
        assert re.search(r"row_\w+_l\[16\]", graph.kernel_source)  # the mean, kept per channel for the variance
