"""Out-of-place aten calls that copy ``self`` and write into the copy (``index_put``, ``scatter``, ``scatter_add``,
``index_add``), called as their in-place methods when ``self`` is a kernel's buffer that dies at the call: an
embedding's backward adds the gradient's rows into zeros, a loss's backward scatters into zeros.

Each case runs eagerly and through ``compile_fx`` on clones of the same inputs and compares values; and checks
whether the call was made in place (``info["externs_in_place"]``). A ``self`` that lives on, that is an input,
or that another argument reads keeps the out-of-place call.
"""

from __future__ import annotations

import pytest
import torch
from ilite_helpers import compiled
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.inductor_lite import compile_fx, compiled_graphs


def _embedding_backward(grad, ids):
    # As the decomposition of aten.embedding_dense_backward: zeros, then the rows of grad added at ids.
    return torch.zeros(16, grad.shape[-1]).index_put([ids], grad, accumulate=True)


def _unsafe_embedding_backward(grad, ids):
    return torch.ops.aten._unsafe_index_put(torch.zeros(16, grad.shape[-1]), [ids], grad, True)


def _loss_backward(scores, target):
    # As nll_loss's backward: -1 at each row's target class, scaled.
    return torch.zeros_like(scores).scatter(1, target.unsqueeze(1), -1.0) * scores.shape[0]


def _scatter_src(scores, target):
    return (scores * 0).scatter(1, target.unsqueeze(1), scores[:, :1] * 2)


def _scatter_add(scores, target):
    return (scores + 1).scatter_add(1, target.unsqueeze(1).expand(-1, 2), scores[:, :2])


def _index_add(grad, ids):
    return torch.zeros(16, grad.shape[-1]).index_add(0, ids.flatten(), grad.flatten(0, 1), alpha=0.5)


def _put_without_accumulating(grad, ids):
    return (torch.ones(16, grad.shape[-1]) * 3).index_put([ids[0]], grad[0])


def _embedding_case():
    return torch.randn(3, 5, 4), torch.randint(0, 16, (3, 5))


def _loss_case():
    return torch.randn(6, 7), torch.randint(0, 7, (6,))


@pytest.mark.parametrize(
    ("fn", "make_inputs"),
    [
        (_embedding_backward, _embedding_case),
        (_unsafe_embedding_backward, _embedding_case),
        (_loss_backward, _loss_case),
        (_scatter_src, _loss_case),
        (_scatter_add, _loss_case),
        (_index_add, _embedding_case),
        (_put_without_accumulating, _embedding_case),
    ],
)
def test_a_write_into_a_dying_kernel_buffer_is_made_in_place(fn, make_inputs):
    inputs = make_inputs()
    inputs[1][0] = inputs[1][-1]  # a repeated index: its rows are added (or written) twice
    expected = fn(*[t.clone() for t in inputs])
    c = compiled(make_fx(fn)(*inputs), *inputs)
    actual = c(*[t.clone() for t in inputs])
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert actual.stride() == expected.stride()
    (graph,) = compiled_graphs(c)
    assert graph.info["externs_in_place"] == 1, graph.wrapper_source


def _sums_returned_too(grad, ids):
    z = grad.sum(1)  # (a reduction: computed once, into the buffer the output is)
    return z, z.index_put([ids[:, 0] % z.shape[0]], grad[:, 0], accumulate=True)


def _zeros_read_later(grad, ids):
    z = torch.zeros(16, grad.shape[-1]) + 1
    return z.index_put([ids], grad, accumulate=True) + z


def _self_read_by_the_values(grad, ids):
    z = torch.arange(16 * grad.shape[-1], dtype=grad.dtype).view(16, -1) * 1.5
    return z.index_put([ids[0]], z[1 : ids.shape[1] + 1], accumulate=True)  # (a view of z: read as it is written)


def _dims_left_unindexed(grad, ids):
    # (an upsampling's backward: indices for some dims only, None for the others, which the method refuses)
    z = torch.zeros(grad.shape[0], 16, grad.shape[-1])
    return torch.ops.aten.index_put(z, [None, ids[0]], grad, True)


def _self_an_input(z, ids):
    return z.index_put([ids], torch.ones((*ids.shape, z.shape[-1])), accumulate=True)


@pytest.mark.parametrize(
    ("fn", "make_inputs"),
    [
        (_sums_returned_too, _embedding_case),
        (_zeros_read_later, _embedding_case),
        (_self_read_by_the_values, _embedding_case),
        (_dims_left_unindexed, _embedding_case),
        (_self_an_input, lambda: (torch.randn(16, 4), torch.randint(0, 16, (3, 5)))),
    ],
)
def test_a_self_that_lives_on_or_is_read_otherwise_is_copied(fn, make_inputs):
    inputs = make_inputs()
    expected = fn(*[t.clone() for t in inputs])
    args = [t.clone() for t in inputs]
    c = compiled(make_fx(fn)(*inputs), *inputs)
    actual = c(*args)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(args, inputs)  # (an input is never written)
    (graph,) = compiled_graphs(c)
    assert graph.info["externs_in_place"] == 0, graph.wrapper_source


class _Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(16, 4)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, ids, target):
        return torch.nn.functional.cross_entropy(self.head(self.embedding(ids)).mean(1), target)


def test_a_training_steps_embedding_and_loss_gradients_are_added_in_place():
    # The backward of an embedding (rows added into zeros) and of a cross-entropy (-1 scattered into zeros).
    torch.manual_seed(0)
    eager_model, model = _Classifier(), _Classifier()
    model.load_state_dict(eager_model.state_dict())
    ids, target = torch.randint(0, 16, (3, 5)), torch.randint(0, 3, (3,))
    ids[0, 0] = ids[1, 1]
    eager_model(ids, target).backward()
    compiled_model = compile_fx(torch.fx.symbolic_trace(model), [ids, target])
    compiled_model(ids, target).backward()
    for (name, expected), actual in zip(eager_model.named_parameters(), model.parameters()):
        torch.testing.assert_close(actual.grad, expected.grad, atol=1e-5, rtol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    _, backward = compiled_graphs(compiled_model)
    assert backward.info["externs_in_place"] == 2, backward.wrapper_source
