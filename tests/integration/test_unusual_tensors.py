"""Tensors other than dense CPU ones as arguments: meta, nested, sparse and quantized, eager and compiled alike.

A meta tensor has no memory for a kernel to read (a compiled kernel crashed the process); a strided nested
tensor has no size to trace with (reading it raised from the compiler). Each case runs the same function
eagerly and compiled on the same arguments and compares results, layouts and devices.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")

BACKENDS = ["inductor", "aot_eager", "eager"]


def _same(actual, expected):
    assert type(actual) is type(expected)
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same(a, e)
    elif isinstance(expected, torch.Tensor):
        assert (actual.device, actual.layout, actual.is_nested) == (
            expected.device,
            expected.layout,
            expected.is_nested,
        )
        assert (actual.dtype, actual.requires_grad) == (expected.dtype, expected.requires_grad)
        if expected.is_nested:
            for a, e in zip(actual.unbind(), expected.unbind(), strict=True):
                torch.testing.assert_close(a, e)
        elif expected.device.type == "meta":
            assert actual.shape == expected.shape and actual.stride() == expected.stride()
        elif expected.layout != torch.strided:
            torch.testing.assert_close(actual.to_dense(), expected.to_dense())
        else:
            torch.testing.assert_close(actual, expected)
    else:
        assert actual == expected


def _meta_products(x, w):
    scratch = torch.empty(3, 3, device="meta")
    return torch.nn.functional.linear(x, w).relu().sum(-1), (x @ x.t()).softmax(-1), (scratch * 2).shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_meta_tensors_give_eagers_shapes_and_then_real_tensors_real_values(backend):
    compiled = compiler.compile(_meta_products, backend=backend)
    meta = (torch.empty(2, 4, device="meta"), torch.empty(3, 4, device="meta"))
    _same(compiled(*meta), _meta_products(*meta))
    real = (torch.randn(2, 4), torch.randn(3, 4))
    _same(compiled(*real), _meta_products(*real))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_built_on_the_meta_device_runs_compiled(backend):
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    x = torch.empty(3, 8, device="meta")
    _same(compiler.compile(model, backend=backend)(x), model(x))


def _add_one(t):
    return t + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strided_nested_tensor_runs_in_python_and_plain_tensors_stay_compiled(backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: the strided nested layout is a prototype
        nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
    compiled = compiler.compile(_add_one, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a failed compile would warn and run eagerly
        for value in (nested, torch.ones(2), nested, torch.arange(3.0)):
            _same(compiled(value), _add_one(value))


_SPARSE = torch.randn(4, 4) * (torch.rand(4, 4, generator=torch.Generator().manual_seed(0)) > 0.6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda s, x: (torch.sparse.mm(s, x) * 2, (s + s).to_dense()), lambda: _SPARSE.to_sparse()),
        (lambda s, x: (s @ x + 1, s.values().sum()), lambda: _SPARSE.to_sparse_csr()),
        (
            lambda q, x: (q.dequantize() @ x, q.int_repr().float().sum()),
            lambda: torch.quantize_per_tensor(_SPARSE, 0.1, 0, torch.qint8),
        ),
    ],
    ids=["coo", "csr", "quantized"],
)
def test_sparse_and_quantized_arguments_are_eagers(backend, fn, make):
    x = torch.randn(4, 3)
    _same(compiler.compile(fn, backend=backend)(make(), x), fn(make(), x))


def _scaled_and_shifted(x):
    return x * 2 + 1, (x.neg() * x).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_aten_reads_negated_gives_eagers_values_after_plain_tensors(backend):
    # (``z.conj().imag`` holds the imaginary parts unnegated and has the negative bit: a kernel reading its memory
    # as stored, compiled first for plain tensors or for it, got the signs wrong)
    compiled = compiler.compile(_scaled_and_shifted, backend=backend)
    z = torch.complex(torch.randn(5), torch.randn(5))
    for x in (torch.randn(5), z.conj().imag, torch.randn(5), z.conj().imag):
        _same(compiled(x), _scaled_and_shifted(x))
    _same(compiler.compile(lambda z: z.conj().imag * 2, backend=backend)(z), z.conj().imag * 2)


def _expanded_imaginary_of_conjugate(x):
    v = torch.complex(x, x * 2).conj().imag  # negative bit, over the complex intermediate's memory
    return v.unsqueeze(0).expand(3, *v.shape)


def _expanded_conjugate(z):
    return z.conj().unsqueeze(0).expand(2, *z.shape)  # conjugate bit, over the input's memory


def _written_imaginary_of_conjugate(x):
    # Written through the view: AOT autograd's base then holds the values as read, and its view comes back right
    # without the bit (fuzz a196:166, which a repair of every such output negated).
    v = torch.complex(x, x).conj().imag
    v += 1.0
    return v.unsqueeze(0).expand(2, *v.shape)


def _expanded_beside_a_write(x):
    w = x.clone()
    w.add_(1)  # a write into other memory: the view's bits are still repaired
    return _expanded_imaginary_of_conjugate(x), w


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn",
    [_expanded_imaginary_of_conjugate, _expanded_conjugate, _written_imaginary_of_conjugate, _expanded_beside_a_write],
)
def test_an_output_rebuilt_as_a_view_keeps_its_negative_and_conjugate_bits(fn, backend, dynamic):
    # AOT autograd rebuilds an output that is a view of another value from that value's memory; with symbolic
    # sizes through as_strided, which dropped the bits: the values came back unnegated (fuzz a194:1048).
    compiled = compiler.compile(fn, backend=backend, dynamic=dynamic)
    for n in (2, 3):
        real = torch.randn(n, n, generator=torch.Generator().manual_seed(n))
        made = (lambda: torch.complex(real, -real)) if fn is _expanded_conjugate else (lambda: real.clone())
        leaves = [made().requires_grad_(), made().requires_grad_()]
        expected, actual = fn(leaves[0].clone()), compiled(leaves[1].clone())
        _same(actual, expected)
        expected, actual = (expected[0], actual[0]) if isinstance(expected, tuple) else (expected, actual)
        if fn is not _written_imaginary_of_conjugate:  # (there the bits differ from eager's, not the values)
            assert (actual.is_neg(), actual.is_conj()) == (expected.is_neg(), expected.is_conj())
        weights = torch.randn(expected.shape, dtype=expected.dtype, generator=torch.Generator().manual_seed(0))
        for out in (expected, actual):
            (out * weights).real.sum().backward()
        torch.testing.assert_close(leaves[1].grad, leaves[0].grad)
