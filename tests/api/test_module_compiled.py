"""``compile(module)`` end to end: an ``OptimizedModule`` that recompiles, pickles and copies."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
import torch

from dynajit import compiler
from dynajit.capture.testing import CompileCounter
from dynajit.compiler._module import OptimizedModule


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x):
        return torch.relu(self.dropout(self.linear(x)))


def test_compiled_module_matches_eager_and_is_an_optimized_module():
    block = Block().eval()
    counter = CompileCounter()
    compiled = compiler.compile(block, backend=counter)
    assert isinstance(compiled, OptimizedModule) and isinstance(compiled, torch.nn.Module)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), block(x))
    assert counter.frame_count == 1
    compiled(x)
    assert counter.frame_count == 1


def test_train_eval_and_to_recompile_as_needed():
    block = Block().eval()
    counter = CompileCounter()
    compiled = compiler.compile(block, backend=counter)
    x = torch.randn(2, 4)
    compiled(x)
    compiled.train()
    torch.manual_seed(1)
    expected = block(x)
    torch.manual_seed(1)
    torch.testing.assert_close(compiled(x), expected)
    compiled.eval().to(torch.float64)
    x64 = x.double()
    out = compiled(x64)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, block(x64))
    assert counter.frame_count >= 2


def test_pickle_and_deepcopy_give_working_compiled_modules():
    block = Block().eval()
    compiled = compiler.compile(block, backend="eager")
    x = torch.randn(2, 4)
    expected = compiled(x)
    for restored in (pickle.loads(pickle.dumps(compiled)), copy.deepcopy(compiled)):
        assert isinstance(restored, OptimizedModule)
        assert restored._orig_mod is not block
        assert list(restored.state_dict()) == list(block.state_dict())
        torch.testing.assert_close(restored(x), expected)


def _run_with_backward_hooks(wrap: Any) -> tuple[Any, ...]:
    """A training step of a module with a full backward hook and a backward pre-hook (which scales the output's
    gradient): the output, what the hooks received, and the gradients."""
    torch.manual_seed(0)
    block = Block().train()
    received = []
    block.register_full_backward_pre_hook(lambda module, grad_out: (grad_out[0] * 3,))
    block.register_full_backward_hook(lambda module, grad_in, grad_out: received.append((grad_in, grad_out)))
    x = torch.randn(2, 4, requires_grad=True)
    torch.manual_seed(1)
    out = wrap(block)(x)
    out.sum().backward()
    return out, received, x.grad, block.linear.weight.grad


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_module_backward_hooks_run_as_in_eager(backend):
    expected = _run_with_backward_hooks(lambda block: block)
    got = _run_with_backward_hooks(lambda block: compiler.compile(block, backend=backend, fullgraph=True))
    assert len(got[1]) == 1
    torch.testing.assert_close(got, expected)
