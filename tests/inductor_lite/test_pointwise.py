"""Pointwise graphs: unary and binary ops, broadcasting, comparisons, where/clamp, scalars, fused chains."""

import os

import pytest
import torch
import torch.nn.functional as F
from ilite_helpers import check, check_cases, compiled

from dynajit.inductor_lite import compiled_graphs, config

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1,
    "log": lambda x: torch.log(x.abs() + 0.1), "log2": lambda x: torch.log2(x.abs() + 0.1),
    "log10": lambda x: torch.log10(x.abs() + 0.1), "log1p": lambda x: torch.log1p(x.abs()),
    "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": lambda x: torch.asin(x.clamp(-1, 1)),
    "acos": lambda x: torch.acos(x.clamp(-1, 1)), "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "tanh": torch.tanh, "asinh": torch.asinh, "acosh": lambda x: torch.acosh(x.abs() + 1),
    "atanh": lambda x: torch.atanh(x.clamp(-0.9, 0.9)), "sigmoid": torch.sigmoid, "erf": torch.erf,
    "erfc": torch.erfc, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
    "sign": torch.sign, "sign_nan": lambda x: torch.sign((x - x) / (x - x)), "reciprocal": lambda x: torch.reciprocal(x + 10), "relu": torch.relu, "frac": torch.frac,
    "square": torch.square, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "softplus": F.softplus, "elu": F.elu, "leaky_relu": F.leaky_relu, "hardtanh": F.hardtanh,
    "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "mish": F.mish, "relu6": F.relu6,
    "lgamma": lambda x: torch.lgamma(x.abs() + 0.5), "nan_to_num": lambda x: torch.nan_to_num(x / (x - x)),
}  # fmt: skip

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.5), "maximum": torch.maximum, "minimum": torch.minimum,
    "pow": lambda a, b: torch.pow(a.abs() + 0.1, b), "atan2": torch.atan2, "fmod": torch.fmod,
    "remainder": torch.remainder, "floor_divide": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "trunc_divide": lambda a, b: torch.div(a, b, rounding_mode="trunc"), "copysign": torch.copysign,
    "hypot": torch.hypot, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": lambda a, b: torch.logical_and(a > 0, b > 0), "logical_or": lambda a, b: torch.logical_or(a > 0, b > 0),
    "logical_xor": lambda a, b: torch.logical_xor(a > 0, b > 0), "logical_not": lambda a, b: torch.logical_not(a > b),
    "where": lambda a, b: torch.where(a > b, a, b), "where_scalar": lambda a, b: torch.where(a > 0, a, 0.5),
    "clamp": lambda a, b: a.clamp(-0.5, 0.5), "clamp_min": lambda a, b: a.clamp(min=0.1),
    "clamp_max": lambda a, b: a.clamp(max=0.1), "clamp_tensor": lambda a, b: torch.clamp(a, min=b),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, -1.0), "lerp": lambda a, b: torch.lerp(a, b, 0.3),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5), "addcdiv": lambda a, b: torch.addcdiv(a, a, b.abs() + 1),
    "rsub": lambda a, b: 1 - a, "scalar_pow": lambda a, b: a**2, "rpow": lambda a, b: 2**a,
    "isnan": lambda a, b: torch.isnan(a / (b - b)), "isinf": lambda a, b: torch.isinf(a / (b - b)),
    "signbit": lambda a, b: torch.signbit(a), "xlogy": lambda a, b: torch.xlogy(a.abs(), b.abs() + 1),
}  # fmt: skip


def test_unary_ops():
    x = torch.randn(3, 17)
    assert check_cases(UNARY, x, atol=1e-5, rtol=1e-5) == len(UNARY)


def test_binary_ops_broadcast():
    a, b = torch.randn(4, 1, 9), torch.randn(5, 1) + 0.1
    check_cases(BINARY, a, b, atol=1e-5, rtol=1e-5)


def test_integer_ops():
    a, b = torch.randint(-20, 20, (4, 6)), torch.randint(1, 7, (6,))
    cases = {
        "add": torch.add, "mul": torch.mul, "sub": torch.sub, "floordiv": lambda a, b: a // b,
        "remainder": lambda a, b: a % b, "truediv": lambda a, b: a / b, "neg_rem": lambda a, b: (-a) % b,
        "bitand": lambda a, b: a & b, "bitor": lambda a, b: a | b, "bitxor": lambda a, b: a ^ b,
        "bitnot": lambda a, b: ~a, "shift": lambda a, b: a << 2, "abs": lambda a, b: a.abs(),
        "max": torch.maximum, "pow": lambda a, b: a ** 2, "eq": torch.eq, "to_float": lambda a, b: a.float() * 0.5,
        "sign": lambda a, b: torch.sign(a), "clamp": lambda a, b: a.clamp(-3, 3),
    }  # fmt: skip
    check_cases(cases, a, b)


def test_fused_chain_is_one_kernel():
    def fn(x, y):
        return ((torch.relu(x * 2 + y) - 1).sin() * torch.sigmoid(y)).exp()

    c = check(fn, torch.randn(8, 32), torch.randn(32))
    graph = _only_graph(c)
    assert graph.info["kernels"] == 1 and graph.info["externs"] == 0


def test_multi_use_values_fuse_into_one_kernel():
    def fn(x):
        y = x * 3 + 1
        return y.sin(), y.cos(), y * y

    c = check(fn, torch.randn(5, 7))
    assert _only_graph(c).info["kernels"] == 1


@pytest.mark.parametrize("shape", [(16, 64), (2, 512), (1024,)])
def test_a_value_read_through_a_reshape_fuses_into_its_reader(shape):
    # (silu's backward: the sigmoid is read twice, then viewed as a matrix product's operand)
    def fn(x):
        s = torch.sigmoid(x)
        return (s * (1 + x * (1 - s))).reshape(shape) * 2

    c = check(fn, torch.randn(2, 8, 64))
    assert _only_graph(c).info["kernels"] == 1


def test_python_scalar_and_0d_inputs():
    check(lambda x, s: (x * s + 2.5, x - s), torch.randn(6), torch.tensor(3.0))
    check(lambda x: x + 1, torch.tensor(2.0))


@pytest.mark.parametrize("shape", [(1,), (33,), (2, 3, 5), (1, 1, 7), (64, 65)])
def test_shapes(shape):
    check(lambda x: torch.tanh(x) * 2 - x, torch.randn(shape))


def test_large_parallel_pointwise():
    check(lambda x, y: (x * y + 1).relu(), torch.randn(256, 300), torch.randn(300))


def _only_graph(c):
    from dynajit.inductor_lite import CompiledGraph

    graphs = list(_compiled_graphs(c))
    assert len(graphs) == 1
    assert isinstance(graphs[0], CompiledGraph)
    return graphs[0]


def _compiled_graphs(c):
    from dynajit.inductor_lite import compiled_graphs

    return compiled_graphs(c)


def test_input_mutation_and_extern_views():
    def fn(x, y):
        x.add_(1)
        return (x.unfold(0, 2, 1) * 2, y.mul_(3).sum())

    x, y = torch.randn(6), torch.randn(4)
    xe, ye, xc, yc = x.clone(), y.clone(), x.clone(), y.clone()
    expected = fn(xe, ye)
    actual = compiled(fn, x.clone(), y.clone())(xc, yc)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    torch.testing.assert_close(xc, xe)  # mutations of inputs are applied
    torch.testing.assert_close(yc, ye)


def test_float_erf_is_within_two_ulp_everywhere_and_exact_at_special_values():
    # float32 erf is computed in the kernel (series below 1, a rational-exponential form above),
    # so check it densely against a float64 reference rather than at a few random points.
    x = torch.cat([torch.linspace(-7, 7, 200_001), torch.tensor([0.0, -0.0, 1e-30, -1e-6, 1.0, -1.0])])
    special = torch.tensor([float("inf"), float("-inf"), float("nan")])
    c = compiled(lambda x, s: (torch.erf(x), torch.erf(s), F.gelu(x)), x, special)
    erf, erf_special, gelu = c(x, special)
    reference = torch.erf(x.double())
    assert erf.dtype == torch.float32
    assert ((erf.double() - reference).abs() <= 2.5e-7 * reference.abs() + 1e-45).all()
    assert torch.equal(erf[200_001:200_003], torch.tensor([0.0, -0.0]))
    assert torch.equal(torch.signbit(erf[200_001:200_004]), torch.tensor([False, True, False]))
    torch.testing.assert_close(erf_special, torch.tensor([1.0, -1.0, float("nan")]), equal_nan=True)
    torch.testing.assert_close(gelu, F.gelu(x), atol=2e-6, rtol=1.3e-6)
    x64 = torch.linspace(-7, 7, 1001, dtype=torch.float64)
    torch.testing.assert_close(compiled(lambda x: (torch.erf(x),), x64)(x64)[0], torch.erf(x64), rtol=1e-15, atol=0)


def test_gelu_is_one_kernel_op_within_its_erf_bound_of_float64_in_every_dtype():
    # GELU is lowered whole (not decomposed through erf): its erf needs absolute accuracy only, next to the 1
    # it is added to, so the kernel uses the cheaper A&S form everywhere (about 2.5e-7 |x| absolute in float32).
    x = torch.cat([torch.linspace(-7, 7, 200_001), torch.tensor([0.0, -0.0, 1e-30, float("inf"), float("nan")])])
    c = compiled(lambda x: (F.gelu(x), F.gelu(x, approximate="tanh")), x)
    (graph,) = compiled_graphs(c)
    kernels = graph.kernel_source.split('extern "C" void', 1)[1]
    assert "dj_gelu(" in kernels and "dj_erf(" not in kernels
    gelu, gelu_tanh = c(x)
    finite = slice(0, 200_004)
    reference = F.gelu(x[finite].double())
    bound = 3e-7 * x[finite].double().abs() + 2.4e-7 * reference.abs()
    assert ((gelu[finite].double() - reference).abs() <= bound).all()
    torch.testing.assert_close(gelu[finite], F.gelu(x[finite]), atol=2e-6, rtol=1.3e-6)
    assert torch.equal(torch.signbit(gelu[200_001:200_003]), torch.tensor([False, True]))
    assert gelu[-2] == float("inf") and gelu[-1].isnan()  # eager's vectorised kernel returns nan for +inf
    torch.testing.assert_close(gelu_tanh[finite], F.gelu(x[finite], approximate="tanh"), atol=1e-6, rtol=1e-6)
    for dtype in (torch.float64, torch.bfloat16, torch.float16):
        check(lambda x: (F.gelu(x), F.gelu(x, approximate="tanh")), torch.randn(64, 33).to(dtype))


_FLOOR_CASES = {
    "floordiv": lambda a, b: a // b, "floor_divide_scalar": lambda a, b: torch.floor_divide(a, 2.5),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"), "remainder": lambda a, b: a % b,
    "remainder_scalar": lambda a, b: torch.remainder(a, 0.1),
}  # fmt: skip


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy on inf and 0 divisors
def test_float_floor_division_is_eagers_not_the_floor_of_the_quotient(backend, dtype):
    # floor(a / b) rounds 1 // 0.1 to 10 and gives inf // 2.5 = inf; eager (as Python) computes from the exact
    # fmod: 9 and NaN.
    if backend == "triton":
        pytest.importorskip("triton")
        if os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("the Triton path runs on CPU under TRITON_INTERPRET=1")
    inf = float("inf")
    a = torch.tensor([inf, -inf, 1.0, -1.0, 0.3, -0.3, 0.0, -0.0, 7.0, 1e30, 5.0, -7.5], dtype=dtype)
    b = torch.tensor([2.5, 2.5, 0.1, 0.1, 0.1, 0.1, 3.0, 3.0, -2.0, 3.0, 0.0, 2.5], dtype=dtype)
    with config.patch(cpu_backend=backend):
        check_cases(_FLOOR_CASES, a, b, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_fused_product_and_sum_round_twice_as_eagers_two_kernels_do(dtype):
    # Built with contraction, g++ made x * y + z one fused multiply-add, rounded once.
    g = torch.Generator().manual_seed(0)
    x, y, z = (torch.randn(4099, generator=g, dtype=dtype) for _ in range(3))
    cases = {
        "mul_add": lambda x, y, z: x * y + z,
        "mul_sub": lambda x, y, z: z - x * y,
        "quotient_gradient": lambda x, y, z: x / y + (-x) * ((y / y) / y),
    }
    check_cases(cases, x, y, z, atol=0, rtol=0)
