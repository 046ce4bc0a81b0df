"""The workloads: small programs built offline (random weights, no downloads), each with its inputs.

A workload builds a :class:`Case`: the thing a compiler wraps (a function or an
``nn.Module``) and a ``run`` that makes one step with a given callable (the
original or a compiled one) and returns what must match eager. Real models
(the model zoo's torchvision, timm and transformers entries) are in
:mod:`harness.real_models` and only join when their packages are installed and match torch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["SUITE", "Case", "TransformerBlock", "Workload", "make_transformer_case"]


@dataclass
class Case:
    """One workload instance: what to compile and how to run one step with it."""

    target: Callable[..., Any]
    run: Callable[[Callable[..., Any]], Any]
    rtol: float = 1e-4
    atol: float = 1e-4
    inputs: tuple[Any, ...] = ()


@dataclass
class Workload:
    """A named workload; ``build`` makes a fresh :class:`Case` (seeded, so every build is identical)."""

    name: str
    description: str
    build: Callable[[], Case]
    in_quick: bool = True
    # Returns why the workload cannot run here (a missing or mismatched package), or None.
    unavailable: Callable[[], str | None] = field(default=lambda: None)
    # A real model's report group (``cnn``, ``transformer``, ``training``, ``generate``); "" for the small programs.
    group: str = ""


def _seeded(seed: int = 0) -> None:
    torch.manual_seed(seed)


def _inference(target: Callable[..., Any], *inputs: Any, rtol: float = 1e-4, atol: float = 1e-4) -> Case:
    def run(fn: Callable[..., Any]) -> Any:
        with torch.no_grad():
            return fn(*inputs)

    return Case(target, run, rtol, atol, inputs)


def pointwise_chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Eight elementwise ops that eager runs as eight passes over memory and a fuser runs as one."""
    a = torch.sin(x) * 2.0 + y
    b = torch.relu(a) - torch.tanh(y)
    return torch.sigmoid(b * a) + 1.0


def _pointwise() -> Case:
    _seeded()
    return _inference(pointwise_chain, torch.randn(1 << 20), torch.randn(1 << 20))


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    """Row softmax: a reduction (max), a pointwise exp, a reduction (sum) and a division."""
    return torch.softmax(x, dim=-1)


def _softmax() -> Case:
    _seeded()
    return _inference(softmax_rows, torch.randn(1024, 1024))


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last dimension followed by GELU, as in a transformer's MLP input."""
    return F.gelu(F.layer_norm(x, (x.shape[-1],), weight, bias))


def _layer_norm() -> Case:
    _seeded()
    return _inference(layer_norm, torch.randn(2048, 512), torch.randn(512), torch.randn(512))


class Embeddings(nn.Module):
    """A transformer's input layer: token, position and segment lookups summed, then LayerNorm (BERT's)."""

    def __init__(self, vocab: int = 4096, positions: int = 512, dim: int = 256) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(positions, dim)
        self.segments = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        return self.norm(self.tokens(ids) + self.positions(positions) + self.segments(segments))


def _embeddings() -> Case:
    _seeded()
    ids, segments = torch.randint(0, 4096, (8, 128)), torch.randint(0, 2, (8, 128))
    return _inference(Embeddings().eval(), ids, segments)


class MLP(nn.Module):
    """Three linear layers with GELU between them."""

    def __init__(self, sizes: tuple[int, ...] = (512, 1024, 512, 10)) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = F.gelu(layer(x))
        return self.layers[-1](x)


def _mlp_inference() -> Case:
    _seeded()
    model = MLP().eval()
    return _inference(model, torch.randn(256, 512))


class MLPLoss(nn.Module):
    """The MLP and its cross-entropy loss, so the compiled graph covers forward, loss and backward."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = MLP()

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.mlp(x), target)


def _mlp_training() -> Case:
    _seeded()
    model = MLPLoss().train()
    x, target = torch.randn(256, 512), torch.randint(0, 10, (256,))
    params = list(model.parameters())

    def run(fn: Callable[..., Any]) -> Any:
        for param in params:
            param.grad = None
        loss = fn(x, target)
        loss.backward()
        return (loss.detach(), *(param.grad for param in params))

    return Case(model, run, rtol=1e-3, atol=1e-4, inputs=(x, target))


class TransformerBlock(nn.Module):
    """A pre-norm transformer block: multi-head self-attention (written out) and a GELU MLP."""

    def __init__(self, dim: int = 256, heads: int = 4, hidden: int = 1024) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(dim // self.heads)
        out = torch.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(batch, seq, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def make_transformer_case(batch: int = 8, seq: int = 128) -> Case:
    """A seeded transformer block in eval mode and its input, run under ``no_grad``."""
    _seeded()
    block = TransformerBlock().eval()
    return _inference(block, torch.randn(batch, seq, 256), rtol=1e-3, atol=1e-4)


def tiny_add(x: torch.Tensor) -> torch.Tensor:
    """One op on one element: the call costs nothing, so its time is the wrapper's per-call overhead."""
    return x + 1


def _tiny() -> Case:
    return _inference(tiny_add, torch.ones(1))


SUITE: list[Workload] = [
    Workload("pointwise_chain", "8 elementwise ops on two 1M-float vectors", _pointwise),
    Workload("softmax", "row softmax of a 1024x1024 matrix", _softmax),
    Workload("layer_norm", "layer_norm + GELU on 2048x512", _layer_norm),
    Workload("embeddings", "3 embedding lookups summed + LayerNorm, batch 8 x seq 128, dim 256", _embeddings),
    Workload("mlp_inference", "3-layer GELU MLP 512-1024-512-10, batch 256, no_grad", _mlp_inference),
    Workload("mlp_training", "same MLP + cross-entropy, forward and backward", _mlp_training),
    Workload("transformer_block", "pre-norm block, dim 256, 4 heads, batch 8 x seq 128", make_transformer_case),
    Workload("tiny_call", "x + 1 on one element: per-call overhead", _tiny),
]
