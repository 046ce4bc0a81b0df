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
