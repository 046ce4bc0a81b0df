"""``set_stance`` and ``config`` from the user's side."""

from __future__ import annotations

import pytest
import torch

from dynajit import _dynamo, compiler
from dynajit.capture.testing import CompileCounter


def test_force_eager_as_a_context_manager_compiles_nothing():
    counter = CompileCounter()
    compiled = compiler.compile(lambda x: x.sin() + 1, backend=counter)
    x = torch.randn(2)
    with compiler.set_stance("force_eager"):
        torch.testing.assert_close(compiled(x), x.sin() + 1)
    assert counter.frame_count == 0
    compiled(x)
    assert counter.frame_count == 1


def test_fail_on_recompile_and_eager_on_recompile():
    counter = CompileCounter()

    def f(x):
        return x * 2

    compiled = compiler.compile(f, backend=counter, dynamic=False)
    compiled(torch.randn(2))
    with compiler.set_stance("eager_on_recompile"):
        torch.testing.assert_close(compiled(torch.ones(5)), torch.ones(5) * 2)
        assert counter.frame_count == 1
    with compiler.set_stance("fail_on_recompile"), pytest.raises(RuntimeError):
        compiled(torch.ones(7))
    compiled(torch.randn(2))  # a cache hit is fine under any stance
    stance = compiler.set_stance("default")
    assert hasattr(stance, "__enter__")


def test_unknown_stance_lists_the_stances():
    with pytest.raises(ValueError, match="force_eager"):
        compiler.set_stance("eagerly")


def test_config_patch_set_and_unknown_field():
    before = compiler.config.cache_size_limit
    with compiler.config.patch(cache_size_limit=before + 1):
        assert compiler.config.cache_size_limit == before + 1
        assert _dynamo.config.cache_size_limit == before + 1
    assert compiler.config.cache_size_limit == before
    with pytest.raises(AttributeError, match="cache_size_limit"):
        compiler.config.cache_size_limt = 3
    assert "cache_size_limit" in dir(compiler.config)
