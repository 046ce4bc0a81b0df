"""Inference with ``options={"freezing": True}``: conv + eval batch norm folded, against eager, end to end."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dynajit.inductor_lite._freezing as freezing
from dynajit import compiler


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


class Block(nn.Module):
    """A residual block as in ResNet: conv-bn-relu, conv-bn, plus the input."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + x)


def _model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block()).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    return model


@pytest.mark.parametrize("channels_last", [False, True])
def test_frozen_inference_matches_eager_and_folds_every_batch_norm(monkeypatch, channels_last):
    folded = []
    real = freezing.fold_conv_batch_norm

    def spy(gm):
        out = real(gm)
        folded.append(sum(n.target is nn.functional.batch_norm for n in out.graph.nodes))
        return out

    monkeypatch.setattr("dynajit.inductor_lite._compile.fold_conv_batch_norm", spy)
    model = _model()
    x = torch.randn(2, 4, 9, 9)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    compiled = compiler.compile(model, options={"freezing": True})
    with torch.no_grad():
        expected = model(x)
        actual = compiled(x)
    torch.testing.assert_close(actual, expected)
    assert actual.dtype == expected.dtype and actual.stride() == expected.stride()
    assert folded == [0]  # one graph, no batch norm left in it


def test_frozen_model_still_trains_correctly_with_grad_mode_on():
    model = _model()
    compiled = compiler.compile(model, options={"freezing": True})
    x = torch.randn(2, 4, 9, 9)
    with torch.no_grad():
        compiled(x)
    compiled(x).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for got, want in zip(grads, (p.grad for p in model.parameters())):
        torch.testing.assert_close(got, want)
