"""A transformer block over many batch sizes and sequence lengths: at most three compiles (static, batch one, dynamic),
eager's results at every size, with the eager and the inductor backends; and ``explain`` naming why it recompiled."""

from __future__ import annotations

import copy

import pytest
import torch

from dynajit import compiler
from dynajit._dynamo import lookup_backend
from dynajit.capture.testing import CompileCounter


class Block(torch.nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


# Every batch size 1..16 and every sequence length 7..128 at least once (138 calls), paired so both keep changing;
# the first two calls differ in both, so the second compile makes both dimensions dynamic, except batch 1, which is
# specialised (as sizes 0 and 1 always are): the next batch of two or more compiles once more.
SIZES = [(2, 7), (1, 128)] + [(b, 7 + (b * 37) % 122) for b in range(1, 17)] + [(1 + s % 16, s) for s in range(7, 129)]


def _counting(backend: str) -> tuple[CompileCounter, object]:
    """A fresh compile cache and ``backend`` wrapped to count the frames compiled."""
    counter = CompileCounter()
    real = lookup_backend(backend)

    def counting(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        counter(gm, example_inputs)
        return real(gm, example_inputs)

    compiler.reset()
    return counter, counting


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a backend failure falls back to eager with a warning
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_transformer_block_compiles_at_most_three_times_over_batch_and_sequence(backend: str) -> None:
    torch.manual_seed(0)
    block = Block().eval()
    counter, counting = _counting(backend)
    compiled = compiler.compile(block, backend=counting)
    with torch.no_grad():
        for batch, seq in SIZES:
            x = torch.randn(batch, seq, 32)
            out, expected = compiled(x), block(x)
            assert out.shape == expected.shape and out.dtype == expected.dtype
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4, msg=lambda m: f"{batch}x{seq}: {m}")
    assert counter.frame_count <= 3


def test_explain_lists_why_it_recompiled() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.relu() * 2

    explain = compiler.explain(fn)
    explain(torch.randn(4, 3))
    report = explain(torch.randn(7, 3))
    assert report.graph_count == 1
    assert any("L['x'] size()[0]: expected 4, got 7" in reason for reason in report.recompile_reasons)
    assert "Recompile reasons:" in str(report)
    assert explain(torch.randn(9, 3)).graph_count == 0  # the dynamic entry serves size 9


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_batch_norm_training_compiles_three_times_over_batch_sizes(backend: str) -> None:
    # Batch norm's running variance is scaled by n / (n - 1), a float computed from the batch size:
    # it must stay symbolic (evaluated per call), not be fixed to the first dynamic size.
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    mirror = copy.deepcopy(eager)
    counter, counting = _counting(backend)
    compiled = compiler.compile(mirror, backend=counting)
    for batch in (2, 3, 5, 4, 7, 1):
        x = torch.randn(batch, 3, 7, 7)
        expected, out = eager(x), compiled(x)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        expected.pow(2).sum().backward()
        out.pow(2).sum().backward()
        torch.testing.assert_close(mirror[1].running_var, eager[1].running_var)
        torch.testing.assert_close(mirror[1].running_mean, eager[1].running_mean)
        for p_eager, p_compiled in zip(eager.parameters(), mirror.parameters()):
            torch.testing.assert_close(p_compiled.grad, p_eager.grad, rtol=1e-4, atol=1e-4)
    assert counter.frame_count == 3  # static 2, dynamic from 3 on, and batch 1 specialised
