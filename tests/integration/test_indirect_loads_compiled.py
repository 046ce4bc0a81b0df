"""Embeddings and gathers compiled from Python: indirect loads at sizes that change, and indices a graph computes.

Each case runs eagerly and through ``dynajit.compiler.compile`` (capture, then inductor-lite) on the same inputs
and compares values; an index out of range raises eager's exception.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import dynajit.compiler


def test_dynamic_sizes_look_up_and_check_their_rows():
    def fn(w, ids):
        return F.layer_norm(F.embedding(ids, w) + 1, (4,))

    c = dynajit.compiler.compile(fn, dynamic=True)
    for rows, length in [(10, 3), (10, 5), (20, 9)]:
        w, ids = torch.randn(rows, 4), torch.randint(0, rows, (2, length))
        torch.testing.assert_close(c(w, ids), fn(w, ids))
    ids[1, 2] = 20
    with pytest.raises(IndexError, match="index out of range in self"):
        c(w, ids)


def test_indices_computed_in_the_kernel_that_reads_the_table():
    # (fuzz b2:149) The indices of two lookups computed in the kernels that read them, at sizes that change
    # (the recompile is dynamic, one size 0): an index of the kernel's own is read in its loop, never before it.
    torch.manual_seed(0)
    tables = torch.nn.ModuleList([torch.nn.Embedding(10, 3), torch.nn.Embedding(10, 8)])

    def fn(x):
        small, wide = torch.minimum(x + x, x), torch.cat((x.clamp(-1, 2), x.clamp(-1, 2)))
        return wide / wide, tables[0](small.abs() % 10), F.layer_norm(tables[1](wide.abs() % 10), (8,))

    c = dynajit.compiler.compile(fn)
    for n in (3, 3, 0, 5):
        x = torch.randint(-4, 5, (n,))
        torch.testing.assert_close(c(x), fn(x), equal_nan=True)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # (a kernel that does not build runs its aten ops instead)
def test_an_index_read_before_the_loop_reads_its_own_element_too():
    # (fuzz a79-1:1619) The loop reads the scalar `x` for its own sum; the lookup's index, computed from `x` and
    # read before the loop, reused that read, which is declared inside the loop: the kernel did not compile.
    torch.manual_seed(0)
    table = torch.nn.Embedding(10, 8).requires_grad_(False)

    def fn(x, v):
        return v * 1 + v.relu() + x.relu(), table(torch.stack([x, x + 1]).abs() % 10)

    c = dynajit.compiler.compile(fn)
    for x in (torch.tensor(3), torch.tensor(-7)):
        v = torch.randn(4, 4)
        torch.testing.assert_close(c(x, v), fn(x, v))


@pytest.mark.parametrize("index", [torch.tensor(2), torch.tensor(-1), torch.tensor([[0, -2], [3, 1]])])
def test_take_at_an_index_of_any_rank(index):
    # (OpInfo's samples) torch's decomposition of take indexed by a 0-d index itself, which Python indexing reads as
    # an int: a data-dependent item() that failed the compile
    def fn(x, i):
        return torch.take(x * 2, i) + 1

    x = torch.randn(2, 3)
    torch.testing.assert_close(dynajit.compiler.compile(fn)(x, index), fn(x, index))  # (strict: no fallback)
    with pytest.raises(IndexError):  # (eager's message is take's own; the compiled index names the dim)
        dynajit.compiler.compile(fn)(x, torch.tensor(6))
