"""``prune_zero_tangents`` and ``skipping_zero_tangents``: a backward run for zero tangents multiplies nothing by them."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.fxgraph import (
    conditionally_saved,
    prune_zero_tangents,
    reporting_reached_outputs,
    skipping_zero_tangents,
)

aten = torch.ops.aten


def _backward(saved, tangents_a, tangents_b):
    # tangents_b meets an infinite derivative (1 / 0), through a view, a product and a backward op
    through_b = (tangents_b.view(-1) / (2 * saved.sqrt())).view(saved.shape)
    through_b = torch.ops.aten.threshold_backward(through_b, saved, -1.0)
    return tangents_a * saved + through_b, tangents_b.sum()


def _traced():
    return make_fx(_backward, tracing_mode="fake")(torch.ones(3), torch.ones(3), torch.ones(3))


def test_a_zero_tangent_is_dropped_from_the_sum_it_meets_and_its_own_results_are_zeros():
    gm = prune_zero_tangents(_traced(), frozenset({"tangents_b_1"}))
    saved, a = torch.tensor([0.0, 1.0, 4.0]), torch.tensor([1.0, 2.0, 3.0])
    first, second = gm(saved, a, torch.zeros(3))
    torch.testing.assert_close(first, a * saved)
    torch.testing.assert_close(second, torch.tensor(0.0))
    assert not any(n.target is aten.div.Tensor for n in gm.graph.nodes)  # nothing divides the zero any more


def test_the_full_backward_runs_when_every_tangent_has_a_value():
    calls = []

    def compile_backward(gm, inputs):
        calls.append(gm)
        return lambda args: gm(*args)

    run = skipping_zero_tangents(compile_backward)(_traced(), [])
    assert not calls  # compiled at the first call, for the tangents it has
    saved = torch.tensor([0.0, 1.0, 4.0])
    first, _ = run([saved, torch.ones(3), torch.ones(3)])
    assert torch.isinf(first).any()  # with a value in every tangent, the infinite derivative shows, as in eager
    assert len(calls) == 1
    first, _ = run([saved, torch.ones(3), torch.zeros(3)])
    assert len(calls) == 2 and torch.isfinite(first).all()
    run([saved, torch.ones(3), torch.zeros(3)])
    assert len(calls) == 2  # the variant is compiled once


def _clamped_backward(saved, tangents):
    # clamp's and relu's backward decompose into where(mask, grad, scalar_tensor(0)): both branches zero
    zero = torch.ops.aten.scalar_tensor.default(0.0, dtype=torch.float32)
    through = torch.ops.aten.where.self(saved > 1, tangents, zero)
    return through / (2 * saved.sqrt())


def test_a_zero_tangent_stays_zero_through_a_where_against_a_scalar_zero():
    gm = prune_zero_tangents(
        make_fx(_clamped_backward, tracing_mode="fake")(torch.ones(3), torch.ones(3)), frozenset({"tangents_1"})
    )
    (result,) = [gm(torch.tensor([0.0, -1.0, 4.0]), torch.zeros(3))]
    torch.testing.assert_close(result, torch.zeros(3))  # not 0 / 0 = NaN where saved is 0, nor NaN at -1


def _std_backward(std, tangents):
    # std's backward divides by 2 * std and clears where std is 0 with masked_fill(.., 0), then scales by
    # 1 / (n - 1): infinite for a std over one element
    cleared = torch.ops.aten.masked_fill.Scalar(tangents / (2 * std), std == 0, 0)
    return cleared * float("inf")


def test_a_zero_tangent_stays_zero_through_a_masked_fill_with_zero():
    gm = prune_zero_tangents(
        make_fx(_std_backward, tracing_mode="fake")(torch.ones(3), torch.ones(3)), frozenset({"tangents_1"})
    )
    torch.testing.assert_close(gm(torch.tensor([0.0, float("nan"), 2.0]), torch.zeros(3)), torch.zeros(3))


def _two_gradients(saved_a, saved_b, tangents_a, tangents_b):
    return tangents_a * saved_a + tangents_b * saved_b.cos(), tangents_b * saved_b


def test_the_tensors_a_backward_reads_for_some_tangents_only_are_found():
    gm = make_fx(_two_gradients, tracing_mode="fake")(*(torch.ones(3) for _ in range(4)))
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert conditionally_saved(gm) == frozenset(names[:2])  # each is read for one tangent alone
    one_tangent = make_fx(lambda s, t: t * s.sin(), tracing_mode="fake")(torch.ones(3), torch.ones(3))
    assert conditionally_saved(one_tangent) == frozenset()


def _max_backward(x, tangents):
    # the subclass branch of autograd's evenly_distribute_backward, as AOT autograd traces it on fake tensors
    value = x.max()
    mask = torch.logical_or(x == value, torch.logical_and(x.isnan(), value.isnan()))
    return mask * (tangents / mask.sum())


def test_a_spread_gradient_is_eagers_masked_fill_not_a_product():
    from dynajit.fxgraph._cpu_formulas import rewrite_spread_gradients

    gm = make_fx(_max_backward, decomposition_table={})(torch.ones(3), torch.ones(()))
    assert rewrite_spread_gradients(gm)
    x = torch.tensor([float("nan"), 1.0, float("nan")])
    torch.testing.assert_close(
        gm(x, torch.tensor(float("nan"))), torch.tensor([float("nan"), 0.0, float("nan")]), equal_nan=True
    )
    torch.testing.assert_close(gm(torch.tensor([2.0, 1.0, 2.0]), torch.tensor(4.0)), torch.tensor([2.0, 0.0, 2.0]))


def test_the_zeros_autograd_makes_for_the_unreached_outputs_are_never_scanned(monkeypatch):
    # The node's pre-hook saw which gradients the loss never brought: autograd fills those with zeros itself,
    # so the backward takes them for zeros without reading them (a scan per output per step).
    compiled = _aot(_three_roots)
    scans = []
    real_any = torch.Tensor.any

    def run(f):
        x = torch.tensor([[0.0, -1.0], [4.0, 1.0]]).requires_grad_()
        w = torch.ones(2, 2).requires_grad_()
        root_times_w, _, _ = f(x, w.clone())
        monkeypatch.setattr(torch.Tensor, "any", lambda t, *a, **k: scans.append(t.shape) or real_any(t, *a, **k))
        root_times_w.sum().backward()
        monkeypatch.setattr(torch.Tensor, "any", real_any)
        return x.grad, w.grad

    torch.testing.assert_close(run(compiled), run(_three_roots), equal_nan=True)
    assert scans == []


def _aot(fn):
    from functorch.compile import aot_function, make_boxed_func

    def run_as_is(gm, _inputs):
        return make_boxed_func(gm.forward)

    return reporting_reached_outputs(aot_function(fn, run_as_is, skipping_zero_tangents(run_as_is)))


def _three_roots(x, w):
    w.mul_(2)  # a written input: its tangent comes first among the backward's
    root = torch.nan_to_num(x.sqrt())  # infinite derivative at 0, NaN below it
    return root * w, root.t(), (x - 1).sqrt().sum()


@pytest.mark.parametrize("weights", [(1, 0, None), (0, None, None), (None, 2, 0), (0, 0, 0), (None, None, 3)])
def test_only_the_outputs_the_loss_never_reached_are_skipped(weights):
    # An output weighted by 0 is reached: eager multiplies its zeros by the infinite derivatives behind it.
    # An output left out of the loss is not, and eager gives the inputs behind it no gradient at all.
    compiled = _aot(_three_roots)

    def run(f):
        x = torch.tensor([[0.0, -1.0], [4.0, 1.0]]).requires_grad_()
        w = torch.ones(2, 2).requires_grad_()
        w_clone = w.clone()
        outs = f(x, w_clone)
        reached = [(o * k).sum() for o, k in zip(outs, weights) if k is not None]
        sum(reached).backward()
        return [o.detach() for o in outs], w_clone.detach(), x.grad, w.grad

    torch.testing.assert_close(run(compiled), run(_three_roots), equal_nan=True)
