"""Guard-soundness cases (registered in guard_cases.CASES): dicts and lists read by the program.

A key added or removed, a value changed, a list grown or an element changed, the order of keys.
"""

from __future__ import annotations

import collections

from guard_cases import _ones, case


@case
def dict_key_added():
    d = {"a": 1}

    def f(x):
        return x + 1 if "b" in d else x - 1

    return f, _ones(2), lambda: d.__setitem__("b", 2)


@case
def dict_key_removed():
    d = {"a": 1, "b": 2}

    def f(x):
        return x + d.get("b", 10)

    return f, _ones(2), lambda: d.pop("b")


def _handler():
    return None


@case
def dict_by_class_value_changed():
    registry = {float: 1, int: 2, _handler: 3}  # a registry of classes and functions (pytree's SUPPORTED_NODES)

    def f(x):
        return x * registry[int] + registry[_handler]

    return f, _ones(2), lambda: registry.__setitem__(int, 5)


@case
def dict_by_class_key_added():
    registry = {float: 1, int: 2}

    def f(x):
        return x + (10 if bool in registry else 0)

    return f, _ones(2), lambda: registry.__setitem__(bool, 3)


@case
def dict_value_changed():
    d = {"a": 1}

    def f(x):
        return x * d["a"]

    return f, _ones(2), lambda: d.__setitem__("a", 4)


@case
def dict_keys_view_after_key_added():
    d = {"a": 1}

    def f(x):
        return x + len(d.keys())

    return f, _ones(2), lambda: d.__setitem__("z", 0)


@case
def list_length_changed():
    items = [1, 2]

    def f(x):
        for v in items:
            x = x + v
        return x

    return f, _ones(2), lambda: items.append(3)


@case
def list_element_changed():
    items = [1, 2]

    def f(x):
        return x * items[1]

    return f, _ones(2), lambda: items.__setitem__(1, 5)


@case
def ordered_dict_order_changed():
    d = collections.OrderedDict(a=1, b=2)

    def f(x):
        return x * next(iter(d.values()))

    return f, _ones(2), lambda: d.move_to_end("a")


@case
def dict_key_order_changed():
    d = {"a": 3, "b": 5}

    def f(x):
        return x * d[next(iter(d))]

    def mutate():
        d["a"] = d.pop("a")  # the same items, "a" now last

    return f, _ones(2), mutate


@case
def nested_config_value_changed():
    cfg = {"layers": [{"dim": 2}, {"dim": 3}]}

    def f(x):
        return x * cfg["layers"][1]["dim"]

    return f, _ones(2), lambda: cfg["layers"][1].__setitem__("dim", 8)
