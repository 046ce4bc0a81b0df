"""Descriptors and attribute hooks of user classes, traced as Python defines them: properties and descriptors
with Python ``__get__``/``__set__`` (``hasattr`` and ``getattr`` with a default run the getter and see its
AttributeError), and classes with a Python ``__setattr__`` (config objects) whose writes replay after the graph
exactly once. Differential, one graph each (fullgraph)."""

from __future__ import annotations

import functools

import pytest
import torch

import dynajit.capture as capture


class Cache:
    def __init__(self, n):
        self.layers = list(range(n))

    @property
    def is_sliding(self):
        return [layer % 2 == 0 for layer in self.layers]

    @property
    def broken(self):
        raise AttributeError("not here")

    @property
    def fails(self):
        raise ValueError("boom")


def test_hasattr_on_a_property_of_a_new_object_runs_its_getter(check):
    def fn(x):
        cache = Cache(3)
        if hasattr(cache, "is_sliding") and True in cache.is_sliding:
            x = x + cache.is_sliding.index(True) + 1
        if hasattr(cache, "broken"):
            x = x * 100
        return x * 2

    counter = check(fn, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


def test_hasattr_and_getattr_default_on_a_property_of_a_frame_object(check):
    def fn(x, cache):
        if hasattr(cache, "is_sliding") and not hasattr(cache, "broken"):
            x = x + len(cache.is_sliding)
        return x + getattr(cache, "broken", 5)

    counter = check(fn, torch.randn(3), Cache(4), fullgraph=True)
    assert counter.frame_count == 1


def test_a_getter_raising_another_error_propagates(check):
    def fn(x, cache):
        x = x + 1
        return x, hasattr(cache, "fails")

    check(fn, torch.randn(3), Cache(2))


class Doubled:
    """A data descriptor written in Python: stores twice the value under another name."""

    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return getattr(obj, self.name) * 2

    def __set__(self, obj, value):
        setattr(obj, self.name, value)


class Lazy:
    """A non-data descriptor written in Python."""

    def __get__(self, obj, owner=None):
        return 7 if obj is None else obj.base + 1


class WithDescriptors:
    size = Doubled()
    extra = Lazy()

    def __init__(self, size, base):
        self.size = size
        self.base = base


def test_python_descriptors_of_a_frame_object(check):
    def fn(x, obj):
        obj.size = obj.size + 1  # __get__ then __set__, both traced; the write replays after the graph
        return x * obj.size + obj.extra

    counter = check(fn, torch.randn(3), WithDescriptors(2, 5), fullgraph=True)
    assert counter.frame_count == 1


def test_python_descriptors_of_a_new_object(check):
    def fn(x):
        obj = WithDescriptors(3, 1)
        return x * obj.size + obj.extra + WithDescriptors.extra

    counter = check(fn, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


class Settable:
    def __init__(self):
        self._v = 1

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value * 10


def test_a_property_setter_of_a_frame_object(check):
    def fn(x, obj):
        obj.v = 3
        return x + obj.v

    counter = check(fn, torch.randn(3), Settable(), fullgraph=True)
    assert counter.frame_count == 1


class Config:
    """Like transformers' configs: a Python __setattr__/__getattribute__ mapping attribute aliases."""

    attribute_map = {"num_hidden_layers": "num_layers"}

    def __init__(self):
        object.__setattr__(self, "writes", 0)
        self.num_layers = 2

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        if key != "writes":
            object.__setattr__(self, "writes", self.writes + 1)
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_a_python_setattr_of_a_frame_object_replays_its_writes_once(check):
    def fn(x, config):
        config.num_hidden_layers = config.num_hidden_layers + 3
        return x * config.num_layers, config.writes

    counter = check(fn, torch.randn(3), Config(), fullgraph=True)
    assert counter.frame_count == 1


def test_a_python_setattr_of_a_new_object(check):
    def fn(x):
        config = Config()
        config.num_hidden_layers = 5
        return x * config.num_layers, config.writes

    counter = check(fn, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


class Fallback:
    def __init__(self):
        self.real = 3

    def __getattr__(self, name):
        if name.startswith("alias_"):
            return getattr(self, name[len("alias_") :])
        raise AttributeError(name)


def test_a_python_getattr_is_called_when_the_read_misses(check):
    def fn(x, obj):
        made = Fallback()
        found = (hasattr(obj, "nothing"), hasattr(made, "alias_real"), getattr(made, "nothing", 4))
        return x * obj.alias_real + made.alias_real, found

    counter = check(fn, torch.randn(3), Fallback(), fullgraph=True)
    assert counter.frame_count == 1


class Factory:
    scale = 3

    @classmethod
    def make(cls, v):
        return v * cls.scale

    @staticmethod
    def helper(v):
        return v + 1


class SubFactory(Factory):
    scale = 5

    @classmethod
    def make(cls, v):
        return super().make(v) + super().helper(v) + super(SubFactory, cls).scale  # noqa: UP008


def test_super_in_a_class_method(check):
    counter = check(lambda x: SubFactory.make(x), torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


class Lazy:
    def __init__(self):
        self.calls = 0

    @functools.cached_property
    def scale(self):
        self.calls += 1
        return 3 + self.calls


def _cached_property_reads(x, obj):
    return x * obj.scale + obj.scale, obj.calls


@pytest.mark.parametrize("cached", [False, True])
def test_a_cached_property_runs_its_function_once_and_stores_its_value(cached):
    # (Python 3.11's cached_property holds a lock while it computes, which guards threads, not the value.)
    from dynajit.capture.testing import CompileCounter

    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(_cached_property_reads)
    states = []
    for f in (_cached_property_reads, compiled):
        obj, x = Lazy(), torch.arange(3.0)
        if cached:
            obj.scale
        result = f(x, obj)
        states.append((result[0], result[1], dict(vars(obj))))
    torch.testing.assert_close(states[1][0], states[0][0])
    assert states[1][1:] == states[0][1:]
    assert counter.frame_count == 1


def test_a_cached_property_of_a_new_object(check):
    def fn(x):
        obj = Lazy()
        return x + obj.scale * 10 + obj.scale, obj.calls

    counter = check(fn, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1

    @functools.cached_property
    def scale(self):
        return 5


def _slotted_scale(x, obj):
    return x + obj.scale


def test_a_cached_property_without_an_instance_dict_raises_as_in_eager():
    from dynajit.capture.testing import CompileCounter

    capture.reset()
    compiled = capture.optimize(CompileCounter())(_slotted_scale)
    with pytest.raises(TypeError) as eager:
        _slotted_scale(torch.ones(1), Slotted())
    with pytest.raises(TypeError) as traced:
        compiled(torch.ones(1), Slotted())
    assert str(traced.value) == str(eager.value)
