"""Compiled calls release memory exactly as eager calls do: no argument, intermediate, output or module kept."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import dynajit.capture as capture


def run_graph(gm, example_inputs):
    return gm.forward


def _dead(ref: weakref.ref) -> bool:
    gc.collect()
    return ref() is None


def test_arguments_are_released_after_the_call():
    compiled = capture.optimize(run_graph)(lambda x: x * 2 + 1)
    x = torch.randn(4)
    compiled(x)
    compiled(x)
    ref = weakref.ref(x)
    del x
    assert _dead(ref)


def test_outputs_and_intermediates_across_a_graph_break_are_released():
    kept = []

    def f(x):
        y = x * 2
        kept.append(weakref.ref(y))  # a graph break: y is the real intermediate handed to the resume function
        return y + 1

    compiled = capture.optimize(run_graph)(f)
    x = torch.randn(4, requires_grad=True)
    out = compiled(x)
    out = compiled(x)
    assert len(kept) == 2
    assert all(_dead(ref) for ref in kept)
    ref = weakref.ref(out)
    del out
    assert _dead(ref)


def test_observed_records_do_not_hold_the_arguments():
    compiled = capture.optimize(run_graph)(lambda x: x.cos() + 1)
    x = torch.randn(5)
    with capture.observe() as seen:
        compiled(x)
    (graph,) = seen.graphs
    ref = weakref.ref(x)
    del x
    assert _dead(ref)
    assert [tuple(example.shape) for example in graph.example_inputs] == [(5,)]  # described, not kept


def test_recompiles_release_the_arguments_that_caused_them():
    compiled = capture.optimize(run_graph, dynamic=False)(lambda x: x + 1)
    first, second = torch.randn(3), torch.randn(5)
    compiled(first)
    compiled(second)
    refs = [weakref.ref(first), weakref.ref(second)]
    del first, second
    assert all(_dead(ref) for ref in refs)


@pytest.mark.parametrize("how", ["method", "argument"])
def test_a_module_the_user_deletes_is_released_with_its_parameters(how):
    def use(x, module):
        return module(x).relu()

    module = torch.nn.Linear(4, 4)
    if how == "method":
        compiled = capture.optimize(run_graph)(module)
        compiled(torch.randn(2, 4))
        compiled(torch.randn(2, 4))
    else:
        compiled = capture.optimize(run_graph)(use)
        compiled(torch.randn(2, 4), module)
    refs = [weakref.ref(module), weakref.ref(module.weight), weakref.ref(module.bias)]
    if how == "argument":
        assert capture._cache.cache_for(use.__code__).entries
    del module
    if how == "method":
        del compiled  # the bound compiled forward holds its module, as a bound method does
    assert all(_dead(ref) for ref in refs)
    if how == "argument":
        assert not capture._cache.cache_for(use.__code__).entries  # the entry went with the module


def test_an_entry_guarding_a_live_module_still_runs_and_a_new_module_recompiles():
    counter = []

    def backend(gm, example_inputs):
        counter.append(gm)
        return gm.forward

    def use(x, module):
        return module(x)

    compiled = capture.optimize(backend)(use)
    x = torch.randn(2, 4)
    first = torch.nn.Linear(4, 4)
    torch.testing.assert_close(compiled(x, first), first(x))
    torch.testing.assert_close(compiled(x, first), first(x))
    assert len(counter) == 1
    second = torch.nn.Linear(4, 4)
    torch.testing.assert_close(compiled(x, second), second(x))
    assert len(counter) == 2
    assert len(capture._cache.cache_for(use.__code__).entries) == 2
    del first
    gc.collect()
    assert len(capture._cache.cache_for(use.__code__).entries) == 1  # only the dead module's entry went
    torch.testing.assert_close(compiled(x, second), second(x))  # the live module's entry is unaffected
    assert len(counter) == 2


def _drop_after_a_break(x, holder):
    t = holder.pop()
    capture.graph_break()
    return x + t


@pytest.mark.parametrize("call", [0, 1])
def test_a_tensor_the_frame_drops_is_freed_when_eager_frees_it_even_on_the_compiling_call(call):
    """The first call traces the frame (and, at the break, the resume function) with the real arguments:
    tracing's own reference cycles must not keep them alive past the call, which eager frees at once (no
    garbage collection runs here)."""
    compiled = capture.optimize(run_graph)(_drop_after_a_break)
    x = torch.randn(3)
    if call:
        compiled(x, [torch.randn(3)])
    t = torch.randn(3)
    expected, ref, holder = x + t, weakref.ref(t), [t]
    del t
    gc.disable()
    try:
        torch.testing.assert_close(compiled(x, holder), expected)
        assert ref() is None
    finally:
        gc.enable()
