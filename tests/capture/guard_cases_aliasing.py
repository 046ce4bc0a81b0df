"""Guard-soundness cases (registered in guard_cases.CASES): which mutable objects are one object.

The trace keeps one tracker per list, dict, deque or object: a write through one name is seen through another
only when both reach the same object. Each case traces with two different objects, then passes one object in
both places (or the other way round), which changes what a write made through one name does to a read through
the other, or what ``is`` answers.
"""

from __future__ import annotations

import collections

import torch
from guard_cases import Holder, case


def _flag() -> dict[str, bool]:
    return {"one": False}


def _two_lists(one_at_first: bool):
    state = {"one": one_at_first}

    def f(a, b, x):
        a.append(x + 1)
        return x * len(b)

    def make():
        a = []
        return a, (a if state["one"] else []), torch.ones(2)

    return f, make, lambda: state.update(one=not one_at_first)


@case
def lists_become_one():
    return _two_lists(one_at_first=False)


@case
def lists_become_two():
    return _two_lists(one_at_first=True)


@case
def dicts_become_one():
    state = _flag()

    def f(a, b, x):
        a["k"] = x + 1
        return b.get("k", x) * 2

    def make():
        a = {}
        return a, (a if state["one"] else {}), torch.ones(2)

    return f, make, lambda: state.update(one=True)


@case
def deques_become_one():
    state = _flag()

    def f(a, b, x):
        a.append(x)
        return x + len(b)

    def make():
        a = collections.deque()
        return a, (a if state["one"] else collections.deque()), torch.ones(2)

    return f, make, lambda: state.update(one=True)


@case
def lists_compared_by_identity_become_one():
    state = _flag()

    def f(a, b, x):
        return x + 1 if a is b else x - 1

    def make():
        a = [1]
        return a, (a if state["one"] else [1]), torch.ones(2)

    return f, make, lambda: state.update(one=True)


@case
def tuple_elements_become_one():
    state = _flag()

    def f(pair, x):
        pair[0].append(x)
        return x + len(pair[1])

    def make():
        a = []
        return (a, a if state["one"] else []), torch.ones(2)

    return f, make, lambda: state.update(one=True)


GLOBAL_LOG: list = []


@case
def argument_becomes_a_global():
    state = _flag()

    def f(a, x):
        a.append(x)
        return x + len(GLOBAL_LOG)

    def make():
        GLOBAL_LOG.clear()
        return (GLOBAL_LOG if state["one"] else []), torch.ones(2)

    return f, make, lambda: state.update(one=True)


@case
def attributes_become_one_list():
    holder = Holder(left=[], right=[])

    def f(x):
        holder.left.append(x)
        return x + len(holder.right)

    def make():
        holder.left.clear()
        holder.right.clear()
        return (torch.ones(2),)

    return f, make, lambda: setattr(holder, "right", holder.left)


@case
def objects_become_one():
    state = _flag()

    def f(a, b, x):
        a.t = a.t + x
        return b.t * 2

    def make():
        a = Holder(t=torch.zeros(2))
        return a, (a if state["one"] else Holder(t=torch.zeros(2))), torch.ones(2)

    return f, make, lambda: state.update(one=True)
