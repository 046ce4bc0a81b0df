"""The Triton path, run on CPU tensors through Triton's interpreter (TRITON_INTERPRET=1, set by the suite)."""

import os

import pytest
import torch
import torch.nn.functional as F
from ilite_helpers import check, check_cases

from dynajit.inductor_lite import compiled_graphs, config

pytest.importorskip("triton")

CASES = {
    "chain": lambda x, y: torch.sigmoid(x * 2 + y).relu() - 1, "tanh": lambda x, y: torch.tanh(x),
    "sum": lambda x, y: x.sum(-1), "sum0": lambda x, y: x.sum(0), "mean_all": lambda x, y: x.mean(),
    "amax": lambda x, y: x.amax(-1), "argmax": lambda x, y: x.argmax(-1), "argmin0": lambda x, y: x.argmin(0),
    "softmax": lambda x, y: torch.softmax(x, -1), "log_softmax": lambda x, y: torch.log_softmax(x, -1),
    "layer_norm": lambda x, y: F.layer_norm(x, (40,), y, y), "var": lambda x, y: x.var(-1),
    "where": lambda x, y: torch.where(x > y, x, y), "transpose": lambda x, y: x.t() * 2,
    "int": lambda x, y: (x * 10).long() // 3, "any": lambda x, y: (x > 1).any(-1), "prod": lambda x, y: (x * 0.1 + 1).prod(-1),
    "half": lambda x, y: (x.half() * 2).float(), "round": lambda x, y: torch.round(x * 3),
    "square": lambda x, y: x.pow(2), "norm": lambda x, y: F.normalize(x, dim=-1), "pow_neg": lambda x, y: x.pow(-1.0),
    "pow_tensor": lambda x, y: x.abs().pow(y), "cube_sum": lambda x, y: x.pow(3).sum(-1),
    "gelu": lambda x, y: F.gelu(x * 3), "gelu_tanh": lambda x, y: F.gelu(x, approximate="tanh"),
    "sign_nan": lambda x, y: torch.sign(torch.cat([x, (x - x) / (x - x)], -1)),
    "clamp_nan_bound": lambda x, y: torch.clamp(x, min=torch.where(y > 0, y, (y - y) / (y - y)), max=y.abs() + 1),
}  # fmt: skip

interpreter = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 when triton is imported"
)


@interpreter
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy math on masked-off lanes (log(0) of padding)
def test_triton_kernels_under_the_interpreter():
    with config.patch(cpu_backend="triton"):
        check_cases(CASES, torch.randn(4, 40), torch.randn(40), atol=1e-5, rtol=1e-5)
        big = {"big_softmax": lambda z: torch.softmax(z, -1), "big_pointwise": lambda z: z.exp() + 1}
        c = check_cases(big, torch.randn(3, 3000), atol=1e-5, rtol=1e-5)
    assert c == 2


@interpreter
def test_triton_kernel_source_is_logged_and_generated_from_the_same_ir():
    with config.patch(cpu_backend="triton"):
        c = check(lambda x: (torch.softmax(x, -1),), torch.randn(4, 16))
    (graph,) = compiled_graphs(c)
    assert "@triton.jit" in graph.kernel_source and graph.info["kernels"] == 1


def test_triton_on_cpu_requires_the_interpreter():
    from dynajit.inductor_lite import compile_fx

    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter is on in this process")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        compile_fx(torch.fx.symbolic_trace(lambda x: (x + 1,)), [torch.randn(3)], options={"cpu_backend": "triton"})


@interpreter
def test_libdevice_ops_run_through_aten_between_fused_kernels_under_the_interpreter(caplog):
    def fn(x, y):
        u = torch.tanh(x) * 0.9
        return (
            torch.asin(u) + 1, torch.acos(u) * 2, torch.atan(x) - y, torch.atan2(x, y).sum(-1),
            torch.lgamma(x.abs() + 0.5), torch.copysign(x, y), torch.sigmoid(x) * y,
        )  # fmt: skip

    with config.patch(cpu_backend="triton"), caplog.at_level("INFO", logger="dynajit.inductor_lite"):
        c = check(fn, torch.randn(4, 40), torch.randn(4, 40), atol=1e-5, rtol=1e-5)
    (graph,) = compiled_graphs(c)
    assert {f.split(".")[1] for f in graph.info["fallbacks"]} == {"asin", "acos", "atan", "atan2", "lgamma", "copysign"}
    assert graph.info["kernels"] >= 1 and "libdevice" not in graph.kernel_source
    assert "no kernel rendering on this code generator for aten.asin.default" in caplog.text


@interpreter
def test_a_buffer_filled_with_a_constant_and_an_extern_writing_into_it():
    def fn(x):
        index = x.argsort(-1)
        return (
            torch.zeros(4, 6).scatter_add(1, index, x),
            torch.full((3,), float("nan")),
            torch.ones(2, dtype=torch.bool),
        )

    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(4, 6)
    with config.patch(cpu_backend="triton"):
        check(make_fx(fn)(x), x)


@interpreter
def test_shifts_past_the_width_shift_everything_out_as_in_eager():
    """Eager's shift by a count past the width (or a negative one) gives 0, or the sign for a right shift of a signed
    value; LLVM's is poison, so the kernels select it (the interpreter's numpy shifts already give eager's)."""
    for dtype, values in ((torch.int32, [5, -7, 2**31 - 1]), (torch.uint8, [255, 3, 128])):
        a = torch.tensor([v for v in values for _ in range(5)], dtype=dtype)
        b = (
            torch.tensor([0, 3, 31, 32, 200] * len(values), dtype=dtype)
            if dtype == torch.uint8
            else torch.tensor([0, 3, 31, 40, -1] * len(values), dtype=dtype)
        )
        with config.patch(cpu_backend="triton"):
            check(lambda x, y: (torch.bitwise_left_shift(x + 0, y), torch.bitwise_right_shift(x + 0, y)), a, b)
