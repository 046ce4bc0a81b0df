"""Eval-mode batch norm as inductor-lite's one op: its layout against eager's kernel, and its values."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from dynajit.inductor_lite import compile_fx
from dynajit.inductor_lite._batch_norm import BATCH_NORM_INFERENCE, _output_format, batch_norms_as_one_op

aten = torch.ops.aten


def _layouts():
    """Every dim order of 2- to 5-dim tensors of sizes 1 and 2, dense and sliced in their last dim."""
    for dims in (2, 3, 4, 5):
        for sizes in itertools.product((1, 2), repeat=dims):
            for order in itertools.permutations(range(dims)):
                back = [order.index(d) for d in range(dims)]
                yield torch.empty([sizes[d] for d in order]).permute(back)
                wide = [sizes[d] * (2 if k == dims - 1 else 1) for k, d in enumerate(order)]
                yield torch.empty(wide)[..., ::2].permute(back)


def _significant(t: torch.Tensor) -> tuple:
    return tuple(s if n > 1 else None for s, n in zip(t.stride(), t.shape))


def test_where_eagers_result_is_contiguous_ours_is_too():
    # (where eager's is not, a size-1 dim makes its layout ambiguous and eager's kernel picks one of several)
    checked = 0
    for x in _layouts():
        channels = x.shape[1]
        eager = aten._native_batch_norm_legit_no_training(
            x, None, None, torch.zeros(channels), torch.ones(channels), 0.1, 1e-5
        )[0]
        ours = torch.empty(x.shape, memory_format=_output_format(x))
        if eager.is_contiguous():
            assert _significant(ours) == _significant(eager), (tuple(x.shape), x.stride())
            checked += 1
    assert checked > 1000


def _with_examples(fn, *inputs):
    """``fn`` traced, each node holding its fake value as ``example_value`` (as capture hands graphs over)."""
    gm = torch.fx.symbolic_trace(fn)
    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    for node in gm.graph.nodes:
        node.meta["example_value"] = node.meta.get("val")
    return gm


@pytest.mark.parametrize("examples", [True, False], ids=["rewritten", "decomposed"])
def test_both_roads_to_the_op_give_eagers_values(examples):
    # With example values the graph's batch norm becomes the op before AOT autograd; without them, AOT autograd's
    # decomposition of the eval-mode batch norm calls it.
    mean, var, weight = torch.randn(5), torch.rand(5) + 0.5, torch.rand(5) + 0.5

    def fn(x):
        return (torch.nn.functional.batch_norm(x, mean, var, weight, None, False, 0.1, 1e-3).relu(),)

    x = torch.randn(3, 5, 4, 2).transpose(2, 3)
    gm = _with_examples(fn, x) if examples else torch.fx.symbolic_trace(fn)
    ops = [n.target for n in batch_norms_as_one_op(gm).graph.nodes]
    assert (BATCH_NORM_INFERENCE in ops) == examples
    (actual,), (expected,) = compile_fx(gm, [x])(x), fn(x)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected)


def test_the_op_runs_eagers_kernel_called_directly():
    x, mean, var = torch.randn(2, 3, 4), torch.randn(3), torch.rand(3) + 0.5
    expected = aten._native_batch_norm_legit_no_training(x, None, None, mean, var, 0.1, 1e-5)[0]
    torch.testing.assert_close(BATCH_NORM_INFERENCE(x, None, None, mean, var, 1e-5), expected)
