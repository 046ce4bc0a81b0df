"""One compiled function called in a sequence of ambient modes (no_grad, grad mode, inference mode), with a
mode block inside it that a graph break may cut: each call equals eager's in values, autograd state, the mode
left behind and gradients. A graph compiled in one mode must never answer a call made in another."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

import dynajit.capture
from dynajit import compiler

BLOCKS = {"no_grad": torch.no_grad, "enable_grad": torch.enable_grad, "inference_mode": torch.inference_mode}
AMBIENT = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference": torch.inference_mode}
SEQUENCES = [("no_grad", "grad", "no_grad"), ("grad", "no_grad", "grad"), ("inference", "grad", "no_grad")]


def _program(block: str, cut: str, view: bool) -> Any:
    def fn(x):
        a = x * 2
        with BLOCKS[block]():
            v = x[0] if view else x * 3
            if cut == "inside":
                dynajit.capture.graph_break()
            w = v * 1
        if cut == "after":
            dynajit.capture.graph_break()
        return a + w.sum(), v, torch.is_grad_enabled()

    return fn


def _run(fn: Any, mode: str) -> Any:
    leaf = torch.arange(6.0).reshape(2, 3).requires_grad_()
    x = leaf * 1
    with AMBIENT[mode]():
        out = fn(x)
        left = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
    states = [(t.requires_grad, t.is_inference(), t._is_view()) for t in out[:2]]
    if out[0].requires_grad:
        out[0].sum().backward()
    return [t.detach() for t in out[:2]], out[2], states, left, leaf.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize(
    ("block", "cut", "view"), list(itertools.product(BLOCKS, ("none", "inside", "after"), (False, True)))
)
def test_calls_in_changing_modes_match_eager(block, cut, view, backend):
    # A compile left the mode its graph ended in set, so the GLOBAL_STATE guard recorded it: calls in grad mode
    # got the graph compiled under no_grad (48 of this sweep's wider form differed from eager).
    for sequence in SEQUENCES:
        compiler.reset()
        fn = _program(block, cut, view)
        compiled = compiler.compile(fn, backend=backend)
        for mode in sequence:
            torch.testing.assert_close(_run(compiled, mode), _run(fn, mode), msg=lambda m: f"{sequence} {mode}: {m}")


def _raises_in_a_block(block: str) -> Any:
    def fn(x, index):
        y = x * 2
        with BLOCKS[block]():
            z = torch.index_select(y, 0, index)  # out of range on the second call: raises inside the graph
        return z + 1

    return fn


def _python_backend(gm, example_inputs):
    return gm.forward  # (a third-party backend's simplest form: the graph's nodes run as Python)


@pytest.mark.parametrize("backend", ["eager", _python_backend, "aot_eager", "inductor"])
@pytest.mark.parametrize(("block", "mode"), [("enable_grad", "no_grad"), ("no_grad", "grad")])
def test_a_graph_raising_inside_a_mode_block_leaves_the_callers_mode(block, mode, backend):
    # A backend running the graph as Python stopped at the raising op with the block's mode set: the caller's
    # code after the exception ran in it.
    compiler.reset()
    fn = _raises_in_a_block(block)
    compiled = compiler.compile(fn, backend=backend)
    for run in (fn, compiled):
        x = torch.ones(3, requires_grad=True)
        with AMBIENT[mode]():
            run(x, torch.tensor([0, 1]))
            with pytest.raises(IndexError):
                run(x, torch.tensor([5]))
            assert torch.is_grad_enabled() is (mode == "grad")
