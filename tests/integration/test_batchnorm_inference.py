"""Batch norm through the default backend, in eval and train mode, with and without grad mode, against eager.

In eval mode AOT autograd's decomposition of ``_native_batch_norm_legit_no_training`` calls the
mutable ``_native_batch_norm_legit`` (training=False, so nothing is mutated), which must be
decomposed as well: otherwise the graph is not functional, compilation fails and the frame runs
eagerly. Every case here must compile (no frame falls back) and match eager's outputs and
running statistics.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import dynajit.capture as capture
from dynajit import compiler


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


def _randomize(model: nn.Module) -> nn.Module:
    """Non-trivial affine parameters and running statistics, so a wrong formula cannot pass by accident."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                if m.affine:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
                if m.track_running_stats:
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
    return model


def _run_compiled(fn: Callable[[], Any]) -> Any:
    """Call ``fn`` and fail if any frame it converts falls back to eager."""
    with capture.observe() as seen, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    assert [f.kind for f in seen.frames if f.kind in ("eager", "error")] == []
    assert not [w for w in caught if "eager" in str(w.message)], [str(w.message) for w in caught]
    assert any(f.kind == "compiled" for f in seen.frames) or not seen.frames
    return out


def check_module(model: nn.Module, make_input: Callable[[], torch.Tensor], *, train: bool, grad: bool, calls: int = 2):
    """Eager and compiled copies of ``model`` see the same inputs; outputs and buffers must match after each call."""
    torch.manual_seed(0)
    eager = _randomize(model).train(train)
    source = copy.deepcopy(eager)
    compiled = compiler.compile(source)
    for _ in range(calls):
        x = make_input()
        with torch.set_grad_enabled(grad):
            expected = eager(x)
            actual = _run_compiled(lambda x=x: compiled(x))
        assert (actual.shape, actual.dtype, actual.stride()) == (expected.shape, expected.dtype, expected.stride())
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
        for (name, mine), (_, theirs) in zip(source.named_buffers(), eager.named_buffers()):
            torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5, msg=f"buffer {name}")
    return source, eager


MODES = [(False, False), (False, True), (True, False), (True, True)]
MODE_IDS = ["eval_no_grad", "eval", "train_no_grad", "train"]

NORMS = {
    "bn1d_2d_input": (lambda: nn.BatchNorm1d(6), (8, 6)),
    "bn1d_3d_input": (lambda: nn.BatchNorm1d(6), (4, 6, 5)),
    "bn2d": (lambda: nn.BatchNorm2d(6), (3, 6, 5, 4)),
    "bn3d": (lambda: nn.BatchNorm3d(6), (2, 6, 3, 4, 5)),
    "no_affine": (lambda: nn.BatchNorm2d(6, affine=False), (3, 6, 5, 4)),
    "cumulative_average": (lambda: nn.BatchNorm2d(6, momentum=None), (3, 6, 5, 4)),
    "no_running_stats": (lambda: nn.BatchNorm2d(6, track_running_stats=False), (3, 6, 5, 4)),
}


@pytest.mark.parametrize(("train", "grad"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_batch_norm_matches_eager(norm, train, grad):
    make, shape = NORMS[norm]
    check_module(make(), lambda: torch.randn(shape), train=train, grad=grad)


def _conv_bn_relu() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2),
        nn.BatchNorm2d(8),
        nn.ReLU6(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )


@pytest.mark.parametrize(("train", "grad"), MODES, ids=MODE_IDS)
def test_conv_bn_relu_stack_matches_eager(train, grad):
    check_module(_conv_bn_relu(), lambda: torch.randn(2, 3, 12, 12), train=train, grad=grad, calls=3)


def test_train_mode_gradients_match_eager():
    source, eager = check_module(_conv_bn_relu(), lambda: torch.randn(2, 3, 12, 12), train=True, grad=True, calls=1)
    x = torch.randn(2, 3, 12, 12)
    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    eager(x_eager).square().sum().backward()
    compiled = compiler.compile(source)
    _run_compiled(lambda: compiled(x_compiled).square().sum().backward())
    torch.testing.assert_close(x_compiled.grad, x_eager.grad, atol=1e-5, rtol=1e-5)
    for (name, mine), (_, theirs) in zip(source.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-5, rtol=1e-5, msg=f"grad of {name}")


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_torchvision_model_in_eval_under_no_grad(name):
    models = pytest.importorskip("torchvision.models")
    torch.manual_seed(0)
    model = _randomize(getattr(models, name)()).eval()
    compiled = compiler.compile(model)
    x = torch.randn(1, 3, 48, 48)
    with torch.no_grad():
        expected = model(x)
        actual = _run_compiled(lambda: compiled(x))
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_conv_bn_relu_at_changing_sizes(train):
    sizes = iter([(2, 10), (3, 12), (5, 9), (1, 11), (4, 10)])

    def make_input():
        n, h = next(sizes)
        return torch.randn(n, 3, h, 8)

    check_module(_conv_bn_relu(), make_input, train=train, grad=False, calls=5)


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize(
    "norm, make",
    [
        (lambda: nn.BatchNorm1d(4), lambda: torch.randn(2, 2, 4).mT),
        (lambda: nn.BatchNorm2d(4), lambda: torch.randn(3, 3, 2, 4).permute(2, 3, 0, 1)),
        (lambda: nn.BatchNorm2d(4), lambda: torch.randn(2, 4, 3, 3).to(memory_format=torch.channels_last)),
    ],
)
def test_batch_norm_of_a_strided_input_has_eagers_layout(norm, make, train):
    # Eager's kernel lays the output out in the input's suggested memory format (contiguous unless the input is
    # channels-last); the decomposition followed the input's strides, so `.view()` of the output failed compiled.
    module = norm().train(train).requires_grad_(False)
    twin = copy.deepcopy(module)
    x = make()
    expected = module(x)
    actual = compiler.compile(twin)(x)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("training", [False, True])
def test_a_branch_on_the_layout_of_a_batch_norm_of_a_transposed_input(backend, training):
    # Eager's CPU kernel returns a contiguous result for a transposed input; the fake kernel kept the input's
    # strides, so the traced program took the other branch and raised where eager computes.
    norm = nn.BatchNorm1d(3).train(training)

    def fn(x):
        y = norm(x)
        return y.prod(2, keepdim=True) - x if y.is_contiguous() else y.view(-1)

    compiler.reset()
    x = torch.linspace(-1, 1, 6).view(1, 2, 3).mT
    expected, actual = fn(x), compiler.compile(fn, backend=backend)(x)
    torch.testing.assert_close(actual, expected)
    assert actual.stride() == expected.stride()


_LAYOUTS = {
    "contiguous": lambda: torch.randn(2, 6, 4, 5),
    "channels_last": lambda: torch.randn(2, 6, 4, 5).to(memory_format=torch.channels_last),
    "channels_last_1x1": lambda: torch.randn(2, 6, 1, 1).to(memory_format=torch.channels_last),
    "transposed": lambda: torch.randn(2, 6, 5, 4).transpose(2, 3),
    "sliced": lambda: torch.randn(2, 6, 4, 10)[..., ::2],
    "bfloat16": lambda: torch.randn(2, 6, 4, 5).to(torch.bfloat16),
    "float64": lambda: torch.randn(2, 6, 4, 5, dtype=torch.float64),
}


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_eval_batch_norm_gives_eagers_layout_and_values(layout, grad):
    # Eval-mode batch norm is one op of the backend's while traced; its result takes the layout eager's kernel
    # gives (the input's suggested memory format, contiguous for a transposed input, where torch's meta kernel
    # follows the input's strides) and a view of it works.
    make = _LAYOUTS[layout]
    dtype = make().dtype
    bn = _randomize(nn.BatchNorm2d(6)).to(dtype).eval()

    def fn(x):
        y = bn(x)
        return y, y.relu().flatten()[:7], y.view(-1)[:7] if layout != "channels_last" else y

    compiled = compiler.compile(fn)
    for _ in range(2):
        x = make().requires_grad_(grad)
        with torch.set_grad_enabled(grad):
            expected, actual = fn(x), _run_compiled(lambda x=x: compiled(x))
        for e, a in zip(expected, actual):
            assert (a.shape, a.dtype, a.stride()) == (e.shape, e.dtype, e.stride())
        tolerance = {"atol": 1e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(actual, expected, **tolerance)


@pytest.mark.parametrize("shape", [(3, 5, 4, 2), (2, 5), (0, 5, 4, 2), (3, 5, 0)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_eval_batch_norm_gives_eagers_values_and_gradients(dtype, affine, shape):
    # An empty input failed the compile: torch's decomposition of the gradient divided by its element count.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype)
    statistics = torch.float64 if dtype == torch.float64 else torch.float32  # (eager refuses other mixes)
    mean, var = torch.randn(5, generator=g).to(statistics), (torch.rand(5, generator=g) + 0.5).to(statistics)
    weight = (torch.rand(5, generator=g) + 0.5).to(statistics).requires_grad_() if affine else None
    bias = torch.randn(5, generator=g).to(statistics).requires_grad_() if affine else None

    def fn(x):
        return torch.nn.functional.batch_norm(x, mean, var, weight, bias, False, 0.1, 1e-3).sin()

    results = []
    for f in (fn, compiler.compile(fn)):
        leaf = x.clone().requires_grad_()
        out = f(leaf)
        out.sum().backward()
        results.append((out.detach(), leaf.grad, *(p.grad for p in (weight, bias) if p is not None)))
        for p in (weight, bias):
            if p is not None:
                p.grad = None
    tolerance = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(results[1], results[0], **tolerance)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("shape", [(3, 2, 5), (0, 2, 5)], ids=str)
def test_a_batch_norm_of_a_batch_norm_matches_eager(shape, grad):
    # The rewrite into one op per batch norm left the second reading the first one's erased node: the compile failed.
    check_module(
        nn.Sequential(nn.BatchNorm1d(2), nn.BatchNorm1d(2)), lambda: torch.randn(shape), train=False, grad=grad
    )


def test_an_empty_input_with_another_channel_count_gets_eagers_gradients():
    # Eager checks the channel count only of a non-empty input; the gradient's per-channel reshape failed the compile.
    norm = _randomize(nn.BatchNorm2d(4)).eval()
    results = []
    for f in (norm, compiler.compile(norm)):
        norm.zero_grad()
        x = torch.randn(0, 1, 0, 3, requires_grad=True)
        out = f(x)
        out.sum().backward()
        results.append((out.shape, out.stride(), x.grad.shape, norm.weight.grad.clone(), norm.bias.grad.clone()))
    assert results[1][:3] == results[0][:3]
    torch.testing.assert_close(results[1][3:], results[0][3:])


_REFUSED = {
    "mixed_dtypes": (torch.float64, torch.float32, 5),
    "statistics_of_another_size": (torch.float32, torch.float32, 4),
}


@pytest.mark.parametrize("case", list(_REFUSED))
def test_an_eval_batch_norm_eager_refuses_is_refused_compiled(case):
    # inductor-lite computed where eager's kernel refuses mixed dtypes; a short statistic the trace refused already.
    dtype, statistics, size = _REFUSED[case]
    mean, var = torch.zeros(size, dtype=statistics), torch.ones(size, dtype=statistics)

    def fn(x):
        return torch.nn.functional.batch_norm(x, mean, var, None, None, False, 0.1, 1e-3).sin()

    compiled = compiler.compile(fn)
    for _ in range(2):
        x = torch.randn(3, 5, 2, dtype=dtype)
        with pytest.raises(RuntimeError) as expected:
            fn(x)
        with pytest.raises(RuntimeError) as actual:
            compiled(x)
        assert str(actual.value) == str(expected.value)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_a_reshape_of_a_batch_norm_of_a_transposed_input_views_it_as_in_eager(backend, train):
    # (c35-1:100) Eager's batch norm of a transposed input is contiguous and its reshape a view of it; traced with
    # torch's meta kernel (aot_eager) the result kept the input's strides and the reshape was a copy.
    bn = _randomize(nn.BatchNorm2d(3)).train(train)
    source = copy.deepcopy(bn)

    def fn(module, x):
        y = module(x)
        return y, y.reshape(-1)

    compiled = compiler.compile(fn, backend=backend)
    for width in (2, 3):
        x = torch.randn(3, width, 4).mT.unsqueeze(0)
        expected, actual = fn(bn, x), _run_compiled(lambda x=x: compiled(source, x))
        for e, a in zip(expected, actual):
            assert (a.shape, a.stride()) == (e.shape, e.stride())
        torch.testing.assert_close(actual, expected)
        shares = [o[0].untyped_storage().data_ptr() == o[1].untyped_storage().data_ptr() for o in (expected, actual)]
        assert shares[1] == shares[0]


def test_an_eval_batch_norm_of_an_empty_vector_compiles():
    # (OpInfo's samples) a 1-D input has no channel dim: the fused op read its statistics at dim 1 and the
    # compile failed; eager accepts only an empty one, with empty statistics
    def fn(x, mean, var):
        return torch.nn.functional.batch_norm(x, mean, var, training=False) + 1

    args = (torch.zeros(0), torch.zeros(0), torch.ones(0))
    torch.testing.assert_close(compiler.compile(fn)(*args), fn(*args))  # (strict: no fallback)
