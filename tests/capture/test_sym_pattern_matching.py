"""``match`` statements traced in one graph: sequence, mapping, class, value and guard patterns, against eager.

Each program is called, eagerly and compiled, with subjects taking every case in turn (one compile per guard
set), and must be traced without a graph break (``fullgraph``). The errors CPython's pattern matching raises
(a duplicate key, a bad ``__match_args__``, too many positional sub-patterns) are raised with eager's message.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Mapping, Sequence

import pytest
import torch

import dynajit.capture as capture


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Config:
    __match_args__ = ("kind", "scale")

    def __init__(self, kind, scale):
        self.kind, self.scale = kind, scale

    @property
    def missing(self):
        raise AttributeError("not set")  # a class pattern naming it does not match


class Table(Mapping):
    """A mapping written in Python: a mapping pattern reads it through get(), which Mapping builds on []."""

    def __init__(self, **items):
        self._items = items

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


class Row(Sequence):
    def __init__(self, *items):
        self._items = items

    def __getitem__(self, i):
        return self._items[i]

    def __len__(self):
        return len(self._items)


def sequences(x, subject):
    match subject:
        case (a, b):
            return x * a + b
        case [a, b, *rest]:
            return x * a - len(rest)
        case []:
            return x
        case _:
            return x - 1


def mappings(x, subject):
    match subject:
        case {"scale": s, "shift": t}:
            return x * s + t
        case {"scale": s, **rest}:
            return x * s + len(rest)
        case {}:
            return x + 100
        case _:
            return -x


def classes(x, subject):
    match subject:
        case Point(x=0, y=y):
            return x + y
        case Point(px, py):
            return x * px + py
        case Config("mul", scale):
            return x * scale
        case Config(kind="add", scale=s):
            return x + s
        case Config(missing=_):
            return x * 1000
        case bool(flag):
            return x * 2 if flag else x / 2
        case int(n) if n > 2:
            return x * n
        case float() | int():
            return x - subject
        case str() as text:
            return x + len(text)
        case Color.BLUE:
            return x * 7
        case torch.Tensor(shape=(n,)):
            return x + subject * n
        case None:
            return x
        case _:
            return x * 0


def shapes(x):
    match x.shape:
        case (n,):
            return x * n
        case (n, m):
            return x.sum(0) * m
        case _:
            return x


SUBJECTS = {
    sequences: [(2, 3), [2, 3, 4, 5], [], (1,), "ab", Row(4, 5), Row(1, 2, 3), range(3), {"a": 1}],
    mappings: [
        {"scale": 2, "shift": 1},
        {"scale": 3, "a": 1, "b": 2},
        {},
        {"x": 1},
        collections.OrderedDict(scale=2),
        collections.defaultdict(int, shift=1),  # get() does not call __missing__: no key is added
        Table(scale=4, shift=2),
        Table(),
        [1],
    ],
    classes: [
        Point(0, 5),
        Point(2, 3),
        Config("mul", 4),
        Config("add", 2),
        Config("sub", 1),
        True,
        False,
        5,
        1,
        2.5,
        "abc",
        Color.BLUE,
        torch.ones(3),
        torch.ones(2, 2),
        None,
        (1,),
    ],
}


@pytest.mark.parametrize("program", list(SUBJECTS), ids=lambda f: f.__name__)
def test_each_case_of_a_match_statement_is_traced_in_one_graph(check, program):
    for subject in SUBJECTS[program]:
        with capture.observe() as seen:
            check(program, torch.arange(3.0), subject, fullgraph=True)
        assert not [b.reason for f in seen.frames for b in f.graph_breaks]


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 2, 2)])
def test_a_match_on_a_tensors_shape(check, shape):
    check(shapes, torch.ones(shape), fullgraph=True)


class TooMany:
    __match_args__ = ("a",)
    a = 1


class NotATuple:
    __match_args__ = ["a"]
    a = 1


def duplicate_keys(x, subject):
    match subject:
        case {"k": a, Color.RED: b} if False:  # (never reached: the literal keys differ)
            return x
        case {KeyHolder.key: a, KeyHolder.same: b}:
            return x + a + b
    return x


class KeyHolder:
    key = "k"
    same = "k"


def too_many_positional(x, subject):
    match subject:
        case TooMany(a, b):
            return x + a + b
    return x


def not_a_tuple(x, subject):
    match subject:
        case NotATuple(a):
            return x + a
    return x


def self_matching_with_two(x, subject):
    match subject:
        case int(a, b):
            return x + a + b
    return x


def repeated_attribute(x, subject):
    match subject:
        case Point(a, x=b):
            return x + a + b
    return x


def not_a_class(x, subject):
    match subject:
        case KeyHolder.key():  # a str, not a class
            return x
    return x


@pytest.mark.parametrize(
    ("program", "subject"),
    [
        (duplicate_keys, {"k": 1}),
        (too_many_positional, TooMany()),
        (not_a_tuple, NotATuple()),
        (self_matching_with_two, 3),
        (repeated_attribute, Point(1, 2)),
        (not_a_class, 3),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_pattern_matching_errors_are_eagers(check, program, subject):
    check(program, torch.arange(3.0), subject)
