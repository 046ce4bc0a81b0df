"""Tensor subclasses with their own ``__torch_function__`` against eager, on the default backend and ``aot_eager``.

A subclass's ``__torch_function__`` runs Python code on every op and makes the results instances of the subclass.
Traced, both were lost: the compiled results were plain tensors, ``isinstance(x, Sub)`` was False, and tracing
ran the user's code on metadata reads. Such an argument is not traced: the frame runs in Python (a graph break
naming the subclass), guarded by the argument's type, so plain tensors are still compiled; ``nn.Parameter``,
whose ops run no Python code, is traced.
"""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")

CALLS: list[str] = []


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        CALLS.append(getattr(func, "__name__", "?"))
        return super().__torch_function__(func, types, args, kwargs or {})


class Plain(torch.Tensor):
    pass


class MyParameter(torch.nn.Parameter):
    pass


def scaled(x):
    return x * (2 if isinstance(x, Logged) else 5) + 1, type(x).__name__


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("cls", [Logged, Plain])
def test_a_tensor_subclass_argument_runs_as_in_eager(backend, cls):
    CALLS.clear()
    expected = scaled(torch.arange(3.0).as_subclass(cls))
    eager_calls = list(CALLS)
    CALLS.clear()
    compiled = compiler.compile(scaled, backend=backend)
    with capture.observe() as seen:
        actual = compiled(torch.arange(3.0).as_subclass(cls))
    assert type(actual[0]) is type(expected[0]) is cls
    torch.testing.assert_close(actual[0].as_subclass(torch.Tensor), expected[0].as_subclass(torch.Tensor))
    assert actual[1] == expected[1]
    assert CALLS == eager_calls  # the user's __torch_function__ ran as in eager, never for tracing
    reasons = [b.reason for f in seen.frames for b in f.graph_breaks]
    assert reasons == [
        f"a {cls.__qualname__}, a tensor subclass whose __torch_function__ runs on every op, is not traced "
        "(its results are of the subclass, and its code may change what an op does)"
    ]
    with capture.observe() as seen:  # a plain tensor is traced: the entry above is guarded by the type
        plain = compiled(torch.arange(3.0))
    assert [f.kind for f in seen.frames] == ["compiled"] and seen.frames[0].graph_breaks == ()
    assert type(plain[0]) is torch.Tensor and plain[1] == "Tensor"


def test_a_parameter_subclass_is_still_traced():
    def fn(x):
        return x * 2 + 1

    compiled = compiler.compile(fn, fullgraph=True)
    actual = compiled(MyParameter(torch.arange(3.0)))
    assert type(actual) is torch.Tensor
    torch.testing.assert_close(actual, fn(MyParameter(torch.arange(3.0))))


class _WithSubclassedWeight(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = MyParameter(torch.ones(3))

    def forward(self, x):
        quantized = isinstance(self.weight, MyParameter)  # (as libraries test their own parameter classes)
        return x * (3 if quantized else 2), type(self.weight).__name__, isinstance(x, MyParameter)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_the_class_of_a_parameter_subclass_is_its_own_in_the_trace(backend):
    # A traced Parameter subclass was read as nn.Parameter: isinstance with its own class was False, so a branch
    # on it took the other way.
    module, x = _WithSubclassedWeight(), torch.arange(3.0)
    compiled = compiler.compile(module, backend=backend, fullgraph=True)
    expected, actual = module(x), compiled(x)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1:] == expected[1:] == ("MyParameter", False)
    as_argument = compiler.compile(lambda p: (p * 2, type(p).__name__), backend=backend, fullgraph=True)
    assert as_argument(MyParameter(torch.ones(2)))[1] == "MyParameter"
