"""Layer norm through the default backend, as eager computes it, for every input layout and type.

``native_layer_norm`` reaches inductor-lite's lowering as one op where its input is laid out as ``torch.empty`` lays
it out and it has one floating type; it is decomposed elsewhere (a transposed input, whose eager result is
contiguous where the fake kernel's is not; mixed types, whose eager statistics are float32 where the fake ones are
the input's). Every case runs eagerly and compiled on the same inputs and compares values, dtypes, shapes and
strides, and gradients where it trains.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dynajit import compiler


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


def _same(actual, expected, atol=1e-5, rtol=1e-5):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)


def _affine(shape, dtype):
    torch.manual_seed(1)
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)


_CASES = {
    "3d": (lambda: torch.randn(2, 5, 16), (16,), "both"),
    "no_affine": (lambda: torch.randn(4, 16), (16,), "none"),
    "weight_only": (lambda: torch.randn(4, 16), (16,), "weight"),
    "bias_only": (lambda: torch.randn(4, 16), (16,), "bias"),
    "two_dims": (lambda: torch.randn(3, 4, 8), (4, 8), "both"),
    "batch_of_one": (lambda: torch.randn(1, 7, 16), (16,), "both"),
    "row_of_one": (lambda: torch.randn(6, 1), (1,), "both"),
    "transposed": (lambda: torch.randn(16, 5).t(), (16,), "both"),
    "size_one_channel_strided": (lambda: torch.randn(3, 16, 1).mT, (16,), "none"),
    "permuted_channels_last": (lambda: torch.randn(2, 8, 3, 3).permute(0, 2, 3, 1), (8,), "both"),
    "offset_view": (lambda: torch.randn(5, 16)[1:], (16,), "both"),
    "empty_rows": (lambda: torch.randn(0, 16), (16,), "both"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", list(_CASES))
def test_layer_norm_equals_eager(case, dtype):
    make, shape, affine = _CASES[case]
    x = make().to(dtype)
    weight, bias = _affine(shape, dtype)
    weight = weight if affine in ("both", "weight") else None
    bias = bias if affine in ("both", "bias") else None

    def fn(x):
        return F.layer_norm(x, shape, weight, bias, 1e-5)

    loose = dtype in (torch.float16, torch.bfloat16)
    _same(compiler.compile(fn)(x), fn(x), *((1e-2, 1e-2) if loose else (1e-5, 1e-5)))


def test_a_computed_input_and_a_result_read_twice():
    # The input is an expression (computed once, not once per pass over the row) and the result feeds two ops.
    norm = torch.nn.LayerNorm(16)

    def fn(x, y):
        h = norm(x * 2 + y)
        return h @ h.t(), h.relu()

    x, y = torch.randn(3, 16), torch.randn(3, 16)
    for actual, expected in zip(compiler.compile(fn)(x, y), fn(x, y)):
        _same(actual, expected)


def test_an_overflowing_row_normalizes_to_nan_as_in_eager():
    # x * rstd and rstd * mean overflow for a row of one largest float32: eager's affine form gives NaN where
    # (x - mean) * rstd gives 0 (fuzz a91-1:291).
    x = torch.tensor([[torch.finfo(torch.float32).max], [1.5], [-2.0]])

    def fn(x):
        return F.layer_norm(x, (1,), torch.ones(1), torch.zeros(1))

    _same(compiler.compile(fn)(x), fn(x))


@pytest.mark.parametrize("mixed", [False, True], ids=["one_type", "bfloat16_input_float_weight"])
def test_layer_norm_trains_as_eager(mixed):
    # A bfloat16 input with float32 parameters is decomposed: eager's mixed-type kernel saves float32 statistics
    # for its backward where the fake kernel says bfloat16, and a backward reading them as bfloat16 read garbage.
    torch.manual_seed(0)
    eager, source = torch.nn.LayerNorm(16), torch.nn.LayerNorm(16)
    with torch.no_grad():
        eager.weight.normal_()
        eager.bias.normal_()
    source.load_state_dict(eager.state_dict())
    x = torch.randn(4, 3, 16, dtype=torch.bfloat16 if mixed else torch.float32)
    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    scale = torch.arange(16.0)
    expected = (eager(x_eager) * scale).sum()
    actual = (compiler.compile(source)(x_compiled) * scale).sum()
    expected.backward()
    actual.backward()
    tol = dict(atol=5e-2, rtol=5e-2) if mixed else dict(atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(actual, expected, **tol)
    torch.testing.assert_close(x_compiled.grad, x_eager.grad, **tol)
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), source.parameters()):
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, **tol, msg=name)


def test_dynamic_sizes_normalize_each_call():
    norm = torch.nn.LayerNorm(8)

    def fn(x):
        return norm(x).sum(-1) + norm(x)[..., 0]

    compiled = compiler.compile(fn, dynamic=True)
    for batch, length in ((2, 3), (4, 5), (3, 7)):
        x = torch.randn(batch, length, 8)
        _same(compiled(x), fn(x))
