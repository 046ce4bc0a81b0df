"""``id()``, iteration, ``len()`` and the truth value of user objects whose classes define them in Python
(like transformers' caches). ``id()`` of an object from the frame is a constant guarded by identity; one of an
object made while tracing is usable only inside the trace (a graph break when it would leave it). Differential."""

from __future__ import annotations

import collections

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


class Layers:
    def __init__(self, tensors):
        self.layers = list(tensors)

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        for layer in self.layers:
            yield layer, layer * 2


class Flagged(Layers):
    def __bool__(self):
        return len(self.layers) > 1


def test_iterating_a_frame_object_with_a_python_iter(check):
    def fn(x, cache):
        total = x
        for a, b in cache:
            total = total + a * b
        return total, len(cache), list(cache)[0][1]

    counter = check(fn, torch.randn(3), Layers([torch.randn(3), torch.randn(3)]), fullgraph=True)
    assert counter.frame_count == 1


def test_the_truth_value_comes_from_python_len_or_bool(check):
    def fn(x, empty, full, flagged):
        if empty:
            x = x + 1
        if full:
            x = x * 2
        if flagged:
            x = x - 3
        return x

    args = (torch.randn(3), Layers([]), Layers([torch.ones(1)]), Flagged([torch.ones(1)]))
    counter = check(fn, *args, fullgraph=True)
    assert counter.frame_count == 1


def test_len_and_iteration_of_a_new_object_agree_with_python(check):
    def fn(x):
        cache = Flagged([x, x + 1])
        return sum(a + b for a, b in cache), len(cache), bool(cache)

    counter = check(fn, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


class Holder:
    pass


def test_id_of_an_object_from_the_frame_is_a_guarded_constant(check):
    shared = Holder()

    def fn(x, a, b):
        seen = {id(a): "a"}
        return x + 1, id(b) in seen, id(a) == id(shared)

    counter = check(fn, torch.randn(3), shared, shared, fullgraph=True)
    assert counter.frame_count == 1
    compiled = capture.optimize(counter)(fn)
    other = Holder()
    for args in [(shared, shared), (shared, other), (other, shared)]:
        assert compiled(torch.ones(1), *args)[1:] == fn(torch.ones(1), *args)[1:]


def test_an_id_of_an_object_made_while_tracing_that_leaves_the_trace_is_a_graph_break():
    def fn(x):
        made = Holder()
        return x + 1, id(made), made, id(made) == id(made)

    with capture.observe() as seen:
        result = capture.optimize(CompileCounter())(fn)(torch.ones(1))
    assert result[1] == id(result[2]) and result[3] is True  # Python's own id of the object it returns
    reasons = [b.reason for frame in seen.frames for b in frame.graph_breaks]
    assert any("id() of an object made while tracing would outlive the graph" in r for r in reasons), reasons


class Output(collections.OrderedDict):
    """Like transformers' ModelOutput: an OrderedDict subclass with Python item and tuple access."""

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def test_dict_methods_of_a_dict_subclass_object_from_the_frame(check):
    def fn(x, out):
        total = x
        for key in out:
            total = total + out[key]
        return total * len(out), out.to_tuple()[1], out.get("b"), "a" in out, list(out.values())[0], bool(out)

    out = Output(a=torch.randn(3), b=torch.randn(3))
    counter = check(fn, torch.randn(3), out, fullgraph=True)
    assert counter.frame_count == 1


def _double(v):
    return v * 2


def test_functions_and_methods_are_true(check):
    validators = {int: _double}

    def fn(x, holder):
        if validator := validators.get(int):
            x = validator(x)
        if holder.to_tuple and len and (lambda: 0):
            x = x + 1
        return x

    counter = check(fn, torch.randn(3), Output(a=1), fullgraph=True)
    assert counter.frame_count == 1
