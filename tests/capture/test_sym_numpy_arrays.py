"""ndarray arguments, results, operators, ufuncs, methods and attributes traced through torch._numpy."""

import numpy as np
import pytest
import torch
from numpy_asserts import assert_same_numpy, break_reasons, check_numpy

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def a23(dtype=np.float64):
    """A 2x3 array of ``dtype``: halves for floating dtypes, 0..5 for integer ones."""
    values = np.arange(6).reshape(2, 3)
    return (values / 2).astype(dtype) if np.dtype(dtype).kind in "fc" else values.astype(dtype)


def n_ufuncs(a):
    return np.sin(a) + np.exp(-a) * 2 - np.sqrt(np.abs(a))


def n_operators(a, b):
    return (a + 1) * b - a / 3, a @ b.T, -a, a**2, a // 2, a % 2, a > b


def n_methods(a):
    return a.sum(), a.sum(axis=0), a.mean(axis=1, keepdims=True), a.max(), a.argmax(), a.std(), a.cumsum()


def n_shape_methods(a):
    return a.reshape(3, 2), a.T, a.transpose(1, 0).copy(), a.ravel(), a.astype(np.float32), a.flatten()


def n_attributes(a):
    return a.shape, a.ndim, a.size, a.dtype, a.itemsize, a.strides, a.nbytes


def n_scalar_results(a):
    return a.sum() * 2, a[0, 1], a[0][1], np.float64(2.5) * a.max(), a.reshape(()) if a.size == 1 else a[...]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_ufuncs_on_an_ndarray_argument(dtype):
    counter = check_numpy(n_ufuncs, a23(dtype))
    assert counter.op_count >= 5


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_operators_follow_numpy_promotion(dtype):
    check_numpy(n_operators, a23(dtype), a23(dtype) + 1)


def test_python_scalars_promote_as_numpy_does():
    check_numpy(lambda a: (a + 1.5, a * 2, a / 2, 2**a, a + True), a23(np.float32))
    check_numpy(lambda a: (a + 1.5, a * 2, a / 2, a // 2), a23(np.int32))


def test_reductions_and_methods():
    check_numpy(n_methods, a23())
    check_numpy(n_methods, a23(np.int64))


def test_views_copies_and_casts():
    check_numpy(n_shape_methods, a23())


def test_attributes_are_constants_of_the_guarded_array():
    counter = check_numpy(n_attributes, a23(), graphs=None)
    assert counter.frame_count == 0  # nothing computed: metadata only
    check_numpy(lambda a: np.zeros(a.shape, dtype=a.dtype) + a, a23(np.float32))


def test_zero_dim_results_are_numpy_scalars_where_numpy_gives_scalars():
    check_numpy(n_scalar_results, a23())
    check_numpy(lambda a: (a.sum(), np.sin(a), a + 1, a.copy(), a.reshape(()), a[...]), np.array(1.5))


def test_indexing_and_item_assignment():
    def f(a):
        b = a.copy()
        b[0] = 7
        b[:, 1] += a[1]
        return b, a[:, ::2], a[None, 1]

    check_numpy(f, a23())


def test_in_place_operators_write_the_callers_array():
    def f(a):
        a += 1
        a *= 2
        return a.sum()

    check_numpy(f, a23())


def test_in_place_ops_on_a_view_reach_its_base():
    def f(a):
        v = a[0]
        v -= 10
        return a

    check_numpy(f, a23())


def test_returned_argument_is_the_callers_array():
    arr = a23()
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(lambda a: (a, a * 2))
    same, doubled = compiled(arr)
    assert same is arr
    assert_same_numpy(doubled, arr * 2)


def test_the_same_result_returned_twice_is_one_array():
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(lambda a: [a + 1] * 2)
    first, second = compiled(a23())
    assert first is second


def test_guards_recompile_on_a_new_dtype_or_shape():
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(lambda a: a * 2)
    for arr in (a23(), a23(), a23(np.float32), np.ones(4), np.ones(4)):
        assert_same_numpy(compiled(arr), arr * 2)
    assert counter.frame_count == 3
    strided = np.ones((4, 4))[:, ::2]
    assert_same_numpy(compiled(strided), strided * 2)
    assert counter.frame_count == 4


def test_two_names_for_one_array_are_one_input():
    def f(a, b):
        a += 1
        return b * 1

    check_numpy(f, *[a23()] * 2)  # copies: two arrays
    arr = a23()
    out = capture.optimize(CompileCounter(), fullgraph=True)(f)(arr, arr)
    assert_same_numpy(out, a23() + 1)


def test_iteration_over_rows():
    check_numpy(lambda a: [row.sum() for row in a], a23())


def test_numpy_scalar_and_dtype_arguments():
    check_numpy(lambda a, s: a * s, a23(np.float32), np.float32(3.0))
    check_numpy(lambda a: a.astype(np.int32) + np.ones(3, dtype="int16"), a23())


def test_data_dependent_reads_are_breaks_naming_them():
    def f(a):
        total = (a * 2).sum().item()
        return a + total

    assert any("ndarray.item()" in r for r in break_reasons(f, a23()))

    def g(a):
        if (a > 1).any():
            return a + 1
        return a - 1

    assert any("truth value of an ndarray" in r for r in break_reasons(g, a23()))


def test_unsupported_arrays_are_breaks():
    frozen = a23()
    frozen.flags.writeable = False
    assert any("read-only ndarray" in r for r in break_reasons(lambda a: a + 1, frozen))
    assert any("strides" in r for r in break_reasons(lambda a: a + 1, a23()[:, ::-1]))
    assert any("dtype" in r for r in break_reasons(lambda a: a[0], np.array(["x"])))


def test_a_tensor_and_an_ndarray_in_one_operator_is_a_break():
    reasons = break_reasons(lambda t, a: t.numpy() + a, torch.ones(2, 3, dtype=torch.float64), a23())
    assert reasons == []
    assert any("mixing" in r for r in break_reasons(lambda t, a: t * 2 + a, torch.ones(2, 3), a23()))


def test_integer_division_by_zero_gives_zero_as_numpy_does():
    def f(a, b):
        return a // b, a % b, a // 0, np.floor_divide(a, b), np.remainder(7, b)

    check_numpy(f, np.arange(6), np.array([0, 1, 2, 0, 3, 0]))


def test_integer_true_division_is_double_precision():
    check_numpy(lambda a, b: (a / 3, a / b, np.true_divide(a, b), a / np.float32(2)), a23(np.int32), a23(np.int64) + 1)


def test_operations_numpy_refuses_raise_as_eager():
    u8 = np.arange(4, dtype=np.uint8)
    check_numpy(lambda a: a + 300, u8, graphs=0)  # OverflowError: NEP 50 Python int out of range
    check_numpy(lambda a: a * 2 + (a**-1), np.arange(1, 4), graphs=None)  # integers to negative powers


def test_torch_numpy_divergences_are_breaks_naming_them():
    reasons = break_reasons(lambda a: np.median(a * 2), a23())
    assert any("np.median: torch._numpy gives shape (1,) where NumPy gives shape ()" in r for r in reasons)
    reasons = break_reasons(lambda a: np.cumsum(a * 2), a23(np.int32))
    assert any("np.cumsum: torch._numpy gives dtype int32 where NumPy gives dtype int64" in r for r in reasons)


def test_results_computed_in_more_precision_are_cast_to_numpys_dtype():
    check_numpy(lambda a: (np.sin(a > 1), np.exp(a > 1)), a23())  # NumPy: float16 for bool inputs


def test_writes_are_mutating_nodes_that_graph_passes_keep():
    from dynajit.fxgraph import eliminate_dead_code

    def f(t):
        n = t.numpy()
        n += 1
        n[0] = 5.0
        return t.sum()

    counter = check_numpy(f, torch.zeros(3))
    (gm,) = counter.graphs
    before = [node.target.__name__ for node in gm.graph.nodes if node.op == "call_function"]
    eliminate_dead_code(gm)
    after = [node.target.__name__ for node in gm.graph.nodes if node.op == "call_function"]
    assert "ndarray_iadd_" in after and "ndarray_setitem_" in after
    assert before == after


def test_non_method_attributes_are_breaks():
    assert any("ndarray.flat is not traced" in r for r in break_reasons(lambda a: (a * 2).flat[1], a23()))
    check_numpy(lambda a: (a * 2).flat[1], a23(), graphs=1, fullgraph=False)  # the product is traced
