"""Tensors aten reads negated or conjugated (the negative and conjugate bits): ``z.conj().imag``, ``x.conj()``.

Such a view's memory holds the elements unnegated; aten negates them as it reads. A generated kernel reads
memory as stored, so a graph holding one runs its aten ops as they are. Each case runs eagerly and through
``compile_fx`` on clones of the same inputs and compares values, dtypes and shapes, and the inputs after it.
"""

from __future__ import annotations

import pytest
import torch
from ilite_helpers import compiled
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.inductor_lite import compiled_graphs


def _complex() -> torch.Tensor:
    return torch.complex(torch.tensor([1.0, 3.0, -0.5]), torch.tensor([2.0, -4.0, 0.25]))


CASES = {
    # name: function of a complex tensor
    "the imaginary part of a conjugate, scaled": lambda z: z.conj().imag * 2,
    "added to the imaginary part": lambda z: (z.conj().imag + z.imag).sum(),
    "resolved, then scaled": lambda z: z.conj().imag.resolve_neg() * 2,
    "a remainder of it": lambda z: torch.complex(z.real, z.real).conj().imag % 2,
    "the conjugate's product's real part": lambda z: (z.conj() * z).real * 2,
}


@pytest.mark.parametrize("name", CASES)
def test_a_view_aten_reads_negated_inside_the_graph(name: str) -> None:
    fn = CASES[name]
    z = _complex()
    c = compiled(make_fx(fn)(z), z)
    actual = c(z.clone())
    torch.testing.assert_close(actual, fn(z.clone()))


def test_an_input_with_the_negative_bit_is_read_negated() -> None:
    def fn(x):
        return x * 2 + 1

    z = _complex()
    negated = z.conj().imag
    assert negated.is_neg()
    c = compiled(fn, negated)
    torch.testing.assert_close(c(negated), fn(negated))
    (graph,) = compiled_graphs(c)
    assert graph.info["kernels"] == 0 and "negative bit" in str(graph.info["fallbacks"])


def test_an_input_with_the_negative_bit_written_in_place_writes_its_base() -> None:
    def fn(x):
        x.mul_(2)
        return x + 1

    eager_base, base = _complex(), _complex()
    expected = fn(eager_base.conj().imag)
    traced = make_fx(fn)(_complex().conj().imag)  # (tracing runs fn: on a tensor of its own)
    actual = compiled(traced, base.conj().imag)(base.conj().imag)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(base, eager_base)  # (the write reaches the complex tensor, negated back)


def test_plain_real_graphs_still_get_kernels() -> None:
    x = torch.randn(8)
    c = compiled(lambda x: x.neg() * 2 + 1, x)
    torch.testing.assert_close(c(x), -x * 2 + 1)
    (graph,) = compiled_graphs(c)
    assert graph.info["kernels"] == 1
