"""Dtypes: float64, float16/bfloat16 (computed in float), int32/int64, bool, and type promotion."""

import pytest
import torch
import torch.nn.functional as F
from ilite_helpers import check, check_cases

FLOAT_CASES = {
    "chain": lambda x, y: (x * y + 1).sigmoid(), "sum": lambda x, y: x.sum(-1), "softmax": lambda x, y: torch.softmax(x, -1),
    "layer_norm": lambda x, y: F.layer_norm(x, (x.shape[-1],)), "amax": lambda x, y: x.amax(0), "mean": lambda x, y: y.mean(),
    "where": lambda x, y: torch.where(x > y, x, y), "cast_up": lambda x, y: x.double() * 2, "cast_int": lambda x, y: (x * 10).int(),
    "compare": lambda x, y: x >= y, "argmax": lambda x, y: x.argmax(-1), "gelu": lambda x, y: F.gelu(x),
}  # fmt: skip


@pytest.mark.parametrize(
    "dtype,tol",
    [(torch.float64, 1e-9), (torch.float16, 2e-3), (torch.bfloat16, 2e-2), (torch.float32, 1e-5)],
)
def test_float_dtypes(dtype, tol):
    x, y = torch.randn(4, 24, dtype=dtype), torch.randn(24, dtype=dtype)
    check_cases(FLOAT_CASES, x, y, atol=tol, rtol=tol)


def test_int32_and_bool():
    a = torch.randint(-9, 9, (5, 8), dtype=torch.int32)
    m = torch.rand(5, 8) > 0.5
    cases = {
        "int_add": lambda a, m: a + 3, "int_mul": lambda a, m: a * a, "int_sum": lambda a, m: a.sum(1),
        "int_max": lambda a, m: a.amax(0), "bool_and": lambda a, m: m & (a > 0), "bool_or": lambda a, m: m | (a < -3),
        "bool_not": lambda a, m: ~m, "bool_to_int": lambda a, m: m.int() + a, "bool_any": lambda a, m: m.any(1),
        "bool_all": lambda a, m: m.all(0), "bool_sum": lambda a, m: m.sum(), "bool_where": lambda a, m: torch.where(m, a, -a),
        "int_div": lambda a, m: a / 4, "int_floordiv": lambda a, m: a // 4, "int_neg_mod": lambda a, m: a % -4,
    }  # fmt: skip
    check_cases(cases, a, m)


def test_type_promotion():
    f32, f64 = torch.randn(3, 4), torch.randn(4, dtype=torch.float64)
    i64, i32 = torch.randint(0, 5, (3, 4)), torch.randint(1, 5, (4,), dtype=torch.int32)
    h, b = torch.randn(4).half(), torch.rand(3, 4) > 0.5
    cases = {
        "f32_f64": lambda f32, f64, i64, i32, h, b: f32 + f64, "f32_i64": lambda f32, f64, i64, i32, h, b: f32 * i64,
        "i64_i32": lambda f32, f64, i64, i32, h, b: i64 + i32, "i32_float_scalar": lambda f32, f64, i64, i32, h, b: i32 * 2.5,
        "half_f32": lambda f32, f64, i64, i32, h, b: h + f32, "bool_int": lambda f32, f64, i64, i32, h, b: b + i32,
        "bool_float": lambda f32, f64, i64, i32, h, b: b * f32, "half_int": lambda f32, f64, i64, i32, h, b: h * i64,
        "compare_mixed": lambda f32, f64, i64, i32, h, b: f32 < i64, "int_true_div": lambda f32, f64, i64, i32, h, b: i64 / i32,
        "zero_dim_f64": lambda f32, f64, i64, i32, h, b: f32 * f64.sum(), "half_scalar": lambda f32, f64, i64, i32, h, b: h * 1e-3,
        "where_mixed": lambda f32, f64, i64, i32, h, b: torch.where(b, f32, i64), "sum_int_to_float": lambda f32, f64, i64, i32, h, b: i32.sum() * f32,
    }  # fmt: skip
    check_cases(cases, f32, f64, i64, i32, h, b, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("integer", [torch.int64, torch.int32, torch.int16])
@pytest.mark.parametrize("floating", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_a_float_through_an_integer_and_back_has_a_positive_zero(integer, floating):
    # (the fuzzer's program j33-1:1480) g++ folds the round trip into trunc, which kept -0.2's sign: 1 / it was
    # -inf where eager's integer 0 gives +inf
    def fn(x):
        back = x.to(integer).to(floating)
        return 1 / back, back

    x = torch.tensor([[-0.2, 0.3, -1.7], [2.5, -0.9, 0.0]]).repeat(1, 11)  # (a vectorised loop and its tail)
    check(fn, x)


@pytest.mark.parametrize("integer", [torch.int64, torch.int32])
@pytest.mark.parametrize("floating", [torch.float32, torch.float64])
def test_a_float_out_of_an_integer_s_range_converts_as_eager_s(integer, floating):
    # (the fuzzer's program c34-1:348: `x += (2 / x).to(x.dtype)` with a 0 in x) C++ leaves NaN, inf and values out
    # of range undefined; eager's kernels convert as x86 does, to the integer's lowest value, where g++'s code gave
    # the highest for the inf of 2 / 0
    def from_integers(i):
        return i + (2 / i).to(integer), (1 / i.to(floating)).to(integer)

    def from_floats(x):
        return (x * 2).to(integer), (1 / x).to(integer) + 1

    big = 2.0**63 if integer == torch.int64 else 2.0**31
    values = [float("nan"), float("inf"), -float("inf"), 1e30, -1e30, big, -big, big / 2, -2.5, 0.0, 7.9]
    x = torch.tensor(values, dtype=floating).repeat(4)  # (a vectorised loop and its tail)
    i = torch.tensor([1, 0, -3, 0, 5, 2, -1], dtype=integer).repeat(5)
    for fn, arg in ((from_floats, x), (from_integers, i)):
        expected = fn(arg)
        actual = check(fn, arg)(arg)
        for a, e in zip(actual, expected):
            assert torch.equal(a, e), (fn.__name__, a, e)


@pytest.mark.parametrize("small", [torch.int8, torch.uint8, torch.int16])
@pytest.mark.parametrize("floating", [torch.float32, torch.float64])
def test_a_float_out_of_a_small_integer_s_range_keeps_eager_s_low_bits(small, floating):
    # eager converts through int32 and keeps the low bits (1000.0 is -24 as int8, 232 as uint8); a direct C++ cast
    # is undefined out of range, and g++ folded nan_to_num's known 1000.0 to the saturated 127
    def fn(x):
        return x.nan_to_num(0.0, 1e3, -1e3).to(small), (x * 3).to(small)

    values = [float("nan"), float("inf"), -float("inf"), 1e10, -3e9, 255.7, -129.5, 1000.0, 40000.0, -0.7, 65537.3]
    x = torch.tensor(values, dtype=floating).repeat(6)  # (a vectorised loop and its tail)
    for actual, expected in zip(check(fn, x)(x), fn(x)):
        assert torch.equal(actual, expected), (actual, expected)
