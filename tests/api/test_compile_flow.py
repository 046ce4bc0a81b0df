"""``compile`` on functions, methods and modules, as a call and as a decorator, eager vs compiled."""

from __future__ import annotations

import torch

from dynajit import _dynamo, compiler
from dynajit.capture.testing import CompileCounter


def f(x, y):
    return torch.sin(x) * y + 1


def test_compile_as_a_call():
    counter = CompileCounter()
    compiled = compiler.compile(f, backend=counter)
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), f(x, y))
    assert counter.frame_count == 1


def test_compile_as_a_decorator_without_and_with_arguments():
    counter = CompileCounter()

    @compiler.compile
    def bare(x):
        return x.cos() - 1

    @compiler.compile()
    def empty_call(x):
        return x.cos() - 2

    @compiler.compile(backend=counter, fullgraph=True)
    def with_args(x):
        return x.cos() - 3

    x = torch.randn(4)
    torch.testing.assert_close(bare(x), x.cos() - 1)
    torch.testing.assert_close(empty_call(x), x.cos() - 2)
    torch.testing.assert_close(with_args(x), x.cos() - 3)
    assert counter.frame_count == 1


def test_compile_a_bound_method():
    class Scaler:
        def __init__(self):
            self.factor = 3.0

        def apply(self, x):
            return x * self.factor + torch.tanh(x)

    scaler = Scaler()
    counter = CompileCounter()
    compiled = compiler.compile(scaler.apply, backend=counter)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), scaler.apply(x))
    assert counter.frame_count == 1


def test_compile_with_a_backend_name_and_the_inductor_default():
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiler.compile(f, backend="eager")(x, y), f(x, y))
    torch.testing.assert_close(compiler.compile(f, backend="aot_eager")(x, y), f(x, y))
    torch.testing.assert_close(compiler.compile(f)(x, y), f(x, y))


def test_private_optimize_and_optimize_assert():
    counter = CompileCounter()
    x, y = torch.randn(2), torch.randn(2)
    torch.testing.assert_close(_dynamo.optimize(counter)(f)(x, y), f(x, y))
    torch.testing.assert_close(_dynamo.optimize_assert("eager")(f)(x, y), f(x, y))
    assert isinstance(_dynamo.optimize("eager")(torch.nn.Linear(2, 2)), _dynamo.OptimizedModule)


def test_compile_decorating_a_method_in_a_class_body():
    counter = CompileCounter()

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)

        @compiler.compile(backend=counter)
        def forward(self, x):
            return self.linear(x).relu()

    head = Head()
    x = torch.randn(3, 2)
    torch.testing.assert_close(head(x), head.linear(x).relu())
    assert counter.frame_count == 1


class _Scaled(torch.nn.Module):
    def forward(self, x, scale=2.0):
        return x * scale


def test_bad_calls_raise_the_eager_type_error():
    module = _Scaled()
    cases = [
        (f, compiler.compile(f, backend="eager")),
        (module, compiler.compile(module, backend="eager")),
        (module.forward, compiler.compile(module.forward, backend="eager")),
    ]
    calls = [((), {}), ((1, 2, 3), {}), ((1,), {"x": 2}), ((1,), {"z": 2})]
    for eager, compiled in cases:
        for args, kwargs in calls:
            messages = []
            for fn in (eager, compiled):
                try:
                    fn(*args, **kwargs)
                    messages.append(None)
                except TypeError as error:
                    messages.append(str(error))
            assert messages[0] is not None and messages[1] == messages[0], (eager, args, kwargs)


class Scale:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor + 1


def test_builtins_partials_and_callable_objects_compile_like_functions():
    import functools

    x = torch.randn(5)
    for target in (torch.sin, torch.Tensor.relu, functools.partial(torch.clamp, min=-0.5), Scale(3.0)):
        counter = CompileCounter()
        compiled = compiler.compile(target, backend=counter, fullgraph=True)
        torch.testing.assert_close(compiled(x), target(x))
        assert counter.frame_count == 1, target
    import inspect

    assert inspect.unwrap(compiler.compile(torch.sin)) is torch.sin
    assert compiler.compile(torch.sin).__name__ == "sin"
