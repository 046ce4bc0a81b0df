"""inductor-lite's split of training graphs: what the forward saves for the backward, against what eager saves."""

from __future__ import annotations

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
