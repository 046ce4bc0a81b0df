"""Freezing: an eval-mode batch norm after a convolution folds into it; values, dtypes and strides match eager."""

import pytest
import torch
import torch.nn.functional as F
from ilite_helpers import compiled

from dynajit.inductor_lite._freezing import fold_conv_batch_norm


class ConvBN(torch.nn.Module):
    def __init__(self, dims=2, bias=True, affine=True, dtype=torch.float32):
        super().__init__()
        torch.manual_seed(0)
        shape = (6, 3) + (3,) * dims
        self.dims = dims
        self.w = torch.nn.Parameter(torch.randn(shape, dtype=dtype))
        self.b = torch.nn.Parameter(torch.randn(6, dtype=dtype)) if bias else None
        self.register_buffer("mean", torch.randn(6, dtype=dtype))
        self.register_buffer("var", torch.rand(6, dtype=dtype) + 0.5)
        self.gamma = torch.nn.Parameter(torch.randn(6, dtype=dtype)) if affine else None
        self.beta = torch.nn.Parameter(torch.randn(6, dtype=dtype)) if affine else None

    def forward(self, x):
        conv = (F.conv1d, F.conv2d, F.conv3d)[self.dims - 1]
        y = conv(x, self.w, self.b, 1, 1)
        return F.relu(F.batch_norm(y, self.mean, self.var, self.gamma, self.beta, False, 0.1, 1e-3)) + 1


def _batch_norms(gm):
    return sum(n.target is F.batch_norm for n in gm.graph.nodes)


def _compare(module, x, **options):
    gm = torch.fx.symbolic_trace(module)
    c = compiled(gm, x, options={"freezing": True, **options})
    expected = module(x)
    actual = c(x)
    torch.testing.assert_close(actual, expected)
    assert actual.dtype == expected.dtype and actual.stride() == expected.stride()
    return gm


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_folded_conv_batch_norm_matches_eager(dims, bias, affine):
    module = ConvBN(dims, bias, affine)
    x = torch.randn((2, 3) + (7,) * dims)
    with torch.no_grad():
        gm = _compare(module, x)
        folded = fold_conv_batch_norm(gm)
    assert _batch_norms(gm) == 1 and _batch_norms(folded) == 0  # the caller's graph is not modified


def test_float64_folds_and_matches_eager():
    module = ConvBN(dtype=torch.float64)
    with torch.no_grad():
        _compare(module, torch.randn(2, 3, 5, 5, dtype=torch.float64))
        assert _batch_norms(fold_conv_batch_norm(torch.fx.symbolic_trace(module))) == 0


def test_channels_last_input_keeps_eager_strides():
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    with torch.no_grad():
        _compare(ConvBN(), x)


def test_parameters_that_need_gradients_are_not_folded():
    module = ConvBN()
    gm = torch.fx.symbolic_trace(module)
    assert fold_conv_batch_norm(gm) is gm
    x = torch.randn(2, 3, 6, 6)
    c = compiled(gm, x, options={"freezing": True})
    actual = c(x)
    actual.sum().backward()
    grad, module.w.grad = module.w.grad, None
    module(x).sum().backward()
    torch.testing.assert_close(grad, module.w.grad)


def test_without_freezing_in_place_parameter_changes_are_seen():
    module = ConvBN()
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        c = compiled(torch.fx.symbolic_trace(module), x)
        c(x)
        module.var.mul_(3)
        module.w.add_(1)
        torch.testing.assert_close(c(x), module(x))


def test_batch_norm_in_training_or_with_other_users_is_not_folded():
    class Shared(ConvBN):
        def forward(self, x):
            y = F.conv2d(x, self.w, self.b)
            return F.batch_norm(y, self.mean, self.var, self.gamma, self.beta, False) + y

    class Training(ConvBN):
        def forward(self, x):
            y = F.conv2d(x, self.w, self.b)
            return F.batch_norm(y, self.mean.clone(), self.var.clone(), self.gamma, self.beta, True)

    with torch.no_grad():
        for module in (Shared(), Training()):
            gm = torch.fx.symbolic_trace(module)
            assert fold_conv_batch_norm(gm) is gm
            _compare(module, torch.randn(2, 3, 6, 6))
