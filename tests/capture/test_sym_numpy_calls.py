"""NumPy module functions, np.linalg, np.fft, np.random, Tensor.numpy() and torch.from_numpy while tracing."""

import numpy as np
import pytest
import torch
from numpy_asserts import break_reasons, check_numpy

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def a33():
    return np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])


def test_constructors_use_numpy_default_dtypes():
    def f(x):
        return np.arange(4), np.array([1.5, 2.0]), np.zeros((2, 2)), np.ones(3, dtype=np.int32), np.linspace(0, 1, 5), x

    check_numpy(f, np.ones(2))


def test_module_functions():
    def f(a, b):
        return (
            np.concatenate([a, b]),
            np.stack([a, b], axis=1),
            np.where(a > b, a, b),
            np.einsum("ij,kj->ik", a, b),
            np.dot(a, b.T),
            np.clip(a, 0.5, 2.0),
            np.maximum(a, b),
            np.sum(a * b, axis=-1),
            np.mean(a),
            np.transpose(a),
            np.expand_dims(a, 0),
            np.cumsum(a, axis=1),
        )

    check_numpy(f, a33(), a33()[::-1].copy())


def test_numpy_functions_on_tensors_are_breaks():
    # Eager NumPy runs a tensor through Tensor.__array__ / __array_wrap__ (np.sin(t) is a tensor again).
    reasons = break_reasons(lambda t: (np.sin(t * 2), np.concatenate([t, t])), torch.randn(3, 4))
    assert any("np.sin called with a torch.Tensor" in r for r in reasons)


def test_linalg():
    def f(a, b):
        return (
            np.linalg.norm(a),
            np.linalg.norm(a, axis=0),
            np.linalg.inv(a),
            np.linalg.solve(a, b),
            np.linalg.det(a),
            np.linalg.cholesky(a),
            np.linalg.eigh(a)[0],
            np.linalg.qr(a)[1].shape,
            np.linalg.matrix_rank(a),
        )

    check_numpy(f, a33(), np.arange(3.0))


def test_linalg_on_float32_keeps_float32():
    check_numpy(lambda a: (np.linalg.inv(a), np.linalg.norm(a)), a33().astype(np.float32))


def test_fft():
    def f(a):
        return np.fft.fft(a), np.fft.rfft(a).real, np.fft.ifft(np.fft.fft(a)).real, np.abs(np.fft.fft2(a))

    check_numpy(f, a33())


def test_ufunc_out_writes_the_given_array():
    def f(a, b):
        res = np.add(a, b, out=a)
        np.multiply(a, 2, out=b)
        return res

    check_numpy(f, a33(), np.ones((3, 3)))


def test_ufunc_out_that_would_cast_unsafely_raises_as_numpy_does():
    check_numpy(lambda a, b: np.add(a, 0.5, out=b), np.ones(3), np.zeros(3, dtype=np.int64), graphs=None)


def test_random_is_a_break_naming_numpy_random_state():
    np.random.seed(0)
    capture.reset()

    def f(x):
        return x + np.random.rand(3)

    with capture.config.patch(strict=False), capture.observe() as seen:
        np.random.seed(1)
        actual = capture.optimize(CompileCounter())(f)(np.zeros(3))
    np.random.seed(1)
    np.testing.assert_array_equal(actual, f(np.zeros(3)))  # the same draws as eager
    reasons = [b.reason for fr in seen.frames for b in fr.graph_breaks] + [fr.reason for fr in seen.frames]
    assert any("np.random.rand draws from NumPy's random state" in str(r) for r in reasons)


def test_data_dependent_bool_functions_are_breaks():
    assert any("np.allclose" in r for r in break_reasons(lambda a: np.allclose(a, a + 1), a33()))


def test_tensor_numpy_round_trip():
    def f(t):
        n = t.numpy()
        m = np.sin(n) * 2
        return torch.from_numpy(m) + t, m, n

    check_numpy(f, torch.randn(2, 3))


def test_tensor_numpy_shares_memory_like_eager():
    def f(t):
        n = t.numpy()
        n += 1  # writes t, as in eager
        return t * 2

    check_numpy(f, torch.randn(2, 3))


def test_tensor_numpy_result_is_the_tensors_memory():
    t = torch.zeros(3)
    n = capture.optimize(CompileCounter(), fullgraph=True)(lambda x: x.numpy())(t)
    n[0] = 5.0
    assert t[0].item() == 5.0


def test_tensor_numpy_of_a_tensor_that_requires_grad_raises_as_eager():
    t = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        capture.optimize(CompileCounter())(lambda x: (x * 2).numpy())(t)
    check_numpy(lambda x: (x * 2).numpy(force=True), t)


def test_torch_from_numpy_and_as_tensor():
    def f(a):
        t = torch.from_numpy(a)
        return t * 2, torch.as_tensor(a, dtype=torch.float32), torch.tensor(a) + 1

    check_numpy(f, a33())


def test_from_numpy_shares_the_arrays_memory():
    def f(a):
        t = torch.from_numpy(a)
        t.mul_(3)
        return a

    check_numpy(f, a33())


def test_numpy_code_between_torch_code_is_one_graph():
    def f(x):
        y = torch.relu(x)
        z = np.tanh(y.numpy()) + np.float32(1)
        return torch.from_numpy(z).sum(dim=0)

    counter = check_numpy(f, torch.randn(4, 3))
    assert counter.frame_count == 1


def test_code_after_a_break_sees_the_arrays():
    def f(a):
        b = a * 2
        print("", end="")
        return b + 1

    counter = check_numpy(f, a33(), graphs=None, fullgraph=False)
    assert counter.frame_count == 2


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.complex64, np.int32])
def test_fft_keeps_numpy_result_dtypes(dtype):
    def f(a):
        return np.fft.fft(a), np.fft.ifft(a), np.fft.irfft(a), np.fft.fftshift(a)

    check_numpy(f, np.linspace(0, 1, 8).astype(dtype))


def test_np_asarray_and_np_array_of_a_tensor():
    def f(t):
        view = np.asarray(t)
        copy = np.array(t, dtype=np.float64)
        view *= 2  # writes t, as eager's view does
        return copy, view.sum(), t + 1

    check_numpy(f, torch.randn(3, 2))


def test_functions_writing_their_arguments_are_breaks():
    def f(a, b):
        np.copyto(a, b)
        return a

    reasons = break_reasons(f, np.zeros(3), np.ones(3))
    assert any("np.copyto writes its first argument in place" in r for r in reasons)


def test_tensors_in_ndarray_methods_and_indices_are_breaks():
    t, a = torch.ones(3), np.ones(3)
    assert any("ndarray.dot called with a torch.Tensor" in r for r in break_reasons(lambda x, y: y.dot(x), t, a))
    idx = torch.tensor([0, 1])
    assert any("indexing an ndarray with a torch.Tensor" in r for r in break_reasons(lambda x, y: y[x], idx, a))


def test_from_numpy_of_a_numpy_scalar_raises_as_eager():
    check_numpy(lambda a: torch.from_numpy(a.sum()), np.ones(3), graphs=None)


def test_arrays_of_dynamic_tensors_stay_one_graph():
    counter = CompileCounter()

    def f(t):
        n = t.numpy()
        return np.sin(n).sum(axis=0), n.T @ np.ones(n.shape[0], dtype=np.float32), n.shape

    compiled = capture.optimize(counter, dynamic=True, fullgraph=True)(f)
    for rows in (3, 5, 7):
        t = torch.randn(rows, 2)
        for got, want in zip(compiled(t), f(t)):
            if isinstance(want, tuple):
                assert got == want
            else:
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # sums near 0: absolute
    assert counter.frame_count == 1
