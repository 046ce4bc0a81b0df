"""A captured model's written-out attention reaches the default backend as the fused attention kernel."""

from __future__ import annotations

import logging

import pytest
import torch

from dynajit import compiler


class SelfAttention(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        batch, seq, dim = x.shape
        heads = self.qkv(x).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = heads.unbind(0)
        weights = torch.nn.functional.softmax((q * (dim // self.heads) ** -0.5) @ k.transpose(2, 3), dim=-1)
        return self.proj((weights @ v).permute(0, 2, 1, 3).reshape(batch, seq, dim))


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "written_out"])
def test_written_out_attention_compiles_to_the_fused_kernel(fuse, caplog):
    torch.manual_seed(0)
    eager = SelfAttention()
    source = SelfAttention()
    source.load_state_dict(eager.state_dict())
    compiled = compiler.compile(source, options={"fuse_attention": fuse})
    x = torch.randn(2, 10, 32)
    with caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        actual = compiled(x)
    expected = eager(x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert any("one fused kernel" in r.getMessage() for r in caplog.records) == fuse
    actual.square().sum().backward()
    expected.square().sum().backward()
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), source.parameters()):
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, atol=1e-5, rtol=1e-5, msg=name)
