"""Compiled inference never holds more memory than eager: the default backend's wrapper frees at last use.

Each case runs the same program eagerly and through ``dynajit.compiler.compile`` (backend ``inductor``),
compares the results, and measures the most bytes the CPU allocator held above its starting level during
one call (``benchmarks/harness/timing.peak_bytes``: the profiler's memory events). Memory is
deterministic, so the bound holds on a loaded machine too.
"""

from __future__ import annotations

import functools
import itertools
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dynajit.capture as capture
from dynajit import compiler

# The measurement the benchmarks report (profiler memory events), so the bound is the one users read there.
_BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
if str(_BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(_BENCHMARKS))
from harness.timing import peak_bytes  # noqa: E402

# What compiled code may hold above eager's peak: nothing but rounding of a few scalar temporaries.
SLACK_BYTES = 1024


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


def eager_and_compiled(fn: Callable[..., Any], *args: Any) -> tuple[Any, Any, int, int]:
    """``fn``'s results and peak bytes of one call, eagerly and compiled (measured after compiling)."""
    compiled = compiler.compile(fn, backend="inductor")
    with torch.no_grad(), capture.observe() as seen:
        compiled(*args)
        expected, actual = fn(*args), compiled(*args)
        eager_peak = peak_bytes(lambda: fn(*args))
        compiled_peak = peak_bytes(lambda: compiled(*args))
    assert [f.reason for f in seen.frames if f.kind in ("eager", "error")] == []
    assert len(seen.graphs) == 1
    return expected, actual, eager_peak, compiled_peak


class ConvChain(nn.Module):
    """Convolutions with fused pointwise tails, residual blocks of one layout, then matmuls."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(4, 16, 3, padding=1)
        self.blocks = nn.ModuleList([nn.Conv2d(16, 16, 3, padding=1) for _ in range(4)])
        self.wide = nn.Conv2d(16, 64, 1)
        self.narrow = nn.Conv2d(64, 8, 3, stride=2, padding=1)
        self.fc1 = nn.Linear(8 * 16 * 16, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.stem(x)) * 0.5
        for block in self.blocks:
            y = torch.sigmoid(block(y)) * y + y
        y = F.hardswish(self.wide(y))
        y = torch.tanh(self.narrow(y) + 1.0)
        h = F.gelu(self.fc1(y.flatten(1)))
        return torch.softmax(self.fc2(h) * 2.0, -1)


def test_conv_chain_peak_at_most_eager():
    torch.manual_seed(0)
    model = ConvChain().eval()
    x = torch.randn(2, 4, 32, 32)
    expected, actual, eager_peak, compiled_peak = eager_and_compiled(model, x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert compiled_peak <= eager_peak + SLACK_BYTES, (compiled_peak, eager_peak)


def test_matmul_chain_peak_at_most_eager():
    torch.manual_seed(0)
    widths = [128, 256, 192, 320, 96, 160]
    layers = [(torch.randn(m, n) / m**0.5, torch.randn(n)) for m, n in itertools.pairwise(widths)]

    def mlp(x: torch.Tensor) -> torch.Tensor:
        for w, b in layers:
            x = torch.relu(x @ w) * torch.sigmoid(b) + b
        return x.sum(-1)

    x = torch.randn(64, 128)
    expected, actual, eager_peak, compiled_peak = eager_and_compiled(mlp, x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    assert compiled_peak <= eager_peak + SLACK_BYTES, (compiled_peak, eager_peak)


def test_aliasing_outputs_and_mutated_inputs_survive_freeing():
    """Freeing and reusing buffers leaves outputs that alias in eager aliased, and mutated inputs written."""

    w, up, down = torch.randn(64, 64) / 8, torch.randn(64, 256) / 8, torch.randn(256, 64) / 16

    def fn(x: torch.Tensor, acc: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # relu(x @ w) * 3 dies at the product with up (eager frees it there): no later kernel may hold it
        b = torch.sigmoid((torch.relu(x @ w) * 3.0) @ up) * 2.0
        c = torch.tanh(b @ down) + 1.0
        acc.add_(c)
        return c, c.view(-1), c.t(), b.sum(0)

    x = torch.randn(64, 64)
    eager_acc, compiled_acc = torch.zeros(64, 64), torch.zeros(64, 64)
    expected, actual, eager_peak, compiled_peak = eager_and_compiled(fn, x, torch.zeros(64, 64))
    assert compiled_peak <= eager_peak + SLACK_BYTES, (compiled_peak, eager_peak)
    compiled = compiler.compile(fn, backend="inductor")
    with torch.no_grad():
        expected = fn(x, eager_acc)
        actual = compiled(x, compiled_acc)
    torch.testing.assert_close(list(actual), list(expected))
    torch.testing.assert_close(compiled_acc, eager_acc)
    c, flat, transposed, _ = actual
    assert flat.data_ptr() == c.data_ptr() and transposed.data_ptr() == c.data_ptr()
    c.mul_(0.0)
    assert flat.abs().sum() == 0 and transposed.abs().sum() == 0
    assert [t.stride() for t in actual] == [t.stride() for t in expected]


def test_mobilenet_v3_small_peak_at_most_eager():
    """A real CNN (squeeze-excite blocks, hardswish, residuals): about a third of eager's peak before freeing."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None).eval()
    x = torch.randn(2, 3, 64, 64)
    expected, actual, eager_peak, compiled_peak = eager_and_compiled(model, x)
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)
    assert compiled_peak <= eager_peak + SLACK_BYTES, (compiled_peak, eager_peak)


def test_small_transformer_peak_at_most_eager():
    """A small T5 built from a config with random weights (relative attention, RMS norms, cross attention, LM head)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        relative_attention_num_buckets=8, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    model = transformers.T5ForConditionalGeneration(config).eval()
    ids, decoder_ids = torch.randint(0, 128, (2, 8)), torch.randint(0, 128, (2, 4))

    def encode_decode(ids: torch.Tensor, decoder_ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids, decoder_input_ids=decoder_ids).logits

    expected, actual, eager_peak, compiled_peak = eager_and_compiled(encode_decode, ids, decoder_ids)
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)
    assert compiled_peak <= eager_peak + SLACK_BYTES, (compiled_peak, eager_peak)


class InplaceActivation(nn.Module):
    """An in-place activation between two layers (``nn.ReLU(inplace=True)``, as VGG, SqueezeNet and ResNet
    use it): eager holds one wide activation, not two."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Linear(16, 2048)
        self.act = nn.ReLU(inplace=True)
        self.narrow = nn.Linear(2048, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.narrow(self.act(self.wide(x)))


def test_a_pointwise_kernel_writes_over_the_activation_it_reads_when_that_dies():
    torch.manual_seed(0)
    model, x = InplaceActivation().eval(), torch.randn(64, 16)
    expected, actual, eager_peak, compiled_peak = eager_and_compiled(model, x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    assert compiled_peak <= eager_peak + SLACK_BYTES, (compiled_peak, eager_peak)


def _relu_plus_flipped(lin: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    y = lin(x)
    return lin(torch.relu(y) + y.flip(0))  # y is read at its own index and at the mirrored one


def _relu_plus_transposed(lin: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    y = lin(x)
    return lin(torch.relu(y) * y.t())


@pytest.mark.parametrize("fn", [_relu_plus_flipped, _relu_plus_transposed])
def test_a_kernel_reading_its_dying_input_at_another_index_writes_elsewhere(fn):
    torch.manual_seed(0)
    lin, x = nn.Linear(32, 32).eval(), torch.randn(32, 32)
    expected, actual, _, _ = eager_and_compiled(functools.partial(fn, lin), x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
