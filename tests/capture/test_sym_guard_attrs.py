"""Every attribute fact a trace reads is guarded: absences (getattr defaults, hasattr False), class members an
instance attribute could shadow, and Python attributes of tensors."""

from __future__ import annotations

import types

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


@pytest.fixture
def compile_counted():
    capture.reset()
    counter = CompileCounter()

    def make(fn, **options):
        return capture.optimize(counter, **options)(fn), counter

    return make


def test_getattr_default_on_an_object_lacking_it(compile_counted):
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        if getattr(cfg, "just_add_7", False):
            return x + 7
        return x - 1

    g, counter = compile_counted(f)
    x = torch.ones(2)
    assert torch.equal(g(x), f(x))
    cfg.just_add_7 = True
    assert torch.equal(g(x), f(x)) and counter.frame_count == 2
    del cfg.just_add_7
    assert torch.equal(g(x), f(x)) and counter.frame_count == 2  # the first entry serves again


def test_getattr_default_when_the_class_gains_the_attribute(compile_counted):
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x * getattr(cfg, "scale", 2)

    g, _ = compile_counted(f)
    x = torch.ones(2)
    g(x)
    Cfg.scale = 5
    assert torch.equal(g(x), f(x))


def test_hasattr_false_on_an_object_made_while_tracing_of_a_guarded_class(compile_counted):
    class Box:
        pass

    def f(x):
        return x + 1 if hasattr(Box(), "extra") else x - 1

    g, _ = compile_counted(f)
    x = torch.ones(2)
    g(x)
    Box.extra = 1
    assert torch.equal(g(x), f(x))


def test_getattr_default_on_a_module_and_a_python_module(compile_counted):
    lin = torch.nn.Linear(2, 2)
    namespace = types.ModuleType("namespace")

    def f(x):
        y = lin(x)
        if getattr(lin, "scale_output", None) is not None:
            y = y * lin.scale_output
        return y + getattr(namespace, "OFFSET", 0)

    g, _ = compile_counted(f)
    x = torch.ones(2)
    torch.testing.assert_close(g(x), f(x))
    lin.scale_output = 3.0
    torch.testing.assert_close(g(x), f(x))
    namespace.OFFSET = 10
    torch.testing.assert_close(g(x), f(x))


def test_getattr_default_on_none_and_constants(compile_counted):
    def f(x, opt):
        return x + getattr(opt, "bias", 3) + getattr(1.5, "imag", 7)

    g, counter = compile_counted(f, fullgraph=True)
    x = torch.ones(2)
    assert torch.equal(g(x, None), f(x, None))
    assert counter.frame_count == 1


def test_hasattr_on_a_tensor_reads_its_python_attributes(compile_counted):
    def f(x):
        if hasattr(x, "test"):
            return x + 1
        return x - 1

    g, counter = compile_counted(f)
    assert torch.equal(g(torch.ones(2)), f(torch.ones(2)))
    y = torch.ones(2)
    y.test = None
    assert torch.equal(g(y), f(y)) and counter.frame_count == 2


def test_python_attribute_of_a_tensor_is_read_and_guarded(compile_counted):
    def f(x):
        return x * getattr(x, "scale", 1)

    g, _ = compile_counted(f)
    g(torch.ones(2))
    y = torch.ones(2)
    y.scale = 5
    assert torch.equal(g(y), f(y))
    y.scale = 7
    assert torch.equal(g(y), f(y))


def test_instance_attribute_shadowing_a_method_recompiles(compile_counted):
    class Scaler:
        def factor(self):
            return 2

    s = Scaler()

    def f(x):
        return x * s.factor()

    g, _ = compile_counted(f)
    x = torch.ones(2)
    g(x)
    s.factor = lambda: 3
    assert torch.equal(g(x), f(x))


def test_module_forward_replaced_on_the_instance_is_called(compile_counted):
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    g, _ = compile_counted(f)
    x = torch.ones(2)
    g(x)
    lin.forward = lambda v: v * 100
    assert torch.equal(g(x), f(x))


def test_vars_of_an_object_is_its_guarded_dict(compile_counted):
    # vars() was a graph break (transformers' code reaches importlib.metadata's `vars(self).update(kwargs)`).
    class Cfg:
        def __init__(self):
            self.scale = 2

    cfg = Cfg()

    def f(x):
        fields = vars(cfg)
        return x * fields["scale"] + len(fields)

    def g(x):
        try:
            vars(3)
        except TypeError as exc:
            return x - len(str(exc))

    with capture.observe() as seen:
        compiled, _ = compile_counted(f)
        x = torch.ones(2)
        assert torch.equal(compiled(x), f(x))
        cfg.scale = 5
        assert torch.equal(compiled(x), f(x))
        cfg.extra = 1
        assert torch.equal(compiled(x), f(x))
        assert torch.equal(compile_counted(g)[0](x), g(x))
    assert not [b for frame in seen.frames for b in frame.graph_breaks]


class _Mapped:
    """A class whose Python ``__getattribute__`` maps aliases to attribute names first, as transformers' configs."""

    aliases = {"width": "hidden_size"}

    def __getattribute__(self, key):
        if key != "aliases" and key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        return super().__getattribute__(key)


@pytest.mark.parametrize(
    "where", ["instance", "class", "through_an_alias", "alias_added", "getattr_added", "getattribute_replaced"]
)
def test_an_absence_behind_a_python_getattribute_is_guarded_where_object_looked(compile_counted, where):
    # The absence is guarded as what object.__getattribute__ looked at (the instance dict, the class), not by
    # hasattr of the object, which ran the Python __getattribute__ again at every call; each way the attribute
    # can appear must still be seen.
    class Cfg(_Mapped):
        aliases = {"width": "hidden_size"}

    cfg = Cfg()

    def f(x):
        return x * getattr(cfg, "width", 2) + getattr(cfg, "depth", 0)

    g, counter = compile_counted(f)
    x = torch.ones(2)
    with capture.observe() as seen:
        assert torch.equal(g(x), f(x))
    listed = [str(guard) for record in seen.frames for guard in (record.guards or ())]
    assert [text for text in listed if text.endswith("HASATTR") and "type(cfg)" not in text] == []
    assert any(text.endswith("DICT_CONTAINS") and "__dict__" in text for text in listed)
    if where == "instance":
        cfg.depth = 3
    elif where == "class":
        Cfg.depth = 4
    elif where == "through_an_alias":
        cfg.hidden_size = 5
    elif where == "alias_added":
        Cfg.aliases = {"width": "hidden_size", "depth": "hidden_size"}
        cfg.hidden_size = 6
    elif where == "getattr_added":
        Cfg.__getattr__ = lambda self, name: 7
    else:
        Cfg.__getattribute__ = lambda self, name: (
            8 if name in ("width", "depth") else object.__getattribute__(self, name)
        )
    assert torch.equal(g(x), f(x)) and counter.frame_count == 2


@pytest.mark.parametrize("change", ["getattr_added", "getattribute_added"])
def test_an_absence_on_a_plain_object_sees_the_class_gain_an_attribute_hook(compile_counted, change):
    class Plain:
        pass

    obj = Plain()

    def f(x):
        return x + getattr(obj, "depth", 0)

    g, counter = compile_counted(f)
    x = torch.ones(2)
    assert torch.equal(g(x), f(x))
    if change == "getattr_added":
        Plain.__getattr__ = lambda self, name: 7
    else:
        Plain.__getattribute__ = lambda self, name: 9
    assert torch.equal(g(x), f(x)) and counter.frame_count == 2


def test_an_absence_on_an_object_with_a_getattr_keeps_the_hasattr_guard(compile_counted):
    class Lazy:
        def __getattr__(self, name):
            if name == "ready":
                return self.__dict__.get("_ready", False)
            raise AttributeError(name)

    lazy = Lazy()

    def f(x):
        return x + 1 if getattr(lazy, "ready", False) else x - 1

    g, _ = compile_counted(f)
    x = torch.ones(2)
    assert torch.equal(g(x), f(x))
    lazy._ready = True
    assert torch.equal(g(x), f(x))


class _Logged:
    """An object whose Python ``__getattr__`` logs each name it is asked for and looks it up in a dict, raising
    ``KeyError`` (not AttributeError) for a name it does not hold."""

    def __init__(self, log):
        self.log, self.table = log, {"k": 3}

    def __getattr__(self, name):
        self.log.append(name)
        return self.table[name]


def test_a_python_getattr_runs_as_often_as_in_eager(compile_counted):
    eager_log, compiled_log = [], []
    eager_obj, compiled_obj = _Logged(eager_log), _Logged(compiled_log)

    def make(obj):
        def f(x):
            return x * obj.k

        return f

    f, (g, _) = make(eager_obj), compile_counted(make(compiled_obj))
    x = torch.ones(2)
    # (the guards checked the absence of `k` with hasattr, running the hook once more per call; the log's
    # length is guarded, so each call compiles again)
    for _ in range(3):
        assert torch.equal(g(x), f(x))
    assert compiled_log == eager_log == ["k"] * 3
    compiled_obj.k = eager_obj.k = 5  # the instance now holds `k`: the hook is no longer asked
    assert torch.equal(g(x), f(x)) and compiled_log == eager_log


def test_a_python_getattr_replaced_on_the_class_recompiles(compile_counted):
    class Lazy:
        def __getattr__(self, name):
            return 2

    lazy = Lazy()

    def f(x):
        return x * lazy.width

    g, counter = compile_counted(f)
    x = torch.ones(2)
    assert torch.equal(g(x), f(x))
    Lazy.__getattr__ = lambda self, name: 3
    assert torch.equal(g(x), f(x)) and counter.frame_count == 2


def test_a_getattr_raising_key_error_is_not_asked_what_the_object_is(compile_counted):
    # (asking `getattr(obj, "__name__", None)` of every value ran the hook, whose KeyError failed the compile)
    log = []
    obj = _Logged(log)

    def f(x, table=obj):
        return x + table.k

    g, counter = compile_counted(f)
    assert torch.equal(g(torch.ones(2)), torch.full((2,), 4.0)) and counter.frame_count == 1
    assert log == ["k"]


@pytest.mark.parametrize("added", ["buffer", "parameter", "submodule"])
def test_an_absence_on_a_module_sees_a_buffer_parameter_or_submodule_registered_later(compile_counted, added):
    # (a module's __getattr__ answers from its registries, which only hasattr of the module sees)
    m = torch.nn.Linear(2, 2)

    def f(x):
        extra = getattr(m, "extra", None)
        return x + 1 if extra is None else x + 2

    g, counter = compile_counted(f)
    x = torch.ones(2)
    assert torch.equal(g(x), f(x))
    if added == "buffer":
        m.register_buffer("extra", torch.zeros(2))
    elif added == "parameter":
        m.register_parameter("extra", torch.nn.Parameter(torch.zeros(2)))
    else:
        m.add_module("extra", torch.nn.ReLU())
    assert torch.equal(g(x), f(x)) and counter.frame_count == 2


@pytest.mark.parametrize("dynamic", [None, True])
def test_where_a_tensor_lies_in_memory_is_read_from_the_real_tensor(compile_counted, dynamic):
    """``storage_offset()`` and ``_is_view()``: a fake with symbolic sizes is a dense tensor of its own, and a tensor
    the graph computes inherits both from its inputs, which no guard covers: the second is a graph break."""

    def f(x):
        y = x[1:]
        return x * x.storage_offset() + int(x._is_view()), y * y.storage_offset()

    g, _ = compile_counted(f, dynamic=dynamic)
    with capture.observe() as seen:
        for n in (5, 6, 7):
            base = torch.arange(2.0 * n)
            for x in (base[n:], base[:n], base[n:].clone()):
                torch.testing.assert_close(g(x), f(x))
    reasons = {b.reason for frame in seen.frames for b in frame.graph_breaks}
    assert reasons == {"Tensor.storage_offset() of a tensor the graph computes depends on how its inputs lie in memory"}
