"""Loops over dicts, their views, sets and deques that the loop body changes: Python's iterators read the
container as it is at each step and raise RuntimeError once it changed in a way they refuse; compiled code must
do the same, with and without a graph break inside the loop. Each differential against eager."""

from __future__ import annotations

import collections

import pytest
import torch


def _break():
    print(end="")  # a graph break


def values_written_ahead(x, broken):
    d = {"a": x, "b": x, "c": x}
    out = []
    for v in d.values():
        if broken:
            _break()
        out.append(v)
        d["c"] = x * 5
    return out


def items_written_ahead(x, broken):
    d = {"a": x, "b": x}
    out = []
    for k, v in d.items():
        if broken:
            _break()
        out.append((k, v))
        d["b"] = v + 7
    return out


def keys_grow(x, broken):
    d = {"a": x}
    for k in d:
        if broken:
            _break()
        d[k + "!"] = x + 1
    return d


def values_view_grows(x, broken):
    d = {"a": x, "b": x}
    for v in d.values():
        d["z"] = v
        if broken:
            _break()
    return d


def keys_grow_after_the_last_item(x, broken):
    # the size is checked at every step, the one that would end the loop included
    d = {"a": x}
    for k in d:
        if broken:
            _break()
        if k == "a":
            d["b"] = x
    return d


def set_grows(x, broken):
    s = {1, 2}
    for v in s:
        if broken:
            _break()
        s.add(v + 10)
    return x + len(s)


def deque_appended(x, broken):
    q = collections.deque([x, x + 1])
    for v in q:
        if broken:
            _break()
        q.append(v)
    return list(q)


def deque_item_replaced_and_reversed(x, broken):
    # neither stops Python's deque iterator: the items are read as they are then
    q = collections.deque([x, x + 1, x + 2])
    out = []
    for i, v in enumerate(q):
        if broken:
            _break()
        out.append(v)
        if i == 0:
            q[2] = x * 9
        if i == 1:
            q.reverse()
    return out, list(q)


def enumerated_items_written_ahead(x, broken):
    d = {"a": x, "b": x, "c": x}
    out = []
    for i, (_k, v) in enumerate(d.items()):
        if broken:
            _break()
        out.append(v * i)
        d["c"] = v + i
    return out


def loop_left_then_changed(x, broken):
    d = {"a": x, "b": x}
    it = iter(d)
    first = next(it)
    if broken:
        _break()
    for k in it:
        first = first + k
    d["c"] = x
    return first, d


@pytest.mark.parametrize("broken", [False, True], ids=["one_graph", "graph_break"])
@pytest.mark.parametrize(
    "fn",
    [
        values_written_ahead,
        items_written_ahead,
        keys_grow,
        values_view_grows,
        keys_grow_after_the_last_item,
        set_grows,
        deque_appended,
        deque_item_replaced_and_reversed,
        enumerated_items_written_ahead,
        loop_left_then_changed,
    ],
)
def test_a_loop_sees_the_container_as_python_does(check, t, fn, broken):
    check(fn, t(3), broken, calls=2)


def keys_swapped_same_size(x):
    d = {"a": x, "b": x, "c": x}
    seen = []
    for k in d:
        seen.append(k)
        if k == "a":
            del d["a"]
            d["e"] = x
    return seen


def test_keys_changed_at_the_same_size_run_as_in_python(check, t):
    # Which key comes next depends on the dict's layout (here Python raises "dictionary keys changed during
    # iteration"): the frame runs in Python rather than guess.
    check(keys_swapped_same_size, t(3))


def keys_swapped_after_a_break(x):
    # the change comes after the break, in the resumed loop: Python yields b and c, then raises
    d = {"a": x, "b": x, "c": x}
    seen = []
    for k in d:
        seen.append(k)
        _break()
        if k == "a":
            del d["a"]
            d["z"] = x
    return seen


def items_swapped_after_a_break(x):
    # Python yields the new key where the old one's slot was passed: no error
    d = {"a": x, "b": x, "c": x}
    out = []
    for k, v in d.items():
        out.append((k, v * 2))
        _break()
        if k == "b":
            d.pop("c")
            d["y"] = x + 1
    return out


def ordered_keys_swapped_after_a_break(x):
    d = collections.OrderedDict(a=x, b=x, c=x)
    seen = []
    for k in d:
        seen.append(k)
        _break()
        if k == "a":
            d.move_to_end("a")
    return seen


def set_swapped_after_a_break(x):
    s = {1, 2, 3}
    total = x
    for i in s:
        total = total + i
        _break()
        if i == 1:
            s.discard(3)
            s.add(4)
    return total


def enumerated_keys_swapped_after_a_break(x):
    d = {"a": x, "b": x, "c": x}
    out = []
    for i, k in enumerate(d):
        out.append(d[k] * i)
        _break()
        if i == 0:
            del d["a"]
            d["z"] = x
    return out


@pytest.mark.parametrize(
    "fn",
    [
        keys_swapped_after_a_break,
        items_swapped_after_a_break,
        ordered_keys_swapped_after_a_break,
        set_swapped_after_a_break,
        enumerated_keys_swapped_after_a_break,
    ],
)
def test_keys_changed_at_the_same_size_after_a_break_run_as_in_python(check, t, fn):
    # The resumed loop's trace knows the keys its iterator started with and runs the frame in Python once they
    # change; there the handed-over iterator is Python's own, advanced as far (reading the container again by
    # position skipped "b" and returned where Python raises).
    check(fn, t(3), calls=2)


class Growing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if len(self.layers) < 3:
                self.layers.append(torch.nn.Identity())
        return x


def test_a_module_list_grown_in_its_own_loop_raises_as_in_eager(check, t):
    check(lambda x: Growing()(x), t(2))


def _counted(n, log):
    for i in range(n):
        log.append(i)
        yield i


def membership_stops_at_the_first_equal(x, log):
    return x + (2 in _counted(5, log))  # the items after the 2 are never made


def membership_leaves_the_generator_after_it(x, log):
    items = _counted(5, log)
    found = 2 in items
    return x + found + next(items)  # 3


def membership_in_a_list_of_a_generator(x, log):
    return x + (3 in list(_counted(5, log))) + (7 in _counted(2, log))


@pytest.mark.parametrize(
    "fn",
    [
        membership_stops_at_the_first_equal,
        membership_leaves_the_generator_after_it,
        membership_in_a_list_of_a_generator,
    ],
)
def test_in_takes_items_until_the_first_equal_one(check, t, fn):
    check(fn, t(3), [], graphs=1, fullgraph=True)
