"""inductor-lite's split of training graphs: what the forward saves for the backward, against what eager saves."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import dynajit.inductor_lite._partition as partitioning
from dynajit.inductor_lite import compile_fx

aten = torch.ops.aten


def _loss_and_logits(x, w, target):
    logits = x @ w
    return F.cross_entropy(logits, target), logits


def test_the_forward_saves_the_log_softmax_a_loss_saves_not_the_logits_or_a_copy_of_them(monkeypatch):
    # The min-cut partitioner would save the returned logits and recompute the log-softmax from them; since the
    # caller may change the logits in place before the backward, that saved output had to be copied each step.
    saved: list[torch.fx.Node] = []
    split = partitioning.partition

    def spy(joint, joint_inputs, *, num_fwd_outputs, **options):
        forward, backward = split(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **options)
        saved.extend(forward.graph.output_node().args[0][num_fwd_outputs:])
        return forward, backward

    monkeypatch.setattr(partitioning, "partition", spy)
    x, target = torch.randn(4, 8), torch.tensor([0, 2, 1, 2])

    def run(f):
        w = torch.linspace(-1, 1, 24).view(8, 3).requires_grad_()
        loss, logits = f(x, w, target)
        loss.backward()
        return loss.detach(), logits.detach(), w.grad

    w = torch.zeros(8, 3, requires_grad=True)
    compiled = compile_fx(torch.fx.symbolic_trace(_loss_and_logits), [x, w, target])
    torch.testing.assert_close(run(compiled), run(_loss_and_logits))
    targets = [getattr(n, "target", None) for n in saved]
    assert targets, "the training split was not used"
    assert aten.clone.default not in targets
    assert aten.mm.default not in targets  # the logits themselves: the decomposed log-softmax is saved instead


def _softplus_amin(x):
    return F.softplus(x.mT).amin(0, keepdim=True), F.softplus(x).amax(1)


def _softplus_amin_only(x):
    return F.softplus(x.mT).amin(0, keepdim=True)


def test_values_the_backward_compares_with_a_reduction_result_are_the_ones_the_forward_reduced():
    # amin's and amax's gradients go to the elements equal to the result. Recomputed in the backward, the
    # softplus values came out of another kernel, rounded otherwise by its vector and scalar loops: no element
    # equalled the result and the gradient was NaN.
    x = torch.randn((4, 4, 1), generator=torch.Generator().manual_seed(0))
    for fn in (_softplus_amin_only, _softplus_amin):
        compiled = compile_fx(torch.fx.symbolic_trace(fn), [x.clone().requires_grad_()])

        def grads(f):
            leaf = x.clone().requires_grad_()
            results = f(leaf)
            results = results if isinstance(results, tuple) else (results,)
            noise = torch.Generator().manual_seed(1)
            sum((r * torch.randn(r.shape, generator=noise)).sum() for r in results).backward()
            return [r.detach() for r in results], leaf.grad

        torch.testing.assert_close(grads(compiled), grads(fn), rtol=1e-5, atol=1e-6)


def test_the_backward_compares_only_values_the_forward_computed():
    x = torch.randn(4, 4, 1, requires_grad=True)
    backwards: list[torch.fx.GraphModule] = []
    split = partitioning.partition

    def spy(joint, joint_inputs, *, num_fwd_outputs, **options):
        forward, backward = split(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **options)
        backwards.append(backward)
        return forward, backward

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partitioning, "partition", spy)
        compile_fx(torch.fx.symbolic_trace(_softplus_amin), [x])
    assert backwards, "the training split was not used"

    def from_forward(node):  # a saved value, or a view of one
        while node.op != "placeholder":
            if not getattr(node.target, "is_view", False):
                return False
            node = node.args[0]
        return True

    comparisons = [n for n in backwards[0].graph.nodes if n.target in (aten.eq.Tensor, aten.eq.Scalar)]
    for node in comparisons:
        assert all(from_forward(a) for a in node.args if isinstance(a, torch.fx.Node)), backwards[0].code
