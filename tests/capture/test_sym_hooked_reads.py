"""An object whose class reads attributes with a Python ``__getattribute__`` (transformers' configs map aliases
that way): the trace runs the hook inlined, so compiling, the guards and the transformed code never run it
themselves. Each test counts the hook's calls eagerly and compiled, over several calls, and compares results."""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


@pytest.fixture
def compile_counted():
    capture.reset()
    counter = CompileCounter()

    def make(fn):
        return capture.optimize(counter)(fn), counter

    return make


def _logging_class(log, base=object):
    class Logged(base):
        def __getattribute__(self, name):
            log.append(name)
            return super().__getattribute__(name)

    return Logged


def _calls(fn, log, *args):
    """``fn(*args)`` and the names the hook was asked for during the call."""
    log.clear()
    result = fn(*args)
    return result, list(log)


def test_reads_through_a_logging_getattribute_run_it_as_often_as_eager(compile_counted):
    log = []
    cfg = _logging_class(log)()
    cfg.flag, cfg.scale, cfg.w = True, 2.0, torch.arange(3.0)

    def f(x):
        if cfg.flag:
            return x * cfg.scale + cfg.w
        return x

    g, counter = compile_counted(f)
    x = torch.ones(3)
    expected = _calls(f, log, x)
    for _ in range(3):
        result, names = _calls(g, log, x)
        assert torch.equal(result, expected[0]) and names == expected[1] == ["flag", "scale", "w"]
    # (the hook's log is a list the trace writes: guarded, and the same at every call)
    assert counter.frame_count == 1


def test_a_getattribute_that_changes_what_it_reads_is_guarded_on_what_object_read(compile_counted):
    # The trace read the plain value (3) through object.__getattribute__ inside the hook; a guard reading `cfg.k`
    # through the hook (6) failed at every call, and every call compiled again.
    class Doubling:
        def __getattribute__(self, name):
            value = object.__getattribute__(self, name)
            return value * 2 if name == "k" else value

    cfg = Doubling()
    cfg.k = 3

    def f(x):
        return x + cfg.k

    g, counter = compile_counted(f)
    x = torch.zeros(2)
    for _ in range(3):
        assert torch.equal(g(x), f(x))
    assert counter.frame_count == 1
    cfg.k = 5
    assert torch.equal(g(x), f(x)) and counter.frame_count == 2


@pytest.mark.parametrize("change", ["attribute", "class_attribute", "hook", "type"])
def test_what_the_hooked_read_depended_on_is_guarded(compile_counted, change):
    log = []
    Logged = _logging_class(log)
    cfg = Logged()
    cfg.scale = 2.0

    def f(x):
        return x * cfg.scale + getattr(cfg, "bias", 0.0)

    g, counter = compile_counted(f)
    x = torch.ones(2)
    assert torch.equal(_calls(g, log, x)[0], _calls(f, log, x)[0])
    if change == "attribute":
        cfg.scale = 3.0
    elif change == "class_attribute":
        Logged.bias = 1.5
    elif change == "hook":
        Logged.__getattribute__ = lambda self, name: 4.0 if name == "scale" else object.__getattribute__(self, name)
    else:
        cfg.__class__ = _logging_class(log)
        cfg.scale = 2.0
    result, names = _calls(g, log, x)
    expected, expected_names = _calls(f, log, x)
    assert torch.equal(result, expected) and names == expected_names
    assert counter.frame_count == 2


def test_a_module_with_a_python_getattribute_runs_in_python(compile_counted):
    # Its guards would read its parameters, submodules and `training` through the hook at every call.
    log = []

    class Scaled(_logging_class(log, torch.nn.Module)):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x) * 2

    module = Scaled()

    def f(x):
        return module(x) + 1

    g, _ = compile_counted(f)
    x = torch.randn(2, 3)
    with capture.observe() as seen:
        for _ in range(2):
            result, names = _calls(g, log, x)
            expected, expected_names = _calls(f, log, x)
            assert torch.equal(result, expected) and names == expected_names
    reasons = [b.reason for b in seen.graph_breaks]
    assert any("a Module subclass with a Python __getattribute__, is not traced" in r for r in reasons), reasons


def test_a_tensor_subclass_with_a_python_getattribute_runs_in_python(compile_counted):
    log = []

    class Noted(torch.Tensor):
        def __getattribute__(self, name):
            log.append(name)
            return super().__getattribute__(name)

    def f(x):
        return x + 1

    g, counter = compile_counted(f)
    for _ in range(2):
        result, names = _calls(g, log, torch.ones(2).as_subclass(Noted))
        expected, expected_names = _calls(f, log, torch.ones(2).as_subclass(Noted))
        assert torch.equal(result, expected) and type(result) is type(expected) and names == expected_names
    assert counter.frame_count == 0


def test_a_python_descriptor_runs_only_where_eager_runs_it(compile_counted):
    # Its __get__ ran once more at every guard check reading the class member (`type(h).d`) to guard its type.
    log = []

    class Logged:
        def __get__(self, obj, cls):
            log.append("get")
            return 3 if obj is not None else self

        def __set__(self, obj, value):
            log.append(("set", value))

    class Holder:
        d = Logged()

    holder = Holder()

    def f(x):
        holder.d = x.shape[0]
        return x + holder.d

    g, _ = compile_counted(f)
    for n in (3, 5, 6, 5):
        x = torch.ones(n)
        result, names = _calls(g, log, x)
        expected, expected_names = _calls(f, log, x)
        assert torch.equal(result, expected) and names == expected_names == [("set", n), "get"]
