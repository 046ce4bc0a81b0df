"""Reductions and the normalisations built from them (softmax, log_softmax, layer_norm, ...)."""

import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from ilite_helpers import check, check_cases, compiled

REDUCTIONS = {
    "sum_all": lambda x: x.sum(), "sum_0": lambda x: x.sum(0), "sum_1_keep": lambda x: x.sum(1, keepdim=True),
    "sum_last": lambda x: x.sum(-1), "sum_01": lambda x: x.sum((0, 1)), "sum_02": lambda x: x.sum((0, 2)),
    "mean_all": lambda x: x.mean(), "mean_2": lambda x: x.mean(2), "mean_12_keep": lambda x: x.mean((1, 2), keepdim=True),
    "amax_2": lambda x: x.amax(2), "amax_0": lambda x: x.amax(0), "amin_1": lambda x: x.amin(1),
    "max_all": lambda x: x.max(), "min_all": lambda x: x.min(), "max_dim_values": lambda x: x.max(2).values,
    "max_dim_indices": lambda x: x.max(2).indices, "min_dim": lambda x: x.min(1).values,
    "argmax_2": lambda x: x.argmax(2), "argmin_0": lambda x: x.argmin(0), "argmax_all": lambda x: x.argmax(),
    "argmax_keep": lambda x: x.argmax(1, keepdim=True), "prod_2": lambda x: (x * 0.5 + 1).prod(2),
    "prod_all": lambda x: (x * 0.1 + 1).prod(), "var_2": lambda x: x.var(2), "var_0_unbiased0": lambda x: x.var(0, unbiased=False),
    "var_all": lambda x: x.var(), "std_1": lambda x: x.std(1), "std_mean": lambda x: torch.std_mean(x, 2)[0],
    "var_mean": lambda x: torch.var_mean(x, 1, keepdim=True)[1], "any": lambda x: (x > 1).any(2),
    "all": lambda x: (x > -2).all(1), "any_all": lambda x: (x > 2).any(), "norm": lambda x: torch.linalg.vector_norm(x, dim=2),
    "logsumexp": lambda x: torch.logsumexp(x, 1), "sum_of_product": lambda x: (x * x.exp()).sum(2),
    "centered": lambda x: x - x.mean(2, keepdim=True), "count": lambda x: (x > 0).sum(2),
}  # fmt: skip

NORMS = {
    "softmax_last": lambda x: torch.softmax(x, -1), "softmax_0": lambda x: torch.softmax(x, 0),
    "log_softmax": lambda x: torch.log_softmax(x, -1), "log_softmax_1": lambda x: torch.log_softmax(x, 1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)), "layer_norm_2d": lambda x: F.layer_norm(x, x.shape[1:]),
    "group_norm": lambda x: F.group_norm(x, 3), "batch_norm_train": lambda x: F.batch_norm(x, None, None, training=True),
    "normalize": lambda x: F.normalize(x, dim=-1), "rms_norm": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
    "softmax_scaled": lambda x: torch.softmax(x * 0.125, -1) * 2, "softmin": lambda x: F.softmin(x, -1),
}  # fmt: skip


def test_reductions():
    assert check_cases(REDUCTIONS, torch.randn(4, 6, 37), atol=1e-4, rtol=1e-4) == len(REDUCTIONS)


def test_normalisations():
    check_cases(NORMS, torch.randn(4, 6, 40), atol=1e-5, rtol=1e-5)


def test_layer_norm_with_affine_is_one_kernel():
    def fn(x, w, b):
        return F.layer_norm(x, (32,), w, b)

    c = check(fn, torch.randn(8, 32), torch.randn(32), torch.randn(32), atol=1e-5, rtol=1e-5)
    from dynajit.inductor_lite import compiled_graphs

    (graph,) = compiled_graphs(c)
    assert graph.info["kernels"] == 1


def test_softmax_is_one_kernel_with_three_loops():
    c = check(lambda x: torch.softmax(x, -1), torch.randn(16, 100))
    from dynajit.inductor_lite import compiled_graphs

    (graph,) = compiled_graphs(c)
    assert graph.info["kernels"] == 1
    assert graph.kernel_source.count("#pragma omp parallel") <= 1
    # exp(x - max) is recomputed in the last loop rather than written out: only the result is allocated.
    assert len(re.findall(r"= new\d+\(", graph.wrapper_source)) == 1


@pytest.mark.parametrize("shape", [(300, 257), (3, 1000)])
def test_large_reductions(shape):
    check_cases({"softmax": lambda x: torch.softmax(x, -1), "sum0": lambda x: x.sum(0), "var": lambda x: x.var(-1)},
                torch.randn(shape), atol=1e-4, rtol=1e-4)  # fmt: skip


def test_nan_propagation():
    x = torch.randn(4, 40)
    x[1, 7] = float("nan")
    cases = {"amax": lambda x: x.amax(1), "amin": lambda x: x.amin(1), "argmax": lambda x: x.argmax(1),
             "sum": lambda x: x.sum(1), "maximum": lambda x: torch.maximum(x, x.flip(0))}  # fmt: skip
    check_cases(cases, x)


def test_integer_and_bool_reductions():
    x = torch.randint(-5, 5, (3, 20))
    cases = {"sum": lambda x: x.sum(1), "sum_all": lambda x: x.sum(), "max": lambda x: x.amax(1),
             "prod": lambda x: x.clamp(1, 2).prod(1), "argmin": lambda x: x.argmin(1),
             "bool_sum": lambda x: (x > 0).sum(0), "mean_float": lambda x: x.float().mean(1)}  # fmt: skip
    check_cases(cases, x)


COLUMNS = {
    "sum0": lambda x: x.sum(0), "mean0": lambda x: x.mean(0), "amax0": lambda x: x.amax(0),
    "amin0_keep": lambda x: x.amin(0, keepdim=True), "prod0": lambda x: (x * 0.01 + 1).prod(0),
    "any0": lambda x: (x > 2.5).any(0), "all0": lambda x: (x > -3).all(0), "count0": lambda x: (x > 0).sum(0),
    "sum0_of_product": lambda x: (x * x.sigmoid()).sum(0), "mean0_scaled": lambda x: x.mean(0) * 3 + 1,
    "sum_middle": lambda x: x.view(10, 13, 300).sum(1), "bf16_sum0": lambda x: x.bfloat16().sum(0).float(),
}  # fmt: skip


def test_reductions_along_a_strided_dimension_run_over_contiguous_column_blocks():
    # 130 rows (not a multiple of the 64-row runs) and 300 columns (not a multiple of the 80-column blocks: four
    # blocks for the threads to share).
    x = torch.randn(130, 300)
    x[77, 5] = float("nan")
    check_cases(COLUMNS, x, atol=1e-4, rtol=1e-4)
    from dynajit.inductor_lite import compiled_graphs

    c = check(lambda x: (x.sum(0), x.amax(0)), torch.randn(130, 300), atol=1e-5, rtol=1e-5)
    (graph,) = compiled_graphs(c)
    assert "x0_b += 80" in graph.kernel_source and "r0_b += 64" in graph.kernel_source
    # A long column sum is combined in runs into a double total, so it is at least as close to float64 as eager's.
    long = torch.randn(20000, 64, generator=torch.Generator().manual_seed(0))
    (total,) = check(lambda x: (x.sum(0),), long, atol=1e-4, rtol=1e-5)(long)
    exact = long.double().sum(0)
    assert (total.double() - exact).abs().max() <= (long.sum(0).double() - exact).abs().max()


def test_the_values_of_a_bool_max_along_a_dim_leave_its_unused_indices_out_of_the_kernel():
    # gcc 12 at -O3 with AVX-512 vectorised a bool max beside its dead argmax into a wrong max (True for a row
    # of Falses); the kernel now computes only what it stores.
    x = torch.randint(0, 2, (5, 2, 5, 2), generator=torch.Generator().manual_seed(0)).bool()
    c = check(lambda x: torch.max(x, 2)[0], x)
    from dynajit.inductor_lite import compiled_graphs

    (graph,) = compiled_graphs(c)
    assert "int64_t acc" not in graph.kernel_source  # no argmax accumulator


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("width", [3, 512])
def test_a_rows_statistics_are_computed_once_before_the_loop_that_reads_them(dtype, width):
    # The statistics' arithmetic (the mean's refinement, the clamped variance, rsqrt) read inside the loop of a
    # layer norm with GELU kept g++ from vectorising that loop: 7x slower than eager.
    def fn(x, w, b):
        return F.gelu(F.layer_norm(x, (width,), w, b))

    tolerance = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-5, "rtol": 1e-5}
    args = (torch.randn(16, width, dtype=dtype), torch.randn(width, dtype=dtype), torch.randn(width, dtype=dtype))
    c = check(fn, *args, **tolerance)
    from dynajit.inductor_lite import compiled_graphs

    (graph,) = compiled_graphs(c)
    bodies, body, end = [], [], None
    for line in graph.kernel_source.splitlines():
        if end is None and "for (int64_t r0 = " in line:
            body, end = [], line[: len(line) - len(line.lstrip())] + "}"
            bodies.append(body)
        elif line == end:
            end = None
        elif end is not None:
            body.append(line)
    assert bodies and not [line for body in bodies for line in body if "_final" in line], graph.kernel_source


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.var(), lambda x: x.std(1, correction=3), lambda x: torch.var_mean(x, (0, 2))[0]],
    ids=["var", "std_correction_3", "var_mean"],
)
def test_var_and_std_compile_without_a_warning_eager_never_gives(fn):
    # The check of eager's errors runs the op on small stand-ins: of size 1, var and std warned that the degrees
    # of freedom are <= 0, which under warnings-as-errors (pytest -W error) failed the compile.
    from dynajit.inductor_lite import _eager_checks

    _eager_checks._PASSED.clear()  # the check is made once per op and stand-ins: make it now
    x = torch.randn(4, 5, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(fn, x)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x / x.amax()).long(),  # a quotient of 1.0 came out 0.99999994 (fuzz a89-0:640), 0 as an int
        lambda x: x / x.sum(-1, keepdim=True),
        lambda x: x.amax(1, keepdim=True) / x,
    ],
    ids=["by_amax_then_long", "by_row_sum", "row_max_by_elements"],
)
def test_dividing_by_a_reduction_gives_eagers_quotients_exactly(fn):
    # A division is a division: multiplying by the reciprocal of the row's result rounds differently.
    x = torch.randn(4, 2, 4, 4, generator=torch.Generator().manual_seed(1)).abs() + 0.5
    expected = fn(x)
    actual = compiled(fn, x)(x)
    assert torch.equal(actual, expected)


def test_layer_norm_normalizes_x_minus_its_mean_and_is_nan_where_eagers_moments_overflow():
    # Eager's kernel computes (x - mean) * rstd. The affine map x * rstd - rstd * mean rounds at the size of x * rstd:
    # a pair of nearly equal values (rstd near 1 / sqrt(eps)) normalized 1e-4 off eager (fuzz a182:776, whose sum
    # then cancelled). Eager's rstd is NaN where the mean's square overflows (a row holding the largest float32,
    # nan_to_num of an inf, fuzz a91-1:291; a row of 1e30), where the variance as sums is 0 and the row 0.
    fn = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b)
    big = torch.tensor([[torch.finfo(torch.float32).max], [1.5], [-2.0]])
    check(fn, big, torch.ones(1), torch.zeros(1))
    huge = torch.tensor([[torch.finfo(torch.float32).max, 1.0], [1e30, 1e30], [2e19, 2e19], [1.0, 2.0]])
    g = torch.Generator().manual_seed(1)
    pairs = torch.randn(400, 1, generator=g) + 1e-3 * torch.randn(400, 2, generator=g)
    for transposed in (False, True):  # (a transposed input is decomposed rather than lowered whole)
        layout = (lambda t: t.t().contiguous().t()) if transposed else (lambda t: t)
        check(fn, layout(huge), torch.ones(2), torch.zeros(2))
        check(fn, layout(pairs), None, None, atol=1e-5, rtol=1e-5)
    x = torch.randn(6, 33, generator=torch.Generator().manual_seed(3)) * 3 + 1
    check(fn, x, torch.randn(33), torch.randn(33))
    check(fn, x.bfloat16(), torch.randn(33).bfloat16(), None)
