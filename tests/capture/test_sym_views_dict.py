"""dict.keys() / values() / items() are live views of their dict, while tracing and after the graph."""

from __future__ import annotations

import collections
import gc

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def test_views_see_later_insertions(check, t):
    def f(x):
        d = {1: x}
        keys, values, items = d.keys(), d.values(), d.items()
        d[4] = x + 1
        return 4 in keys, len(values), len(items), (1, x) in items, list(keys), x + 1

    check(f, t(2), graphs=1)


def test_views_see_deletions_updates_and_clear(check, t):
    def f(x):
        d = {"a": x, "b": x * 2}
        keys, values = d.keys(), d.values()
        del d["a"]
        d.update({"c": x + 3})
        before = (list(keys), len(values), bool(keys))
        d.clear()
        return before, len(keys), bool(values), list(values)

    check(f, t(3), graphs=1)


def test_iterating_a_view_after_mutation(check, t):
    def f(x):
        d = {"a": x, "b": x + 1}
        values = d.values()
        d["c"] = x * 3
        total = x
        for v in values:
            total = total + v
        return total, list(reversed(d.keys())), sorted(d.keys()), [k for k, _ in d.items()]

    check(f, t(3), graphs=1)


def test_set_operations_on_keys_and_items(check, t):
    def f(x):
        d = {"a": 1, "b": 2}
        k = d.keys()
        d["c"] = 3
        return (
            sorted(k & {"a", "c"}),
            sorted(k | ["z"]),
            sorted(k - {"a"}),
            sorted(k ^ {"a", "q"}),
            sorted({"a", "z"} - k),
            {"b"} < k,
            k <= {"a", "b", "c"},
            k == {"a", "b", "c"},
            k != {"a"},
            k == ["a", "b", "c"],
            d.items() == {("a", 1), ("b", 2), ("c", 3)},
            sorted(d.items() & {("a", 1), ("b", 5)}),
            k.isdisjoint(["q", "r"]),
            x * 2,
        )

    check(f, t(2), graphs=1)


def test_values_views_compare_by_identity(check, t):
    def f(x):
        d = {"a": x}
        v = d.values()
        return v == v, d.values() == d.values(), d.values() != v, x + 1

    check(f, t(2), graphs=1)


def test_escaping_views_stay_live():
    def f(x):
        d = {"a": x}
        k, v, i = d.keys(), d.values(), d.items()
        d["b"] = 2
        return x + 1, k, v, i

    counter = CompileCounter()
    capture.reset()
    _, k, v, i = capture.optimize(counter)(f)(torch.ones(2))
    assert counter.frame_count == 1
    assert type(k) is type({}.keys()) and type(v) is type({}.values()) and type(i) is type({}.items())
    assert list(k) == ["a", "b"] and len(v) == 2 and ("b", 2) in i
    # They are views of one dict, built after the graph: a change through the mapping shows in all three.
    (mapping,) = gc.get_referents(k)
    assert all(gc.get_referents(view) == [mapping] for view in (v, i))
    mapping["c"] = 3
    assert list(k) == ["a", "b", "c"] and len(v) == 3


def test_view_of_an_argument_dict_is_the_argument_dict():
    def f(x, d):
        k = d.keys()
        d["new"] = 1
        return x + 1, k, len(k)

    counter = CompileCounter()
    capture.reset()
    d = {"a": 1}
    _, k, n = capture.optimize(counter)(f)(torch.ones(2), d)
    assert n == 2 and list(d) == ["a", "new"]
    d["later"] = 2
    assert list(k) == ["a", "new", "later"]  # the returned view is the argument's own


def test_ordered_dict_views(check, t):
    def f(x):
        d = collections.OrderedDict(a=1)
        k = d.keys()
        d["b"] = 2
        return x + 1, list(k), isinstance(k, collections.abc.KeysView), type(k).__name__

    check(f, t(2), graphs=1)


def test_views_of_a_dict_subclass_made_while_tracing(check, t):
    class Bag(dict):
        pass

    def f(x):
        b = Bag()
        k = b.keys()
        b["w"] = x
        return list(k), len(b.values()), x + 1

    check(f, t(2), graphs=1)
