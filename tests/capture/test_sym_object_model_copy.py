"""``copy.deepcopy``/``copy.copy`` of user objects traced through ``copy``'s own Python code: ``id()`` of
objects made while tracing (the memo's keys), ``object.__reduce_ex__``, ``object.__new__(cls)`` and the
identity of containers made while tracing. Differential, one graph each (fullgraph)."""

from __future__ import annotations

import copy

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


class Config:
    """Like transformers' configs: a Python __getattribute__/__setattr__ over aliases, nested plain data."""

    attribute_map = {"num_hidden_layers": "num_layers"}

    def __init__(self):
        self.num_layers = 2
        self.labels = {0: "a", 1: "b"}
        self.sizes = [1, 2]
        self.name = "cfg"

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_deepcopy_of_a_config_from_the_frame_then_written(check):
    def fn(x, config):
        copied = copy.deepcopy(config)
        copied.num_hidden_layers = 7
        copied.sizes.append(3)
        return x * copied.num_layers + len(copied.sizes), config.num_layers, copied

    counter = check(fn, torch.randn(3), Config(), fullgraph=True)
    assert counter.frame_count == 1


def test_the_copy_is_a_new_object_sharing_nothing_mutable():
    config = Config()

    def fn(x, config):
        copied = copy.deepcopy(config)
        return x + 1, copied

    _, copied = capture.optimize(CompileCounter(), fullgraph=True)(fn)(torch.ones(1), config)
    assert type(copied) is Config and copied is not config
    assert copied.labels == config.labels and copied.labels is not config.labels
    assert copied.sizes == config.sizes and copied.sizes is not config.sizes


def test_ids_made_while_tracing_compare_as_in_python(check):
    def fn(x):
        a, b = [x], {}
        ids = {id(a): "a", id(b): "b"}
        return x + 1, ids[id(a)], id(a) == id(b), id(a) == id(a)

    counter = check(fn, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


def test_an_id_made_while_tracing_never_leaves_the_graph():
    def fn(x):
        made = Config()
        return x + 1, id(made)

    with pytest.raises(Exception, match="id\\(\\) of an object made while tracing"):
        capture.optimize(CompileCounter(), fullgraph=True)(fn)(torch.ones(1))


def test_delattr_of_a_copy_then_a_renamed_write(check):
    def fn(x, config):
        copied = copy.deepcopy(config)
        value = getattr(copied, "name")
        delattr(copied, "name")
        setattr(copied, "title", value)
        return x + 1, hasattr(copied, "name"), copied

    counter = check(fn, torch.randn(3), Config(), fullgraph=True)
    assert counter.frame_count == 1


def test_del_statement_on_an_object_made_while_tracing(check):
    # `del obj.name` (DELETE_ATTR, as contextlib's __enter__ deletes its arguments) was a graph break whatever
    # the object; of one made while tracing it is part of the state the object is rebuilt with.
    def fn(x, config):
        copied = copy.deepcopy(config)
        del copied.name
        try:
            del copied.name
        except AttributeError:
            missing = True
        return x + 1, hasattr(copied, "name"), missing, copied

    counter = check(fn, torch.randn(3), Config(), fullgraph=True)
    assert counter.frame_count == 1


def test_deepcopy_of_a_copy_made_while_tracing(check):
    def fn(x, config):
        first = copy.deepcopy(config)
        first.num_hidden_layers = 4
        second = copy.deepcopy(first)
        second.sizes.append(9)
        return x * second.num_layers, first.sizes, second

    counter = check(fn, torch.randn(3), Config(), fullgraph=True)
    assert counter.frame_count == 1


def test_attributes_of_typing_objects(check):
    def fn(x, hint, alias):
        return x + len(hint.__args__) + len(alias.__args__), alias.__origin__ is list

    counter = check(fn, torch.randn(3), int | None, list[int], fullgraph=True)
    assert counter.frame_count == 1


def test_an_id_made_while_tracing_is_not_ordered_or_computed_with():
    def fn(x):
        items = [1, 2]
        made = {}
        return x + 1, [id(v) > 0 for v in items], id(made) % 7 == id(made) % 7

    expected = fn(torch.ones(1))
    actual = capture.optimize(CompileCounter())(fn)(torch.ones(1))
    assert actual[1:] == expected[1:]
