"""Mixed precision through the default backend: an autocast block is one graph, and its casts are compiled kernels."""

from __future__ import annotations

import pytest
import torch

from dynajit import compiler


class MixedPrecisionNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = torch.nn.functional.gelu(self.fc1(x))
            logits = self.fc2(self.norm(h))
        return logits.float().log_softmax(-1)


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_autocast_block_through_inductor_matches_eager(train):
    torch.manual_seed(0)
    eager = MixedPrecisionNet()
    source = MixedPrecisionNet()
    source.load_state_dict(eager.state_dict())
    x = torch.randn(8, 16)
    explained = compiler.explain(source)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    compiled = compiler.compile(source)
    with torch.set_grad_enabled(train):
        expected, actual = eager(x), compiled(x)
    assert actual.dtype == expected.dtype == torch.float32
    # Both sides compute the linear layers in bfloat16 and round at the same casts: the compiled result is within
    # float rounding of eager's, where computing in float32 instead would be about 5e-3 away.
    torch.testing.assert_close(actual, expected, atol=1e-3, rtol=1e-3)
    if train:
        expected.sum().backward()
        actual.sum().backward()
        for (name, p_eager), p_compiled in zip(eager.named_parameters(), source.parameters()):
            assert p_compiled.grad.dtype == p_eager.grad.dtype, name
            torch.testing.assert_close(p_compiled.grad, p_eager.grad, atol=0.1, rtol=5e-2, msg=name)
