"""More of Python traced as Python defines it, each compared with eager on the same inputs in one graph.

``yield from`` in generators (a Python ``__iter__`` included, iterated lazily), ``iter(callable, sentinel)``,
``functools.update_wrapper``/``wraps`` on nested functions, ``collections.Counter``, user subclasses of
``list`` and ``tuple``, ``enum.Enum`` lookups, metaclasses with a Python ``__call__`` and classes with a
Python ``__new__``, ``typing`` introspection on constants, ``threading.local`` reads. Guard tests change
the fact a trace read after the first call and check the compiled call still gives eager's answer.
"""

# The typing tests use typing.List/Dict/Optional on purpose: those are what traced code must evaluate.
# ruff: noqa: UP006, UP045

from __future__ import annotations

import weakref
from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter

pytestmark = pytest.mark.filterwarnings("error:dynajit:RuntimeWarning")


def _same(actual: Any, expected: Any) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        torch.testing.assert_close(actual, expected)
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same(a, e)
    else:
        assert actual == expected


def check(fn: Any, *args: Any, graphs: int | None = 1) -> CompileCounter:
    """Run ``fn`` eagerly and compiled (fullgraph) on the same inputs; ``graphs`` graphs (None: not counted,
    for a step that raises, which runs in Python)."""
    expected = fn(*args)
    counter = CompileCounter()
    actual = capture.optimize(counter, fullgraph=True)(fn)(*args)
    _same(actual, expected)
    assert graphs is None or counter.frame_count == graphs
    return counter


x = torch.randn(4)


# ----------------------------------------------------------------- yield from, iter(callable, sentinel)


class Items:
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __iter__(self):
        yield from self.items


class Stepping:
    def __init__(self) -> None:
        self.n = 1

    def __iter__(self):
        for _ in range(3):
            yield self.n


items_of = Items([1, 2])
stepping = Stepping()


def test_yield_from_in_python_iter():
    def fn(x):
        return sum(x * i for i in items_of)

    check(fn, x)


def test_yield_from_generator_result_and_nesting():
    def fn(x):
        def inner():
            yield x
            yield x * 2
            return 3

        def outer():
            n = yield from inner()
            yield from [x + n, x - n]

        return list(outer())

    check(fn, x)


def test_python_iter_is_lazy():
    # The generator reads ``self.n`` as the loop reaches each item, after the body changed it.
    def fn(x):
        for v in stepping:
            x = x + v
            stepping.n = stepping.n + 1
        return x

    stepping.n = 1
    expected = fn(x)
    stepping.n = 1
    counter = CompileCounter()
    actual = capture.optimize(counter, fullgraph=True)(fn)(x)
    torch.testing.assert_close(actual, expected)
    assert stepping.n == 4 and counter.frame_count == 1


def test_iter_callable_sentinel():
    def fn(x):
        it = iter([1, 2, 0, 3])
        vals = list(iter(lambda: next(it), 0))
        total = x
        tensors = iter([x, x * 2, None, x * 3])
        for v in iter(lambda: next(tensors), None):
            total = total + v
        return x * sum(vals), total

    check(fn, x)


def test_partly_taken_list_iterator_escapes():
    # The iterator is rebuilt over its whole list, advanced: the item already taken must be rebuilt too.
    def fn(x):
        it = iter([x * 2, x * 3])
        next(it)
        return list(it), it

    expected, _ = fn(x)
    (actual, it) = capture.optimize(CompileCounter(), fullgraph=True)(fn)(x)
    _same(actual, expected)
    assert list(it) == []


# ----------------------------------------------------------------- typing introspection on constants

import typing  # noqa: E402

Alias = typing.List[int]


def test_typing_origin_and_args():
    def fn(x):
        out = x
        if typing.get_origin(typing.List[int]) is list:
            out = out + 1
        if typing.get_args(typing.Dict[str, float]) == (str, float):
            out = out * 2
        if typing.get_origin(typing.Optional[int]) is typing.Union and typing.get_origin(Alias) is list:
            out = out - 3
        return out, len(typing.get_args(tuple[int, ...]))

    check(fn, x)


def test_typing_alias_global_rebound_recompiles():
    def fn(x):
        args = typing.get_args(typing.Dict[str, Alias])
        return x + len(typing.get_args(args[1]))

    global Alias
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(fn)
    _same(compiled(x), fn(x))
    Alias = typing.Dict[str, int]
    try:
        _same(compiled(x), fn(x))
    finally:
        Alias = typing.List[int]


# ----------------------------------------------------------------- functools.update_wrapper / wraps

import functools  # noqa: E402


def helper(x):
    """Triple."""
    return x * 3


helper.tag = 2


def test_update_wrapper_on_nested_function():
    def fn(x):
        def wrapper(y):
            return helper(y) + 1

        functools.update_wrapper(wrapper, helper)
        return wrapper(x) * wrapper.tag, wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ is helper

    check(fn, x)


def test_wraps_decorator_and_escaping_wrapper():
    def fn(x):
        @functools.wraps(helper)
        def wrapper(y):
            return helper(y) - 1

        wrapper.extra = x.sum()
        return wrapper(x), wrapper

    expected, _ = fn(x)
    (actual, wrapper) = capture.optimize(CompileCounter(), fullgraph=True)(fn)(x)
    _same(actual, expected)
    assert wrapper.__name__ == "helper" and wrapper.__qualname__ == "helper" and wrapper.__doc__ == "Triple."
    assert wrapper.__wrapped__ is helper and wrapper.tag == 2 and wrapper.__module__ == helper.__module__
    torch.testing.assert_close(wrapper.extra, x.sum())
    torch.testing.assert_close(wrapper(x), helper(x) - 1)


def test_update_wrapper_guards_the_wrapped_attributes():
    def fn(x):
        def wrapper(y):
            return y

        functools.update_wrapper(wrapper, helper)
        return x * wrapper.tag, wrapper.__doc__

    compiled = capture.optimize(CompileCounter(), fullgraph=True)(fn)
    _same(compiled(x), fn(x))
    helper.tag, helper.__doc__ = 5, "Changed."
    try:
        _same(compiled(x), fn(x))
    finally:
        helper.tag, helper.__doc__ = 2, "Triple."


# ----------------------------------------------------------------- enum lookups

import enum  # noqa: E402


class Color(enum.Enum):
    RED = 1
    BLUE = 2
    CRIMSON = 1  # an alias of RED


mode = Color.RED


def test_enum_call_getitem_iteration():
    def fn(x):
        blue = Color(2)
        red = Color["RED"]
        out = x * blue.value + red.value
        for member in Color:
            out = out + member.value
        return out, len(Color), blue.name, Color(1) is Color.CRIMSON, [m.name for m in Color]

    check(fn, x)


def test_enum_lookup_failure_raises_as_eager():
    def fn(x):
        try:
            Color(7)
        except ValueError as error:
            return x + 1, str(error)
        return x, ""

    check(fn, x, graphs=None)


def test_enum_valued_global_rebound_recompiles():
    def fn(x):
        return x * Color(mode.value + 1).value

    global mode
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(fn)
    _same(compiled(x), fn(x))
    mode = Color.BLUE
    try:
        with pytest.raises(ValueError):
            fn(x)
        with pytest.raises(ValueError):
            compiled(x)
    finally:
        mode = Color.RED


def test_enum_member_value_changed_gives_eager_answer():
    class Level(enum.Enum):
        LOW = 1
        HIGH = 3

    def fn(x):
        return x * Level["HIGH"].value

    compiled = capture.optimize(CompileCounter(), fullgraph=True)(fn)
    _same(compiled(x), fn(x))
    Level.HIGH._value_ = 5
    _same(compiled(x), fn(x))


# ----------------------------------------------------------------- metaclasses and __new__


class Meta(type):
    tag = 5

    def __call__(cls, *args):
        obj = super().__call__(*args)
        obj.tag = type(cls).tag
        return obj


class WithMeta(metaclass=Meta):
    def __init__(self, v):
        self.v = v


class WithNew:
    def __new__(cls, v):
        obj = super().__new__(cls)
        obj.v = v * 2
        return obj

    def __init__(self, v):
        self.w = v + 1


class NotMine:
    def __new__(cls, v):
        return v * 10  # not an instance: __init__ is not called

    def __init__(self, v):
        raise AssertionError("not called")


def test_metaclass_python_call():
    def fn(x):
        o = WithMeta(x)
        return o.v * o.tag, o

    expected, _ = fn(x)
    (actual, obj) = capture.optimize(CompileCounter(), fullgraph=True)(fn)(x)
    _same(actual, expected)
    assert type(obj) is WithMeta and obj.tag == 5
    torch.testing.assert_close(obj.v, x)


def test_metaclass_attribute_swapped_recompiles():
    def fn(x):
        return x * WithMeta(x).tag

    compiled = capture.optimize(CompileCounter(), fullgraph=True)(fn)
    _same(compiled(x), fn(x))
    Meta.tag = 7
    try:
        _same(compiled(x), fn(x))
    finally:
        Meta.tag = 5


def test_metaclass_call_swapped_recompiles():
    class Plain(metaclass=type("M", (type,), {})):
        def __init__(self, v):
            self.v = v

    def fn(x):
        return Plain(x).v + 1

    compiled = capture.optimize(CompileCounter(), fullgraph=True)(fn)
    _same(compiled(x), fn(x))

    def call(cls, v):
        obj = object.__new__(cls)
        obj.v = v * 3
        return obj

    type(Plain).__call__ = call
    _same(compiled(x), fn(x))


def test_python_new_then_init():
    def fn(x):
        o = WithNew(x)
        return o.v + o.w, NotMine(3), o

    expected = fn(x)
    counter = CompileCounter()
    actual = capture.optimize(counter, fullgraph=True)(fn)(x)
    _same(actual[:2], expected[:2])
    obj = actual[2]
    assert type(obj) is WithNew and counter.frame_count == 1
    torch.testing.assert_close(obj.v, x * 2)
    torch.testing.assert_close(obj.w, x + 1)


def test_object_new_with_arguments_raises_as_eager():
    class Bad:
        def __new__(cls, v):
            return super().__new__(cls, v)

    def fn(x):
        try:
            Bad(x)
        except TypeError as error:
            return x + 1, str(error)
        return x, ""

    check(fn, x, graphs=None)


# ----------------------------------------------------------------- collections.Counter and operator methods

import collections  # noqa: E402
import heapq  # noqa: E402

words = ["a", "b", "a"]


def test_counter_most_common_arithmetic_update_elements():
    def fn(x):
        c = collections.Counter(["a", "b", "a"])
        key, n = c.most_common(1)[0]
        c.update(["b", "b", "c"])
        c.update(c=2)
        d = c + collections.Counter(a=1)
        e = d - collections.Counter("b")
        return (
            x * n + d["a"],
            key,
            sorted(c.elements()),
            c.most_common(),
            c.most_common(2),
            c["missing"],
            e,
            d | collections.Counter(z=1),
            d & collections.Counter(b=1),
            c,
        )

    check(fn, x)


def test_counter_source_list_mutated_recompiles():
    def fn(x):
        key, n = collections.Counter(words).most_common(1)[0]
        return x * n, key

    compiled = capture.optimize(CompileCounter(), fullgraph=True)(fn)
    _same(compiled(x), fn(x))
    words[0] = "b"
    try:
        _same(compiled(x), fn(x))
    finally:
        words[0] = "a"


def test_heapq_selection_as_sorted():
    def fn(x):
        pairs = [(2, "b"), (1, "a"), (2, "a"), (3, "c")]
        return x + heapq.nlargest(2, pairs, key=lambda p: p[0])[1][0], heapq.nsmallest(3, [5, 1, 4, 1])

    check(fn, x)


class Vec:
    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.v + other.v)
        if isinstance(other, (int, float)):
            return Vec(self.v + other)
        return NotImplemented

    def __radd__(self, other):
        return self.__add__(other)

    def __mul__(self, k):
        return Vec(self.v * k)

    def __lt__(self, other):
        return self.v.sum() < other.v.sum()

    def __iadd__(self, other):
        self.v = self.v + other.v
        return self


class Named(Vec):
    def __radd__(self, other):
        return Vec(self.v - 100)


def test_python_operator_methods_and_reflection():
    def fn(x):
        a, b = Vec(x), Vec(x * 2)
        c = a + b
        d = 1 + a  # int answers NotImplemented: Vec.__radd__
        e = sum([a, b])  # 0 + a, then Vec + Vec
        f = a + Named(x)  # a subclass's overriding __radd__ goes first
        a += b
        return c.v, d.v, e.v, f.v, (a * 3).v, a is not c

    check(fn, x)


def test_python_operator_unsupported_operands_raise_as_eager():
    def fn(x):
        try:
            Vec(x) - 1
        except TypeError as error:
            return x, str(error)
        return x + 1, ""

    check(fn, x, graphs=None)


class Signed:
    def __init__(self, v):
        self.v = v

    def __neg__(self):
        return Signed(-self.v)

    def __pos__(self):
        return Signed(self.v.abs())

    def __invert__(self):
        return self.v.flip(0)


def test_python_unary_operator_methods():
    def fn(x):
        made, passed = -Signed(x), +Signed(x)
        return made.v, passed.v, ~Signed(x + 1)

    check(fn, x)


def test_a_unary_operator_a_class_lacks_raises_as_eager():
    def fn(x):
        try:
            -Vec(x)
        except TypeError as error:
            return x, str(error)
        return x + 1, ""

    check(fn, x, graphs=None)


# ----------------------------------------------------------------- list and tuple subclasses


class MyList(list):
    def total(self):
        return sum(self)

    def append(self, item):
        super().append(item * 2)  # an override reaching the base through super()

    def first(self):
        return self[0]


class MyTuple(tuple):
    def swapped(self):
        return MyTuple((self[1], self[0]))


class Pair(tuple):
    def __new__(cls, a, b):
        made = super().__new__(cls, (a, b))
        made.label = "pair"
        return made

    def __len__(self):
        return super().__len__() + 10


def test_list_subclass_methods_iteration_indexing():
    def fn(x):
        items = MyList([x, x + 1])
        items.append(x)
        items.extend([x * 3])
        items[1] = items[1] * 5
        total = x * 0
        for v in items:
            total = total + v
        plain = items + [x]  # noqa: RUF005  (the base's own + is what is tested)
        items += [x - 1]
        return items.total(), items.first(), len(items), total, plain, items[1:], isinstance(items, list), items

    expected = fn(x)
    counter = CompileCounter()
    actual = capture.optimize(counter, fullgraph=True)(fn)(x)
    _same(list(actual[:-1]), list(expected[:-1]))
    assert type(actual[-1]) is MyList and counter.frame_count == 1
    _same(list(actual[-1]), list(expected[-1]))


def test_tuple_subclass_construction_and_new():
    def fn(x):
        t = MyTuple((x, x * 2))
        s = t.swapped()
        p = Pair(x, 3)
        return t[0] + t[1], s[0], len(t), len(p), p.label, tuple(p), len(s), s, p

    expected = fn(x)
    counter = CompileCounter()
    actual = capture.optimize(counter, fullgraph=True)(fn)(x)
    _same(list(actual[:-2]), list(expected[:-2]))
    assert type(actual[-2]) is MyTuple and type(actual[-1]) is Pair and actual[-1].label == "pair"
    _same(tuple(actual[-2]), tuple(expected[-2]))
    assert counter.frame_count == 1


# ----------------------------------------------------------------- threading.local

import threading  # noqa: E402

local = threading.local()


def _in_thread(action: Any) -> Any:
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(_outcome(action)))
    worker.start()
    worker.join()
    return out[0]


def _outcome(action: Any) -> Any:
    try:
        return action()
    except Exception as error:  # the error eager raises, to compare
        return type(error)


def test_thread_local_reads_are_per_thread():
    def fn(x):
        local.count = getattr(local, "count", 0) + 1
        return x * local.scale, local.count

    compiled = capture.optimize(CompileCounter(), fullgraph=True)(fn)
    local.scale = 4
    _same(compiled(x), (x * 4, 1))
    _same(compiled(x), (x * 4, 2))
    assert local.count == 2

    def other_thread(scale):
        def run():
            if scale is not None:
                local.scale = scale
            compiled_result = _outcome(lambda: compiled(x))
            if hasattr(local, "count"):
                del local.count
            return compiled_result, _outcome(lambda: fn(x))

        return run

    compiled_result, eager_result = _in_thread(other_thread(7))
    _same(compiled_result, eager_result)
    compiled_result, eager_result = _in_thread(other_thread(None))
    assert compiled_result is AttributeError and eager_result is AttributeError
    assert local.count == 2 and local.scale == 4


# ----------------------------------------------------------------- weakref.ref made in the frame


class Scaler:
    def __init__(self, k: float) -> None:
        self.k = k

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return t * self.k


SCALER = Scaler(3.0)


def test_a_weak_reference_made_while_tracing_gives_its_referent():
    def fn(t):
        ref = weakref.ref(SCALER)
        return ref()(t) + 1

    check(fn, x)


def test_a_weak_reference_that_leaves_the_trace_refers_to_the_same_object():
    def fn(t):
        return t + 1, weakref.ref(SCALER)

    expected, _ = fn(x)
    counter = CompileCounter()
    actual, compiled_ref = capture.optimize(counter, fullgraph=True)(fn)(x)
    torch.testing.assert_close(actual, expected)
    assert isinstance(compiled_ref, weakref.ReferenceType) and compiled_ref() is SCALER
    assert counter.frame_count == 1


def test_a_weak_reference_with_a_callback_is_a_break():
    def fn(t):
        ref = weakref.ref(SCALER, lambda r: None)
        return ref()(t)

    counter = CompileCounter()
    torch.testing.assert_close(capture.optimize(counter)(fn)(x), fn(x))
