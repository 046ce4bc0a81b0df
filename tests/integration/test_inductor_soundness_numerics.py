"""The default backend against eager: values.

A sweep of many ops over odd layouts and dtypes, and values that must come out as eager's kernels compute
them (the variance and batch norm of equal values, logsumexp in 16-bit floats, a guarded read in a loop).

Most cases run the function eagerly and compiled through ``inductor_differential.differential``, which
compares results, inputs after the call and exceptions; a frame that fell back to eager fails.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from inductor_differential import differential

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


# ------------------------------------------------------------------ many ops at once on odd layouts and dtypes


SWEEP = {
    "neg": lambda x: -x if x.dtype != torch.bool else ~x,
    "abs": torch.abs,
    "exp": torch.exp,
    "sign": torch.sign,
    "square": torch.square,
    "add_scalar": lambda x: x + 2,
    "mul_float": lambda x: x * 1.5,
    "sub_self_t": lambda x: x - x.flip(0),
    "div": lambda x: x / 3,
    "floor_div": lambda x: torch.div(x, 3, rounding_mode="floor"),
    "remainder": lambda x: x % 3,
    "maximum": lambda x: torch.maximum(x, x.flip(-1)),
    "where": lambda x: torch.where(x > 0, x, x * 2),
    "eq": lambda x: x == x.flip(0),
    "clamp": lambda x: x.clamp(-1, 2),
    "sum": lambda x: x.sum(0),
    "sum_all": lambda x: x.sum(),
    "amax": lambda x: x.amax(-1, keepdim=True),
    "argmax": lambda x: x.argmax(0),
    "any": lambda x: x.any(-1),
    "mean": lambda x: x.mean(-1),
    "var": lambda x: x.var(0),
    "cumsum": lambda x: x.cumsum(-1),
    "to_int": lambda x: x.to(torch.int32),
    "to_float": lambda x: x.float() * 2,
    "t_contiguous": lambda x: x.t().contiguous(),
    "reshape": lambda x: x.reshape(-1) * 1,
    "cat": lambda x: torch.cat([x, x[:1]]),
    "expand_add": lambda x: x[:1].expand_as(x) + x,
}


SWEEP_LAYOUTS = {
    "offset": lambda t: t(5, 6)[1:4, 2:],
    "transposed": lambda t: t(4, 3).t(),
    "expanded": lambda t: t(1, 4).expand(3, 4),
    "step": lambda t: t(6, 8)[::2, ::2],
    "size_one": lambda t: t(1, 4),
}


def _tensor(dtype):
    def make(*shape):
        if dtype == torch.bool:
            return torch.rand(shape) > 0.5
        if dtype.is_floating_point:
            return (torch.randn(shape) * 3).to(dtype)
        return torch.randint(-9, 9, shape).to(dtype)

    return make


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("layout", list(SWEEP_LAYOUTS))
def test_op_sweep_matches_eager(layout, dtype):
    torch.manual_seed(0)
    x = SWEEP_LAYOUTS[layout](_tensor(dtype))
    names = []
    for name, op in SWEEP.items():  # the ops eager computes for this dtype (refusals are tested in the errors suite)
        try:
            op(x)
            names.append(name)
        except Exception:
            continue

    def fn(x):
        return tuple(SWEEP[name](x) for name in names)

    differential(fn, x)


# Ops whose eager results on NaN, infinities, signed zeros and halfway values are the same in its vectorised and
# scalar loops (so they are eager's answers, not its loop's): each must come out as eager's, signs of zeros too.
SPECIAL_SWEEP = {
    "abs": torch.abs, "neg": torch.neg, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc, "sign": torch.sign,
    "round1": lambda x: torch.round(x, decimals=1), "pow_half": lambda x: x**0.5, "pow_minus_half": lambda x: x**-0.5,
    "pow_minus_one": lambda x: x**-1, "pow_two": lambda x: x**2, "exp": torch.exp, "log": torch.log,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "maximum": lambda x: torch.maximum(x, x.flip(0)),
    "minimum": lambda x: torch.minimum(x, x.flip(0)), "fmax": lambda x: torch.fmax(x, x.flip(0)),
    "clamp_nan_bound": lambda x: torch.clamp(x, min=x.flip(0)), "where": lambda x: torch.where(x > 0, x, -x),
    "isnan": torch.isnan, "isinf": torch.isinf, "signbit": torch.signbit, "nan_to_num": torch.nan_to_num,
    "remainder": lambda x: torch.remainder(x, 1.5), "fmod": lambda x: torch.fmod(x, -1.5),
    "floor_div": lambda x: torch.div(x, 3, rounding_mode="floor"), "amax": lambda x: x.amax(0),
    "argmax": lambda x: x.argmax(0), "sum": lambda x: x.sum(0), "softmax": lambda x: x.softmax(0),
    "var": lambda x: x.var(0), "std": lambda x: x.std(0), "cumsum": lambda x: x.cumsum(0),
    "sort": lambda x: x.sort(dim=0, stable=True), "to_int32": lambda x: x.clamp(-1e9, 1e9).nan_to_num(0).int(),
}  # fmt: skip
_SPECIAL_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -3.7, 1e30, -1e30]
_SPECIAL_VALUES += [float("inf"), -float("inf"), float("nan"), 1e-40, 255.0, 256.0, -129.0, 7e4, 0.25, -1e-3]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)  # (bfloat16: eager's rsqrt rounds twice
def test_special_values_through_many_ops_are_eagers(dtype):  # in its scalar loop, an ulp off, and once in the other)
    """A sweep over the values kernels get wrong: NaN, infinities, -0.0, halves, overflow. It found rounding
    to decimals, ``(-inf) ** 0.5``, NaN clamp bounds, ``abs(-0.0)`` and ``var`` overflows the kernels got wrong."""
    x = torch.tensor(_SPECIAL_VALUES, dtype=torch.float64).to(dtype).reshape(-1, 1).expand(-1, 3).t().contiguous()
    x = x.t()  # (23, 3): reductions along 0 over every special value; a transposed layout

    def fn(a):
        return tuple(op(a * 1) for op in SPECIAL_SWEEP.values())

    expected = fn(x)
    differential(fn, x)
    actual = compiler.compile(fn)(x)
    for name, e, a in zip(SPECIAL_SWEEP, expected, actual):
        for e_t, a_t in zip(*(t if isinstance(t, tuple) else (t,) for t in (e, a))):
            zeros = (e_t == 0) & e_t.is_floating_point()
            assert torch.equal(e_t[zeros].signbit(), a_t[zeros].signbit()), name


# ------------------------------------------------------------------ values as eager's kernels compute them


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize("exponent", ["0-d", "tensor", "python int"])
def test_an_integer_power_with_a_negative_exponent_is_eagers(dtype, exponent):
    """Eager's integer power of a negative exponent keeps 1 and -1 (-1 for an odd exponent) and gives 0 for every
    other base, 0 included; the kernels gave 0 for -1."""
    base = torch.tensor([-1, 1, -1, 2, 0, -2, 3, -1], dtype=dtype)
    powers = {
        "0-d": torch.tensor(-3, dtype=dtype),
        "tensor": torch.tensor([-1, -2, -3, -4, -1, -1, -2, 0], dtype=dtype),
        "python int": None,
    }
    if exponent == "python int":  # eager refuses a negative Python int exponent for an integer tensor: so must we
        differential(lambda a: (a * 2 // 2) ** -3, base)
    else:
        differential(lambda a, b: (a * 2 // 2) ** b, base, powers[exponent])


_SPECIAL = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    3.7,
    -3.7,
    255.0,
    1e30,
    float("inf"),
    -float("inf"),
    float("nan"),
]


def _same_signs_of_zero(fn, x):
    """The compiled result's zeros have eager's signs (``assert_close`` takes -0.0 for 0.0)."""
    expected, actual = fn(x.clone()), compiler.compile(fn)(x.clone())
    zeros = expected == 0
    assert torch.equal(expected[zeros].signbit(), actual[zeros].signbit()), (expected, actual)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
def test_zero_and_negative_zero_constants_in_one_kernel_keep_their_signs(dtype):
    """0.0 == -0.0, and the kernel's common-subexpression reuse computed ``x * -0.0`` as the ``x * 0.0`` beside
    it: zeros of the wrong sign, and ``1 / (x * -0.0)`` gave the wrong infinity."""

    def fn(a):
        return a * 0.0, a * -0.0, 1 / (a * -0.0), 1 / (a * 0.0), -0.0 - a * 0.0

    x = torch.tensor([1.0, 2.0, -3.0], dtype=dtype)
    differential(fn, x)
    for i in range(5):
        _same_signs_of_zero(lambda a, i=i: fn(a)[i], x)


@pytest.mark.parametrize("decimals", [1, 2, -1])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_rounding_to_decimals_is_eagers(dtype, decimals):
    """``round(x, decimals=d)`` went through the lowering of ``round(x)``, which took one argument and dropped the
    rest: 3.7 rounded to 1 decimal came out 4.0."""
    x = torch.tensor([*_SPECIAL, 0.25, 0.35, 1.05, -12.345, 1234.5], dtype=torch.float64).to(dtype)
    differential(lambda a: torch.round(a * 1, decimals=decimals), x)


@pytest.mark.parametrize("op", [torch.floor, torch.ceil, torch.round, torch.trunc], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_rounding_an_integer_keeps_it(op, dtype):
    """Eager copies an integer tensor through floor, ceil, round and trunc; computed in double, an int64 above
    2**53 lost its last digits and 2**63 - 1 came back as -2**63."""
    values = {torch.int32: [0, -1, 7, 2**31 - 1, -(2**31)], torch.uint8: [0, 1, 128, 255]}
    values[torch.int64] = [0, -1, 7, 2**53 + 1, -(2**53) - 3, 2**63 - 1, -(2**63)]
    differential(lambda a: op(a + 0), torch.tensor(values[dtype], dtype=dtype))


@pytest.mark.parametrize("exponent", [0.5, -0.5, -1, -1.0, 2, 3, 1.5])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_a_power_of_a_number_has_eagers_special_values(dtype, exponent):
    """Eager takes a float32, float64 or bfloat16 tensor to the power 0.5, -0.5 or -1 by sqrt, rsqrt and a
    reciprocal, whose special values are not pow's: (-inf) ** 0.5 is NaN and (-0.0) ** 0.5 is -0.0 (the kernels
    called pow: inf and 0.0). float16, and an exponent in a tensor, go through pow itself, as compiled."""
    # (not 255: eager's bfloat16 rsqrt of a short tensor rounds twice, and 255 ** -0.5 comes out an ulp away)
    x = torch.tensor([v for v in _SPECIAL if v != 255.0], dtype=torch.float64).to(dtype)
    differential(lambda a: (a * 1) ** exponent, x)
    _same_signs_of_zero(lambda a: (a * 1) ** exponent, x)
    differential(lambda a, e: (a * 1) ** e, x, torch.tensor(exponent, dtype=dtype))


@pytest.mark.parametrize("bounds", [(0.5, -2.0), (-0.5, 2.7), (1.5, -2.5), (0, 100)])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16, torch.float32], ids=str)
def test_threshold_converts_its_bounds_as_eager(dtype, bounds):
    """Eager converts ``threshold``'s bound and value to the input's type (-0.5 to 0 for an integer); torch's
    decomposition computed an integer input in float32, and 2**31 - 1 came back as -2**31."""
    values = [0, 1, -1, 2, -2, 7, 100, -100, 2**24 + 1]
    if dtype in (torch.int32, torch.int64):
        values += [2**31 - 1, -(2**31)] + ([2**53 + 1, 2**63 - 1] if dtype == torch.int64 else [])
    differential(lambda a: torch.nn.functional.threshold(a * 1, *bounds), torch.tensor(values).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_the_absolute_value_of_negative_zero_is_zero(dtype):
    """``abs`` was ``a < 0 ? -a : a``, which keeps -0.0 (an L1 loss of equal values came out -0.0)."""
    x = torch.tensor([-0.0, 0.0, -1.5, 2.0, -float("inf"), float("nan")], dtype=dtype)
    differential(lambda a, b: (a - b).abs(), x, torch.zeros_like(x))
    _same_signs_of_zero(lambda a: (a * 1).abs(), x)
    _same_signs_of_zero(lambda a: torch.nn.functional.l1_loss(a, -a * 0, reduction="none"), x)


@pytest.mark.parametrize("bound", ["tensor", "number"])
@pytest.mark.parametrize("side", ["min", "max", "both"])
def test_a_nan_bound_makes_clamp_nan_as_in_eager(side, bound):
    """Eager's clamp gives NaN where a bound is NaN; the kernels compared ``x < bound`` (false for NaN) and kept x."""
    nan = float("nan")
    x = torch.tensor([-2.0, 0.5, 3.0, nan, 1.0, -1.0])
    lo = torch.tensor([nan, 0.0, nan, 0.0, -nan, -5.0])
    hi = torch.tensor([1.0, nan, 2.0, nan, 0.5, nan])
    if bound == "number":
        lo, hi = nan, nan
    bounds = {"min": {"min": lo}, "max": {"max": hi}, "both": {"min": lo, "max": hi}}[side]
    if bound == "tensor":
        differential(lambda a, *b: torch.clamp(a * 1, **dict(zip(bounds, b))), x, *bounds.values())
    else:
        differential(lambda a: torch.clamp(a * 1, **bounds), x)


@pytest.mark.parametrize("statistic", ["var", "std", "std_all", "var_keepdim"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_variance_and_deviation_of_large_values_are_eagers(dtype, statistic):
    """Eager's ``var`` and ``std`` of float32 and bfloat16 compute in double: the std of ``[0, 1e30, 0]`` is
    5.8e29, where squared float32 deviations overflowed to inf (and ``[1e30] * 3`` to inf - inf = NaN)."""
    x = torch.tensor([[1e30, 1e30, 1e30], [0.0, 1e30, 0.0], [1.0, 2.0, 4.0], [3e19, -3e19, 1.0]]).to(dtype)
    fns = {
        "var": lambda a: a.var(1), "std": lambda a: a.std(1, correction=0), "std_all": lambda a: a.std(),
        "var_keepdim": lambda a: torch.var(a, 0, keepdim=True),
    }  # fmt: skip
    differential(lambda a: fns[statistic](a * 1), x)


_NEAR_FLOAT_MAX = torch.finfo(torch.float32).max


def test_var_mean_of_values_near_the_largest_float_is_eagers():
    """Eager's ``var_mean`` of float32 accumulates in double: the mean of two values near the largest float32 is
    finite, where a float32 sum of them overflows to inf."""
    x = torch.tensor([[_NEAR_FLOAT_MAX, _NEAR_FLOAT_MAX, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    differential(lambda a: torch.var_mean(a * 1, 1, correction=0), x)


def test_training_batch_norm_statistics_of_values_near_the_largest_float_are_eagers():
    """Eager's training-mode batch norm computes its statistics in double (found by the fuzzer): a channel
    holding two values near the largest float32 has a finite mean, so its running mean is finite too; a float32
    sum gave inf. The output and the updated running statistics (mutated inputs) match eager's."""
    x = torch.tensor([0.0, 0.5, 1.0, 2.0]).repeat(2, 4, 1).view(2, 4, 2, 2).clone()
    x[0, 0, 0, 0] = x[1, 0, 1, 1] = _NEAR_FLOAT_MAX

    def train_step(a, running_mean, running_var, weight):
        return torch.nn.functional.batch_norm(a * 1, running_mean, running_var, weight, None, training=True)

    differential(train_step, x, torch.zeros(4), torch.ones(4), torch.ones(4))


_DOUBLE_MAX = torch.finfo(torch.float64).max


@pytest.mark.parametrize(
    "statistic",
    [lambda a: torch.var_mean(a, 1), lambda a: torch.std_mean(a, 1, correction=0), lambda a: a.var(), torch.std],
    ids=["var_mean", "std_mean", "var_all", "std_all"],
)
def test_the_moments_of_doubles_near_the_largest_are_eagers(statistic):
    """A double's sum may overflow where eager's Welford update does not: eager's ``var_mean`` of two values near
    the largest double is (0, the value), a sum's inf; of one beside its negation NaN. A whole tensor's ``var`` is
    eager's two-pass kernel's, inf."""
    rows = [[_DOUBLE_MAX, _DOUBLE_MAX, 0.0], [_DOUBLE_MAX, -_DOUBLE_MAX, 1.0], [1.0, 2.0, 4.0]]
    x = torch.tensor(rows, dtype=torch.float64)
    differential(lambda a: statistic(a * 1), x)
    differential(lambda a: statistic(a * 1), x[:, :2])


_INF = float("inf")


def _rows_holding_infinities(dtype):
    """Rows of eight, each holding infinities where Welford's update reaches a different mean: one inf last (inf),
    first or in the middle (NaN), a last -inf (-inf), two infs (NaN), an inf last beside a NaN (NaN), none."""
    x = torch.arange(56, dtype=torch.float64).view(7, 8).div(7).to(dtype)
    x[0, 7] = x[1, 0] = x[2, 3] = _INF
    x[3, 7] = -_INF
    x[4, 2] = x[4, 7] = _INF
    x[5, 7], x[5, 1] = _INF, float("nan")
    return x


@pytest.mark.parametrize("statistic", [torch.var_mean, torch.std_mean], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_the_mean_var_mean_gives_of_a_row_holding_an_infinity_is_welfords(dtype, statistic):
    """Eager's ``var_mean`` reads each row in order by Welford's update, so its mean is infinite only where the one
    infinite element is the row's last; any later element makes it NaN (found by the fuzzer: a sum's mean gave inf).
    Rows, and columns of the transposed view (whose last element is the last row's)."""
    x = _rows_holding_infinities(dtype)
    differential(lambda a: statistic(a * 1, 1), x)
    differential(lambda a: statistic(a.t() * 1, 0, keepdim=True), x)


@pytest.mark.parametrize("position", [(3, 4, 5), (3, 4, 4), (2, 4, 5), (3, 0, 5)])
@pytest.mark.parametrize("layout", ["contiguous", "permuted"])
def test_the_mean_var_mean_gives_over_several_dims_is_infinite_only_at_the_last_index_of_each(layout, position):
    """Over dims 0 and 2 the element read last is the one at the last index of both, whatever the strides (a
    permuted input is read in another order, and still ends there)."""
    x = torch.randn(6, 5, 4).permute(2, 1, 0) if layout == "permuted" else torch.randn(4, 5, 6)
    x[position] = _INF
    differential(lambda a: torch.var_mean(a, (0, 2), correction=0), x)


def test_the_mean_var_mean_gives_of_a_row_of_changing_length_is_welfords():
    """The last element's index is read from the row's symbolic length in a dynamic entry."""
    compiled = compiler.compile(lambda a: torch.var_mean(a, 1)[1], dynamic=True)
    for n in (5, 9):
        x = torch.randn(3, n)
        x[0, n - 1] = x[1, n - 2] = _INF
        differential(lambda a: torch.var_mean(a, 1)[1], x, compiled=compiled)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_training_batch_norm_of_a_channel_holding_an_infinity_keeps_an_infinite_running_mean(dtype, layout):
    """Eager's batch norm takes a channel's mean as a sum's, infinite wherever an element is, unlike ``var_mean``'s:
    the running mean (a mutated input) is inf beside a NaN running variance, as eager's."""
    x = torch.randn(4, 3, 5, 5, dtype=dtype)
    x[1, 1, 2, 2] = x[3, 2, 4, 4] = _INF
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)

    def train_step(a, running_mean, running_var):
        return torch.nn.functional.batch_norm(a * 1, running_mean, running_var, training=True)

    differential(train_step, x, torch.zeros(3, dtype=dtype), torch.ones(3, dtype=dtype))


def _spread_of_equal_values(x):
    x[0] += 1
    y = x / x  # every element 1 (the inputs have no zero)
    x.copy_(y.std())  # eager: exactly 0
    return x.bool()


@pytest.mark.parametrize("n", [3, 5, 7, 10, 33])
def test_the_variance_of_equal_values_is_zero_and_means_divide_as_eager(n):
    """A mean divides the sum by the count, as eager does: ``sum * (1 / n)`` rounds otherwise, and with the
    product contracted into ``y - mean`` the standard deviation of three ones came out as 3.6e-8."""
    differential(_spread_of_equal_values, torch.randn(n, 1, generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("rows", [3, 5, 7])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_the_spread_of_equal_rows_and_its_gradient_are_zero_as_in_eager(rows, backend):
    """Three equal rows of arbitrary floats: their rounded sum over 3 misses 3 * row by an ulp, so a two-pass
    standard deviation came out 1.5e-7 where eager's Welford update gives 0 -- and std's gradient is masked to 0
    at 0 but O(1) just above it, so the embedding's gradient differed by 1.2 (found by the fuzzer)."""
    table = torch.randn(10, 8, generator=torch.Generator().manual_seed(0))

    def spread(weight, ids):
        return torch.nn.functional.embedding(ids, weight).std(0, keepdim=True)

    ids = torch.full((rows,), 2)
    results = []
    for fn in (spread, compiler.compile(spread, backend=backend)):
        weight = table.clone().requires_grad_()
        out = fn(weight, ids)
        out.sum().backward()
        results.append((out.detach(), weight.grad))
    assert results[0][0].eq(0).all() and results[1][0].eq(0).all()
    torch.testing.assert_close(results[1][1], results[0][1], rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_training_batch_norm_of_equal_values_has_eagers_exact_mean_and_gradients(backend):
    """Equal values (a log_softmax of ones): eager's statistics accumulate in double, so their mean is the value
    itself and the normalised output 0; a float sum over 45 missed it by an ulp, which ``rsqrt(var + eps)``
    magnified into a weight gradient of 0.004 where eager's is 0 (found by the fuzzer)."""
    torch.manual_seed(0)
    eager_norm = torch.nn.BatchNorm2d(2)
    compiled_norm = copy.deepcopy(eager_norm)
    x = torch.log_softmax(torch.ones(3, 2, 5, 3), dim=-2)
    grad = torch.randn(3, 2, 5, 3, generator=torch.Generator().manual_seed(1))
    results = []
    for norm, fn in ((eager_norm, eager_norm), (compiled_norm, compiler.compile(compiled_norm, backend=backend))):
        out = fn(x)
        (out * grad).sum().backward()
        results.append((norm.weight.grad, norm.bias.grad, torch.var_mean(x, dim=(0, 2, 3), correction=0)))
    torch.testing.assert_close(results[1], results[0], rtol=1e-5, atol=1e-5)  # (the miss: 0.004)
    mean = compiler.compile(lambda t: torch.var_mean(t, dim=(0, 2, 3), correction=0), backend=backend)(x)[1]
    assert torch.equal(mean, x[0, :, 0, 0])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int64], ids=str)
def test_logsumexp_rounds_as_eagers_op_by_op_kernel(dtype, dynamic):
    # torch's decomposition computed a bfloat16 input in float32 and rounded once; eager rounds after each op, and
    # the results differed by an ulp nearly everywhere (a matrix product of them by 0.04, found by the fuzzer).
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 4, 5, 6, generator=g) * 4).to(dtype)
    if dtype.is_floating_point:
        x[0, 0, 0, :2] = float("inf")
        x[0, 1, 0, 0] = float("-inf")
        x[0, 2, 1, 3] = float("nan")

    def fn(x):
        return x.logsumexp(3), x.logsumexp((1, 3), keepdim=True), x[:, :, :0].logsumexp(2)

    compiled = compiler.compile(fn, dynamic=dynamic)
    # a 16-bit result is eager's bit for bit; wider ones differ only in the sum's order (an ulp)
    exact = {"rtol": 0, "atol": 0} if dtype in (torch.bfloat16, torch.float16) else {}
    for inputs in (x, x[1:], x[:, :, 2:]):
        torch.testing.assert_close(compiled(inputs), fn(inputs), equal_nan=True, **exact)


def _sums_read_before_a_masked_write(x0):
    # (the fuzzer's program d34-1:240) one reduction kernel sums three values and writes the input's new value
    # and the mask, reading rows 2 and 3 through a guarded load
    v1 = torch.clamp(x0, -1, 2)
    s = torch.nan_to_num(v1.sqrt())
    v6 = x0[2:]
    v6[::2] += 1
    total = s.sum() + v1.sum() + x0.sum()
    x0[x0 > 0] = 0
    return total


def test_a_read_guarded_by_a_condition_in_a_reduction_loop_is_not_lost():
    # GCC 12's loop if-conversion turned the guarded read of rows 2 and 3 into zeros in the vectorised loop: the
    # sum was 1.88 for eager's 7.82, without a warning. Kernels are built without loop if-conversion.
    differential(_sums_read_before_a_masked_write, torch.randn(4, 2, 2, generator=torch.Generator().manual_seed(0)))


_UPSAMPLING = {"linear": (1, 2, 5), "bilinear": (1, 2, 3, 4), "trilinear": (1, 2, 3, 2, 4)}


@pytest.mark.parametrize("sizing", ["scale", "scale_recomputed", "size"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", list(_UPSAMPLING))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_linear_upsampling_of_infinities_is_eagers(dtype, mode, align_corners, sizing):
    """torch's decomposition interpolates as ``a + (b - a) * w``, eager's kernel as ``a * (1 - w) + b * w``: beside
    an infinity the first is NaN (inf - inf) where eager's is inf, and eager's ``0 * inf`` NaN was finite. torch
    registers it at the Autograd key, so ``aot_eager`` (no decomposition table) decomposed it too."""
    shape = _UPSAMPLING[mode]
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float64).reshape(shape).to(dtype)
    x.view(-1)[[1, 4, 7]] = torch.tensor([float("inf"), -float("inf"), float("nan")], dtype=dtype)
    dims = len(shape) - 2
    how = {"scale": {"scale_factor": 2.5}, "scale_recomputed": {"scale_factor": 1.7, "recompute_scale_factor": True}}
    how["size"] = {"size": (7, 5, 6)[:dims]}
    fn = functools.partial(torch.nn.functional.interpolate, mode=mode, align_corners=align_corners, **how[sizing])
    layouts = [x, x.contiguous(memory_format=torch.channels_last)] if mode == "bilinear" else [x]
    for image in layouts:
        if dtype != torch.bfloat16:
            differential(lambda a: fn(a * 1), image)
            differential(
                lambda a: fn(a * 1), image, compiled=compiler.compile(lambda a: fn(a * 1), backend="aot_eager")
            )
            continue
        # eager's bfloat16 kernel rounds its weights its own way: an ulp apart here and there, as torch's
        # decomposition is; the infinities and NaNs are where eager has them
        expected, actual = fn(image), compiler.compile(lambda a: fn(a * 1))(image)
        torch.testing.assert_close(actual, expected, rtol=2**-7, atol=0, equal_nan=True)
        assert actual.stride() == expected.stride()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_linear_upsampling_keeps_eagers_gradient_and_integer_images(backend):
    """The weighted-corner decomposition in training (its gradient is eager's, up to rounding), and a ``uint8``
    image, which keeps torch's integer decomposition."""
    up = functools.partial(torch.nn.functional.interpolate, scale_factor=2, mode="bilinear", align_corners=False)
    x = torch.randn(2, 3, 4, 5, requires_grad=True)
    compiled = compiler.compile(lambda a: up(a * 2).square().sum(), backend=backend)
    eager_x = x.detach().clone().requires_grad_()
    up(eager_x * 2).square().sum().backward()
    compiled(x).backward()
    torch.testing.assert_close(x.grad, eager_x.grad)
    image = torch.randint(0, 256, (1, 3, 5, 6), dtype=torch.uint8)
    differential(lambda a: up(a + 0), image)
    differential(lambda a: torch.nn.functional.interpolate(a + 0, scale_factor=1.7, mode="bicubic"), image)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_margin_losses_leave_out_nan_terms_as_eagers_kernels(backend, reduction):
    """Eager's margin losses add a term only where it is above 0, which leaves a NaN out; torch's decompositions
    (Python kernels at the Autograd key, run before any decomposition table) clamped it and kept it: a loss eager
    gives as inf came out NaN. Both losses stay whole, with eager's gradients."""
    scores = torch.randn(4, 5)
    scores[0, 1], scores[1, 2] = float("nan"), float("inf")
    classes, labels = torch.tensor([0, 4, 2, 1]), torch.tensor([[0, 4, -1, 1, 2]] * 4)
    losses = {
        "multi_margin": lambda a, t: torch.nn.functional.multi_margin_loss(a, t, reduction=reduction),
        "multilabel_margin": lambda a, t: torch.nn.functional.multilabel_margin_loss(a, t, reduction=reduction),
    }
    for name, loss in losses.items():
        target = classes if name == "multi_margin" else labels
        differential(
            lambda a, t: loss(a * 1, t),
            scores,
            target,
            compiled=compiler.compile(lambda a, t: loss(a * 1, t), backend=backend),
        )
        finite = torch.randn(4, 5, requires_grad=True)
        eager_finite = finite.detach().clone().requires_grad_()
        loss(eager_finite * 2, target).sum().backward()
        compiler.compile(lambda a, t: loss(a * 2, t).sum(), backend=backend)(finite, target).backward()
        torch.testing.assert_close(finite.grad, eager_finite.grad, msg=name)


def _shift_cases(dtype):
    info = torch.iinfo(dtype)
    counts = [
        v for v in (0, 1, 7, 8, 15, 16, 31, 32, 63, 64, 65, -1, -64, info.max, info.min) if info.min <= v <= info.max
    ]
    values = [v for v in (0, 1, -1, 5, -7, info.max, info.min) if info.min <= v <= info.max]
    pairs = [(v, c) for v in values for c in counts]
    return torch.tensor([v for v, _ in pairs], dtype=dtype), torch.tensor([c for _, c in pairs], dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64], ids=str)
def test_shifts_past_the_width_are_eagers(dtype):
    """Eager shifts everything out for a count past the type's width or a negative one (a right shift keeps the
    sign); C++'s shift is undefined there, and x86 took the count modulo 32: ``255 >> 64`` of uint8 came back 255."""
    values, counts = _shift_cases(dtype)
    left, right = torch.bitwise_left_shift, torch.bitwise_right_shift  # (``<<`` is ``__lshift__``, kept whole)

    def shifts(a, b):
        return left(a + 0, b), right(a + 0, b), (a + 0) << b, (a + 0) >> b, right(a + 0, 70)

    differential(shifts, values, counts)
    # three elements: a vectorised loop's shifts give 0 past the width, the scalar ones take the count modulo 32
    differential(
        shifts, torch.tensor([torch.iinfo(dtype).max, 1, 5], dtype=dtype), torch.tensor([65, 64, 33], dtype=dtype)
    )


_NUMBER_OPERANDS = {
    "add": lambda a, s: a + s, "rsub": lambda a, s: s - a, "add_alpha": lambda a, s: torch.add(a, a, alpha=s),
    "remainder": lambda a, s: a % s, "fmod": lambda a, s: torch.fmod(a, s), "pow": lambda a, s: a**s,
    "rpow": lambda a, s: s**a, "eq": lambda a, s: a == s, "lt": lambda a, s: a < s,
    "mul": lambda a, s: a * s, "div": lambda a, s: a / s, "floordiv": lambda a, s: a // s,
    "rdiv": lambda a, s: s / a,
}  # fmt: skip


@pytest.mark.parametrize("number", [0.1, 1 / 3, 7.9, 1e-8, 65519.0, 1e5])
@pytest.mark.parametrize("name", list(_NUMBER_OPERANDS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_a_number_meets_a_16_bit_tensor_as_eagers_kernel_reads_it(dtype, name, number):
    """Eager's ``add``, ``sub``, ``remainder``, ``fmod``, ``pow`` and comparisons convert a number operand to the
    tensor's 16-bit type first (``half_x == 0.1`` compares with 0.0999755859375; ``half_x % 1e-8`` divides by 0 and
    is NaN); ``mul`` and the divisions read it in float (``1 // 0.1`` is 9, ``0 * 1e5`` is 0, not 0 * inf). The
    kernels read every number in float: comparisons and remainders came out other than eager's."""
    op = _NUMBER_OPERANDS[name]
    x = torch.tensor([0, 1, 2, 5, 0.1, 1 / 3, 0.2, 7.9, 1e-8, 100.3], dtype=torch.float64).to(dtype)
    differential(lambda a: op(a * 1, number), x)


def _fill(name):
    return {
        "fill_": lambda a, v: a.clone().fill_(v),
        "full_like": lambda a, v: torch.full_like(a, v),
        "new_full": lambda a, v: a.new_full(a.shape, v),
        "full": lambda a, v: a + torch.full(a.shape, v, dtype=a.dtype),
        "index_fill": lambda a, v: a.index_fill(0, torch.tensor([0]), v),
        "pad": lambda a, v: torch.nn.functional.pad(a, (1, 0), value=v),
        "scalar_tensor": lambda a, v: a + torch.scalar_tensor(v, dtype=a.dtype),
    }[name]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", ["fill_", "full_like", "new_full", "full", "index_fill", "pad", "scalar_tensor"])
@pytest.mark.parametrize(
    ("dtype", "value"), [(torch.int8, 300), (torch.uint8, -1), (torch.float16, 1e39), (torch.float32, 1e39)]
)
def test_a_fill_value_the_dtype_cannot_hold_raises_as_in_eager(dtype, value, name, dynamic):
    """Eager's fill converts its number checked ("value cannot be converted to type int8_t without overflow"),
    save for a 16-bit float tensor of one element and ``scalar_tensor`` of one, and ``pad`` converts it as a float;
    the graph wrote the number wrapped. A value that fits, traced symbolically, is guarded to keep fitting."""
    fn = _fill(name)
    compiled = compiler.compile(fn, dynamic=dynamic)
    for size, number in ((3, value), (1, value), (2, 5), (4, value)):
        differential(fn, torch.zeros(size, dtype=dtype), number, compiled=compiled)


_OVERFLOWS = {
    "bool_plus_max": (lambda a: (a > 0) + (2**63 - 1), torch.tensor([0, 1, 2])),
    "int64_times": (lambda a: (a + 0) * 3 + (2**63 - 1), torch.arange(40)),
    "int32_wraps": (lambda a: (a + 0) * 65536 * 65536 + 7, torch.arange(-3, 4, dtype=torch.int32)),
    "int8_wraps": (lambda a: (a + 100) * 3, torch.arange(-5, 6, dtype=torch.int8)),
    "past_64_bits": (lambda a: (a < 2**63, a == -(2**63), a + 2**63), torch.tensor([0, 1, -(2**63), 2**63 - 1])),
}


@pytest.mark.parametrize("name", list(_OVERFLOWS))
def test_an_integer_overflow_wraps_as_in_eager(name):
    """Eager's integer arithmetic wraps; g++ assumes a signed overflow never happens and folded ``(a > 0) + (2**63 -
    1)`` to 2**63 - 1 for every element (-fwrapv). A Python int past 64 bits wraps as eager converts it."""
    fn, x = _OVERFLOWS[name]
    differential(fn, x)


_BEYOND_INT64 = {
    "copy_": lambda a, n: a.copy_(n) * 1,
    "fill_": lambda a, n: a.fill_(n) * 1,
    "full_like": lambda a, n: torch.full_like(a, n),
    "masked_fill": lambda a, n: a.masked_fill(a > 0, n),
    "arange": lambda a, n: torch.arange(n - 2, n) + a[:1].to(torch.int64),
    "add": lambda a, n: a + n,
}


@pytest.mark.parametrize("name", list(_BEYOND_INT64))
@pytest.mark.parametrize("number", [2**63 + 7, 2**64 - 1, 2**64 + 5, -(2**63) - 3], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_an_integer_beyond_int64_is_read_as_eagers_kernel_reads_it(dtype, number, name):
    """Eager reads an int past int64 as uint64 (``x.copy_(2**63 + 7)`` writes 9.2e18), rejects one past uint64
    (OverflowError), and ``arange`` rejects a bound past int64; the kernels held it in int64, wrapped
    (``copy_`` wrote -9.2e18, ``arange`` counted on from -2**63), and the fill check let OverflowError through."""
    differential(_BEYOND_INT64[name], torch.tensor([1, 0, 3], dtype=dtype), number)


_NUMBERS_WRITTEN_OUT = {
    "where": lambda a: torch.where(a > 0.5, 0.1, a) * 3,
    "masked_fill": lambda a: a.masked_fill(a > 0.5, 0.1) * 7,
    "clamp": lambda a: a.clamp(max=0.1) * 7,
    "full_like": lambda a: torch.full_like(a, 0.1) * 3 + a,
    "logit_eps": lambda a: torch.logit(a * 1, eps=1e-2),
}


@pytest.mark.parametrize("name", list(_NUMBERS_WRITTEN_OUT))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_a_number_written_into_a_16_bit_result_is_read_rounded_as_in_eager(dtype, name):
    """Eager stores ``where(c, 0.1, x)`` of bfloat16 as 0.10009765625, and the next op reads that; fused into one
    loop, the number stayed 0.1 in float. ``logit``'s eps bounds are the input's type in eager's kernel too
    (bfloat16 ``logit(1.0, eps=0.01)`` is the logit of 0.98828125, 4.44; torch's decomposition gave 4.59)."""
    x = torch.tensor([0.0, 1.0, 0.5, 1e-3, 0.999, 0.25, 0.75, 0.1], dtype=torch.float64).to(dtype)
    differential(_NUMBERS_WRITTEN_OUT[name], x)


_RANGES = [(10,), (0, 1, 0.1), (0.3, 1000.7, 0.1), (-5.5, 7.3, 0.013), (0, 3000), (1, 9000, 1), (0, 8300),
           (0.5, 300.5, 0.25), (-10, 10000, 3), (5, -5, -1), (0, 2**24 + 10), (0.5, 10, 1.5), (2, 11.5, 3)]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, None])
@pytest.mark.parametrize("bounds", _RANGES, ids=str)
def test_an_arange_has_eagers_values(bounds, dtype):
    # Eager's kernel rounds each vector lane from its vector's rounded base: arange(0, 1, 0.1)[9] was an ulp above
    # eager's, a bfloat16 arange(0, 8300) differed in 975 elements, and an integer arange of fractional bounds in
    # most. Only one whose every value is an integer of the type is computed in the kernels.
    def fn(x):
        return torch.arange(*bounds, dtype=dtype) + x

    x = torch.zeros((), dtype=dtype or torch.get_default_dtype())
    try:
        expected = fn(x)
    except ValueError as error:  # (torch 2.13 refuses an integer arange whose step truncates to 0)
        with pytest.raises(ValueError, match=str(error)):
            compiler.compile(fn)(x)
        return
    actual = compiler.compile(fn)(x)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)


_LONG_SUMS = {
    "sum": lambda x: x.sum(),
    "mean": lambda x: x.mean(),
    "sum_of_squares": lambda x: (x * x).sum(),
    "rows": lambda x: x.view(100, -1).sum(1),
    "max_beside_sum": lambda x: torch.stack([x.amax(), x.sum()]),
}


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("fn", list(_LONG_SUMS))
def test_a_long_float_sum_is_as_close_to_the_exact_sum_as_eagers(fn, dynamic):
    # Each lane of a row's float accumulator took in a quarter million values, each addition rounding: 4M values
    # summed 80x further from the exact sum than eager's cascade (32 for 0.4). The float64 sum is the reference.
    x = torch.randn(4_000_000, generator=torch.Generator().manual_seed(0)) + 3.0
    exact = _LONG_SUMS[fn](x.double())
    expected = _LONG_SUMS[fn](x)
    actual = compiler.compile(_LONG_SUMS[fn], dynamic=dynamic)(x)
    assert actual.dtype == expected.dtype == torch.float32
    eager_error = (expected.double() - exact).abs().max().item()
    error = (actual.double() - exact).abs().max().item()
    assert error <= 2 * eager_error + 1e-7 * exact.abs().max().item(), (error, eager_error)


def test_the_input_gradient_of_a_row_holding_an_infinity_is_eagers():
    # a270.1:59. Eager's kernel forms the input gradient as `rstd * g + b * x + c` from the row's sums; torch's
    # decomposition as `rstd / n * (n * g - sum(g) - x_hat * sum(g * x_hat))`. Equal for finite values, they
    # differ where the output's gradient holds an infinity (a division by a False): eager's row is NaN
    # throughout, the decomposition's kept an infinity beside NaNs.
    for affine in (True, False):
        for where in ([(0, 2)], [(1, 0), (1, 3)], []):
            ln = torch.nn.LayerNorm(4, elementwise_affine=affine)
            upstream = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
            for row, col in where:
                upstream[row, col] = float("inf") if col % 2 == 0 else float("-inf")
            grads = []
            for f in (ln, compiler.compile(ln, backend="inductor", fullgraph=True)):
                x = torch.randn(3, 4, generator=torch.Generator().manual_seed(len(where))).requires_grad_()
                f(x).backward(upstream)
                grads.append(x.grad)
            torch.testing.assert_close(grads[1], grads[0], equal_nan=True, atol=1e-5, rtol=1e-5)
            assert torch.equal(grads[1].isnan(), grads[0].isnan()), (affine, where)


SIZED_NUMBERS = {
    "added": lambda x, sized: x + sized.numel(),
    "compared": lambda x, sized: x == sized.numel() - 1,
    "where": lambda x, sized: torch.where(x > 1.2, x, sized.numel()) + 1,
    "filled": lambda x, sized: x.masked_fill(x > 1.2, sized.numel()) * 1,
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", list(SIZED_NUMBERS))
def test_a_symbolic_size_meeting_a_half_tensor_is_rounded_to_its_type_first(dtype, case):
    # (fuzz a301.1:150) eager converts the number to the tensor's type: bfloat16(525) is 524, so 1.0 + 525 is 524
    # in eager; the kernel added the exact 525 and rounded once, to 528
    fn = SIZED_NUMBERS[case]
    x = torch.tensor([0.99609375, 1.0, 1.5, 2.0, 1.25], dtype=dtype)
    compiled = compiler.compile(fn, dynamic=True)
    for n in (525, 1027, 2049, 4099):
        differential(fn, x, torch.empty(n), compiled=compiled)
