"""Embeddings and gathers as loads at positions another tensor holds (indirect loads), fused with what reads them.

Each case runs eagerly and through ``compile_fx`` on clones of the same inputs and compares values, dtypes,
shapes and strides, and how many kernels and aten calls the graph became; an index out of range raises eager's
exception with eager's message, wherever it sits in the kernel.
"""

from __future__ import annotations

import os
import re

import pytest
import torch
import torch.nn.functional as F
from ilite_helpers import compiled
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.inductor_lite import compile_fx, compiled_graphs


def _embeddings_and_norm(words, positions, ids, pos):
    # A transformer's input: token and position embeddings, summed, then a layer norm (BERT's, GPT-2's).
    x = F.embedding(ids, words) + F.embedding(pos, positions)
    return F.layer_norm(x, (x.shape[-1],))


def _bert_inputs():
    return (
        torch.randn(50, 32),
        torch.randn(8, 32),
        torch.randint(0, 50, (2, 8)),
        torch.arange(8).repeat(2, 1),
    )


CASES = {
    # name: (function, inputs, most kernels)
    "embeddings, sum and layer norm": (_embeddings_and_norm, _bert_inputs, 1),
    "a wide table": (
        _embeddings_and_norm,
        lambda: (
            torch.randn(3000, 96),
            torch.randn(40, 96),
            torch.randint(0, 3000, (3, 40)),
            torch.arange(40).repeat(3, 1),
        ),
        1,
    ),
    "scaled": (lambda w, i: F.embedding(i, w) * 2, lambda: (torch.randn(10, 4), torch.randint(0, 10, (3, 5))), 1),
    "bfloat16 table": (
        lambda w, i: F.embedding(i, w.bfloat16()) * 2,
        lambda: (torch.randn(10, 4), torch.randint(0, 10, (3,))),
        2,
    ),
    "int32 indices": (
        lambda w, i: F.embedding(i, w),
        lambda: (torch.randn(10, 4), torch.randint(0, 10, (2, 3), dtype=torch.int32)),
        1,
    ),
    "computed table": (
        lambda w, i: F.embedding(i, w * 3 + 1),
        lambda: (torch.randn(10, 4), torch.randint(0, 10, (6,))),
        2,
    ),
    "transposed table": (
        lambda w, i: F.embedding(i, w.t()),
        lambda: (torch.randn(4, 10), torch.randint(0, 10, (5,))),
        1,
    ),
    "sliced table": (
        lambda w, i: F.embedding(i, w[2:, 1:]),
        lambda: (torch.randn(12, 5), torch.randint(0, 10, (6,))),
        1,
    ),
    "one index": (lambda w, i: F.embedding(i, w) + 1, lambda: (torch.randn(10, 4), torch.tensor(7)), 1),
    "no indices": (lambda w, i: F.embedding(i, w) + 1, lambda: (torch.randn(10, 4), torch.randint(0, 10, (0, 3))), 1),
    "computed indices": (
        lambda w, i: F.embedding(i * 2 % 10, w),
        lambda: (torch.randn(10, 4), torch.randint(0, 10, (6,))),
        1,
    ),
    "two lookups concatenated": (
        lambda w, a, b: torch.cat([F.embedding(a, w), F.embedding(b, w)]).relu(),
        lambda: (torch.randn(10, 4), torch.randint(0, 10, (3,)), torch.randint(0, 10, (5,))),
        1,
    ),
    "gather along rows": (
        lambda x, i: torch.gather(x.softmax(-1), -1, i),
        lambda: (torch.randn(3, 7), torch.randint(0, 7, (3, 2))),
        2,
    ),
    "gather along columns": (
        lambda x, i: torch.gather(x > 0, 0, i),
        lambda: (torch.randn(3, 7), torch.randint(0, 3, (2, 7))),
        2,
    ),
    "gather of a transpose": (
        lambda x, i: torch.gather(x.t(), 0, i).sin(),
        lambda: (torch.randn(4, 6), torch.randint(0, 6, (2, 3))),
        1,
    ),
    "cross entropy": (
        lambda x, t: F.cross_entropy(x, t),
        lambda: (torch.randn(6, 5), torch.randint(0, 5, (6,))),
        2,
    ),
    "cross entropy summed, rows ignored": (
        lambda x, t: F.cross_entropy(x, t, reduction="sum", ignore_index=2),
        lambda: (torch.randn(6, 5, dtype=torch.float64), torch.tensor([0, 2, 4, 2, 2, 1])),
        2,
    ),
    "cross entropy of every row ignored": (
        lambda x, t: F.cross_entropy(x, t),
        lambda: (torch.randn(3, 5), torch.full((3,), -100)),
        2,
    ),
    "cross entropy of one row": (lambda x, t: F.cross_entropy(x, t), lambda: (torch.randn(5), torch.tensor(3)), 2),
    "cross entropy of no rows": (
        lambda x, t: F.cross_entropy(x, t),
        lambda: (torch.randn(0, 5), torch.zeros(0, dtype=torch.long)),
        3,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_lookup_is_read_where_it_is_used(name):
    fn, make_inputs, most_kernels = CASES[name]
    inputs = make_inputs()
    expected = fn(*[t.clone() for t in inputs])
    c = compiled(make_fx(fn)(*inputs), *inputs)
    actual = c(*[t.clone() for t in inputs])
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert actual.stride() == expected.stride()
    (graph,) = compiled_graphs(c)
    assert graph.info["externs"] == 0 and graph.info["kernels"] <= most_kernels, graph.info


ERRORS = {
    # name: (function, good inputs, bad inputs)
    "a token past the table": (
        _embeddings_and_norm,
        _bert_inputs(),
        lambda w, p, i, q: (w, p, i.index_fill(1, torch.tensor([3]), 50), q),
    ),
    "a negative token": (_embeddings_and_norm, _bert_inputs(), lambda w, p, i, q: (w, p, -i - 1, q)),
    "a position past the table": (_embeddings_and_norm, _bert_inputs(), lambda w, p, i, q: (w, p, i, q + 1)),
    "a bad index in the second piece": (
        lambda w, a, b: torch.cat([F.embedding(a, w), F.embedding(b, w)]),
        (torch.randn(10, 4), torch.randint(0, 10, (3,)), torch.randint(0, 10, (5,))),
        lambda w, a, b: (w, a, b + 10),
    ),
    "an index past a gathered row": (
        lambda x, i: torch.gather(x, 1, i) * 2,
        (torch.randn(4, 6), torch.randint(0, 6, (4, 3))),
        lambda x, i: (x, i.index_fill(0, torch.tensor([2]), 6)),
    ),
    "a negative gathered index": (
        lambda x, i: torch.gather(x, 0, i) * 2,
        (torch.randn(4, 6), torch.randint(0, 4, (2, 6))),
        lambda x, i: (x, i - 4),
    ),
    "a class past the last": (
        lambda x, t: F.cross_entropy(x, t),
        (torch.randn(6, 5), torch.randint(0, 5, (6,))),
        lambda x, t: (x, t.index_fill(0, torch.tensor([4]), 5)),
    ),
    "a negative class that is not the ignored one": (
        lambda x, t: F.cross_entropy(x, t),
        (torch.randn(6, 5), torch.randint(0, 5, (6,))),
        lambda x, t: (x, t.index_fill(0, torch.tensor([1]), -1)),
    ),
    "a lookup in a table with no columns": (
        lambda w, i: F.embedding(i, w),
        (torch.randn(10, 0), torch.randint(0, 10, (3,))),
        lambda w, i: (w, i + 10),
    ),
}


def _index_masked(message: str) -> str:
    return re.sub(r"\b(index|Target) -?\d+", r"\1 <i>", message)


@pytest.mark.parametrize("name", list(ERRORS))
def test_an_index_out_of_range_raises_eagers_error(name):
    fn, good, make_bad = ERRORS[name]
    c = compiled(make_fx(fn)(*good), *good)
    torch.testing.assert_close(c(*good), fn(*good))
    bad = make_bad(*good)
    with pytest.raises(Exception) as eager:
        fn(*bad)
    with pytest.raises(type(eager.value)) as raised:
        c(*bad)
    # (which bad index eager names is its kernel's order of reading, which torch 2.13's and 2.14's differ in)
    assert _index_masked(str(raised.value)) == _index_masked(str(eager.value))
    torch.testing.assert_close(c(*good), fn(*good))  # (and the next call is right again)


class _Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.words = torch.nn.Embedding(30, 16)
        self.positions = torch.nn.Embedding(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, ids, target):
        x = self.norm(self.words(ids) + self.positions(torch.arange(ids.shape[1])))
        return F.cross_entropy(self.head(x).mean(1), target)


def test_a_training_step_through_lookups_gives_eagers_gradients():
    torch.manual_seed(0)
    eager_model, model = _Encoder(), _Encoder()
    model.load_state_dict(eager_model.state_dict())
    ids, target = torch.randint(0, 30, (4, 8)), torch.randint(0, 3, (4,))
    ids[0, 0] = ids[1, 1]  # (a repeated token: its gradient rows add up)
    eager_loss = eager_model(ids, target)
    eager_loss.backward()
    compiled_model = compile_fx(torch.fx.symbolic_trace(model), [ids, target])
    loss = compiled_model(ids, target)
    loss.backward()
    torch.testing.assert_close(loss, eager_loss)
    for (name, expected), actual in zip(eager_model.named_parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(actual.grad, expected.grad, atol=1e-5, rtol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    forward, _ = compiled_graphs(compiled_model)
    assert "aten.embedding.default" not in str(forward.info["fallbacks"])


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 when triton is imported"
)
def test_triton_kernels_leave_lookups_to_aten():
    # Triton's generator has no indirect loads: its graphs call aten for them, and compute the rest.
    pytest.importorskip("triton")

    def fn(w, i):
        return F.embedding(i, w) * 2 + torch.gather(w, 1, i.view(-1, 1) % 4)

    w, i = torch.randn(10, 4), torch.randint(0, 10, (10,))
    c = compiled(make_fx(fn)(w, i), w, i, options={"cpu_backend": "triton"})
    torch.testing.assert_close(c(w, i), fn(w, i))
    (graph,) = compiled_graphs(c)
    assert graph.info["externs"] == 2 and graph.info["kernels"] >= 1, graph.info


@pytest.mark.parametrize("shape", [(4, 2), (4, 1, 2), (4, 3, 2), (2, 1, 3)])
def test_a_reduction_of_a_gather_at_a_computed_index_sums_the_right_elements(shape):
    # GCC 12.2's loop vectoriser summed the wrong elements of this kernel at -O3 (fuzz a92-1:471); such kernels
    # are built without loop vectorisation.
    def fn(x):
        index = (torch.arange(x.numel()).view(x.shape) * 5 + 3) % x.shape[-1]
        return torch.gather(x, -1, index).sum()

    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(compiled(make_fx(fn)(x), x)(x), fn(x))


def test_a_row_read_at_an_index_the_loop_does_not_change_keeps_the_reduction_vectorised():
    # A transformer's input layer: a position embedding's row (an index computed from the outer loop, arange) summed with a
    # token's, then LayerNorm. The index is computed once before the row's loops, where the vectoriser's bug of
    # a92-1:471 cannot reach it: built without vectorisation, the kernel ran 4.5 times slower.
    tokens, positions, weight, bias = torch.randn(50, 64), torch.randn(16, 64), torch.randn(64), torch.randn(64)

    def fn(ids):
        rows = F.embedding(ids, tokens) + F.embedding(torch.arange(ids.shape[1]).expand_as(ids), positions)
        return F.layer_norm(rows, (64,), weight, bias)

    ids = torch.randint(0, 50, (3, 16), generator=torch.Generator().manual_seed(0))
    c = compile_fx(make_fx(fn)(ids), [ids])
    torch.testing.assert_close(c(ids), fn(ids))
    (graph,) = compiled_graphs(c)
    assert "arange" not in str(graph.info.get("fallbacks", ""))
    assert "no-tree-loop-vectorize" not in graph.kernel_source
