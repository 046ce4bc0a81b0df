"""NumPy code compiled with the default backend (inductor-lite): torch._numpy nodes lowered to kernels."""

from __future__ import annotations

import numpy as np
import torch

from dynajit import compiler
from dynajit._dynamo import lookup_backend
from dynajit.capture import reset
from dynajit.capture.testing import CompileCounterWithBackend


def _compile(fn):
    reset()
    counter = CompileCounterWithBackend(lookup_backend("inductor"))
    return compiler.compile(fn, backend=counter, fullgraph=True), counter


def _same(actual, expected):
    assert type(actual) is type(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def numpy_block(a, b):
    c = np.sin(a) * 2 + b.T @ a
    c += 1
    return c.sum(axis=0), c.mean(), np.linalg.norm(c, axis=1), c.astype(np.float32)


def test_ndarray_arithmetic_reductions_and_linalg_match_eager():
    a = np.linspace(-1, 1, 12).reshape(3, 4)
    b = np.arange(9.0).reshape(3, 3) / 10
    compiled, counter = _compile(numpy_block)
    for got, want in zip(compiled(a, b), numpy_block(a, b)):
        _same(got, want)
    assert counter.frame_count == 1


def test_tensor_numpy_round_trip_and_in_place_write():
    def f(x):
        n = (x * 3).numpy()
        n[0] = -1.0
        return torch.from_numpy(np.exp(n)) + x

    x = torch.randn(4, 3)
    compiled, counter = _compile(f)
    torch.testing.assert_close(compiled(x), f(x))
    assert counter.frame_count == 1


def test_ndarray_argument_written_in_place():
    def f(a):
        a *= 2
        a[1] += np.float32(0.5)
        return np.cumsum(a, axis=0) / np.linalg.norm(a)

    eager_arg, compiled_arg = np.ones((4, 2), dtype=np.float32), np.ones((4, 2), dtype=np.float32)
    expected = f(eager_arg)
    compiled, counter = _compile(f)
    _same(compiled(compiled_arg), expected)
    np.testing.assert_array_equal(compiled_arg, eager_arg)
    assert counter.frame_count == 1


def test_fft_of_arrays_and_tensors_runs_its_complex_ops_through_aten():
    """inductor-lite generates no kernel for complex numbers: those ops call aten, the rest is lowered."""

    def f(a, t):
        spectrum = np.fft.rfft(a, axis=0)
        return spectrum.real * 2, np.abs(np.fft.fft(a[:, 0])), torch.view_as_real(torch.fft.fft(t) * (1 + 2j)) + 1

    a, t = np.linspace(0, 1, 8, dtype=np.float32).reshape(4, 2), torch.randn(8, dtype=torch.float64)
    compiled, counter = _compile(f)
    got, want = compiled(a, t), f(a, t)
    _same(got[0], want[0])
    _same(got[1], want[1])
    torch.testing.assert_close(got[2], want[2])
    assert counter.frame_count == 1
