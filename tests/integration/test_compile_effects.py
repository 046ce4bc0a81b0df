"""Compiling has no effect the user can see: tracing and backend compiles run none of the user's hooks."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import dynajit.compiler


def _square_sin(x):
    return (x * x).sin()


def _run_with_hooks(fn, x):
    """Call ``fn(x)`` and its backward under saved-tensor hooks; return the (pack, unpack) calls."""
    calls = []

    def pack(tensor):
        calls.append(("pack", tuple(tensor.shape)))
        return tensor

    def unpack(tensor):
        calls.append(("unpack", tuple(tensor.shape)))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = fn(x)
    out.sum().backward()
    return calls


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_saved_tensor_hooks_run_on_the_first_compiled_call_as_on_every_later_one(backend):
    dynajit.compiler.reset()
    compiled = dynajit.compiler.compile(_square_sin, backend=backend)
    x = torch.randn(3, requires_grad=True)
    first = _run_with_hooks(compiled, x)
    second = _run_with_hooks(compiled, x)
    eager = _run_with_hooks(_square_sin, x)
    # Tracing (fake-tensor propagation, AOT autograd's joint graph) calls no hook: the first call, which
    # compiles, runs exactly the hooks of a call that does not.
    assert first == second
    if backend == "eager":
        assert first == eager  # the captured graph runs eager's own ops, saving what eager saves
    else:
        # AOT autograd's backward saves what its partition chose (a subset of eager's saves, never more)
        assert first and len(first) <= len(eager)


def test_tensor_hooks_fire_as_in_eager():
    compiled = dynajit.compiler.compile(_square_sin, backend="aot_eager")
    for fn in (compiled, _square_sin):
        x = torch.randn(3, requires_grad=True)
        seen = []
        x.register_hook(lambda grad: seen.append(grad.clone()))
        fn(x).sum().backward()
        assert len(seen) == 1


def _dead(ref):
    gc.collect()
    return ref() is None


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_memory_is_released_as_in_eager(backend):
    """Arguments, outputs and a deleted module (with its parameters) die as they would eagerly."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = dynajit.compiler.compile(model, backend=backend)
    x = torch.randn(2, 4, requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    out = compiled(x)
    refs = [weakref.ref(x), weakref.ref(out), weakref.ref(model), *(weakref.ref(p) for p in model.parameters())]
    del x, out, model, compiled
    assert all(_dead(ref) for ref in refs)


def _convolution_block():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU()).eval()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_compile_draws_nothing_from_the_global_generator(backend):
    # inductor-lite times a convolution's candidate layouts on random inputs: drawn from the global generator,
    # they changed every number the program drew after its first compiled call.
    dynajit.compiler.reset()
    model, x = _convolution_block(), torch.randn(2, 8, 16, 16)
    drawn = []
    for fn in (model, dynajit.compiler.compile(model, backend=backend)):
        torch.manual_seed(1)
        with torch.no_grad():
            out = fn(x)
        drawn.append((out, torch.randn(5)))
    torch.testing.assert_close(drawn[1], drawn[0], rtol=1e-4, atol=1e-4)


def test_the_layout_timings_inputs_come_from_a_generator_of_their_own():
    from dynajit.inductor_lite._autotune import example_tensor

    before = torch.random.get_rng_state()
    made = [example_tensor(torch.empty(4, 4, dtype=dtype)) for dtype in (torch.float32, torch.bool, torch.int64)]
    assert torch.equal(torch.random.get_rng_state(), before)
    assert made[0].std() > 0  # still random values, not zeros


def _grad_mode_block(x1, x2):
    with torch.enable_grad():
        v2 = x2.squeeze(-2)
    seen = torch.is_grad_enabled()
    print(end="")  # a graph break after the block: the first graph ends in the block's mode
    return v2 * 2, x1.clone() + 1, seen


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_graph_compiled_under_no_grad_is_not_reused_in_grad_mode(backend):
    # AOT autograd left the grad mode its graph ends in (the enable_grad block's) set after compiling, so the
    # entry's GLOBAL_STATE guard recorded grad mode on: the next call, in grad mode, reused the no_grad graph,
    # whose outputs did not require grad, and left grad mode off behind it.
    dynajit.compiler.reset()
    compiled = dynajit.compiler.compile(_grad_mode_block, backend=backend)
    for mode in (torch.no_grad, torch.enable_grad, torch.no_grad):
        results = []
        for fn in (_grad_mode_block, compiled):
            x1, x2 = (torch.randn(*shape, requires_grad=True).clone() for shape in ((1, 1), (2, 1)))
            with mode():
                out = fn(x1, x2)
                after = torch.is_grad_enabled()
            results.append((*(t.requires_grad for t in out[:2]), out[2], after))
        assert results[1] == results[0], mode.__name__
