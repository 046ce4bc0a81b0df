"""Instances of user classes created inside compiled code: plain classes, slots, dataclasses, dict subclasses,
objects alive across a graph break, and the classes that stay a graph break. Each differential against eager."""

from __future__ import annotations

import abc
import collections
import dataclasses
import gc
import typing
from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


class Point:
    dims = 2  # a class attribute read through the instance

    def __init__(self, x, n=3):
        self.x = x * self.dims
        self.n = n

    def total(self):
        return self.x.sum() + self.n

    @property
    def doubled(self):
        return self.x * 2

    @staticmethod
    def origin():
        return 0

    @classmethod
    def name(cls):
        return cls.__name__


def make_point(x):
    p = Point(x + 1, n=4)
    p.n += Point.origin() + len(p.name())
    return p, p.total(), p.doubled, isinstance(p, Point), type(p) is Point


def test_a_plain_object_is_built_in_the_graph_and_returned(check, t):
    check(make_point, t(3), graphs=1, fullgraph=True)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a

    def __eq__(self, other):
        same_b = hasattr(self, "b") == hasattr(other, "b")
        return type(other) is Slotted and torch.equal(self.a, other.a) and same_b


def make_slotted(x):
    s = Slotted(x.cos())
    return s, hasattr(s, "b"), s.a + 1


def test_an_object_with_slots_keeps_unset_slots_unset(check, t):
    check(make_slotted, t(3), graphs=1, fullgraph=True)


class Holder:
    def __init__(self):
        self.cache = None


def store_into_existing(holder, x):
    holder.cache = Point(x.exp())
    return holder.cache.total()


def test_an_object_stored_into_an_argument_is_rebuilt_there(check, t):
    check(store_into_existing, Holder(), t(3), graphs=1, fullgraph=True)


class Node:
    def __init__(self, value):
        self.value = value
        self.me = self
        self.children = []


def shared_and_cyclic(x):
    node = Node(x * 3)
    other = Node(x)
    node.children.append(other)
    return node, node, other, node is other, node is node


def test_identity_and_cycles_survive_the_rebuild(t):
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(shared_and_cyclic)
    x = t(3)
    node, again, other, different, same = compiled(x)
    assert node is again and node.me is node and node.children == [other] and other.me is other
    assert (different, same) == (False, True)
    torch.testing.assert_close(node.value, x * 3)
    assert list(vars(node)) == ["value", "me", "children"]


class Counted:
    def __init__(self, x):
        self.writes = 0
        self.x = x

    def __setattr__(self, name, value):
        object.__setattr__(self, "writes", getattr(self, "writes", 0) + 1)
        super().__setattr__(name, value)


def counted_writes(x):
    c = Counted(x)
    c.x = c.x + 1
    return c, c.writes


def test_a_python_setattr_runs_once_per_write(check, t):
    check(counted_writes, t(3), graphs=1, fullgraph=True)


@dataclasses.dataclass
class Batch:
    inputs: torch.Tensor
    scale: float = 2.0
    tags: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.scaled = self.inputs * self.scale


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: torch.Tensor
    b: int = 1


def make_dataclasses(x):
    batch = Batch(x, tags=["t"])
    default = Batch(x + 1)
    default.tags.append(len(dataclasses.fields(batch)))
    frozen = Frozen(x.sin())
    changed = dataclasses.replace(frozen, b=5)
    names = [f.name for f in dataclasses.fields(Frozen)]
    return batch, default, frozen, changed, names, dataclasses.is_dataclass(batch)


def test_dataclasses_with_defaults_factories_and_post_init(check, t):
    check(make_dataclasses, t(3), graphs=1, fullgraph=True)


def write_frozen(x):
    frozen = Frozen(x)
    frozen.b = 2
    return frozen


def test_writing_a_frozen_dataclass_raises_as_in_eager(check, t):
    check(write_frozen, t(3))


def live_across_a_break(x):
    p = Point(x.relu(), n=2)
    q = Slotted(p.x)
    capture.graph_break()
    p.n = p.n + 1
    return p.total() + q.a.sum(), p


def test_objects_alive_at_a_graph_break_are_rebuilt_for_the_resume_function(check, t):
    check(live_across_a_break, t(3), graphs=2)


CREATED: list[Any] = []


class Registered:
    def __init__(self, x):
        CREATED.append(len(CREATED))
        self.x = x
        capture.graph_break()  # the construction cannot be traced: it runs in Python, once
        self.y = x + 1


def construct_with_a_break(x):
    r = Registered(x * 2)
    return r.y * 3


def test_a_construction_that_breaks_runs_once_in_python(t):
    counter = CompileCounter()
    compiled = capture.optimize(counter)(construct_with_a_break)
    x = t(3)
    CREATED.clear()
    expected = construct_with_a_break(x)
    torch.testing.assert_close(compiled(x), expected)
    assert CREATED == [0, 1]


class Meta(type):
    pass


class WithMeta(metaclass=Meta):
    def __init__(self, x):
        self.x = x


class WithNew:
    def __new__(cls, x):
        obj = super().__new__(cls)
        obj.made_by_new = True
        return obj

    def __init__(self, x):
        self.x = x


class OnDeque(collections.deque):
    def __init__(self, x):
        super().__init__()
        self.x = x


class Abstract(abc.ABC):
    @abc.abstractmethod
    def run(self): ...


def _construct(cls):
    def fn(x):
        obj = cls(x + 1)
        return obj.x * 2, obj

    return fn


@pytest.mark.parametrize("cls", [WithMeta, WithNew])
def test_a_python_metaclass_or_new_is_traced(t, cls):
    fn = _construct(cls)
    counter = CompileCounter()
    x = t(3)
    actual = capture.optimize(counter, fullgraph=True)(fn)(x)
    expected = fn(x)
    torch.testing.assert_close(actual[0], expected[0])
    assert type(actual[1]) is cls and vars(actual[1]).keys() == vars(expected[1]).keys()
    assert counter.frame_count == 1


@pytest.mark.parametrize(("cls", "reason"), [(OnDeque, "derives from deque")])
def test_classes_that_are_not_modelled_are_a_graph_break_naming_why(t, cls, reason):
    fn = _construct(cls)
    compiled = capture.optimize(CompileCounter())(fn)
    x = t(3)
    with capture.observe() as seen:
        actual = compiled(x)
    expected = fn(x)
    torch.testing.assert_close(actual[0], expected[0])
    assert type(actual[1]) is cls and vars(actual[1]).keys() == vars(expected[1]).keys()
    reasons = [b.reason for frame in seen.frames for b in frame.graph_breaks]
    assert any(f"constructing {cls.__qualname__} is not traced" in r and reason in r for r in reasons), reasons


def test_an_abstract_class_raises_as_in_eager(check, t):
    def fn(x):
        return Abstract(), x

    check(fn, t(3))


@dataclasses.dataclass
class Output(collections.OrderedDict):
    """Like transformers' ModelOutput: fields that are not None are also items."""

    hidden: torch.Tensor | None = None
    pooled: torch.Tensor | None = None
    extra: tuple | None = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = self.__dict__.get(field.name)
            if value is not None:
                self[field.name] = value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def make_output(x):
    out = Output(hidden=x.tanh(), extra=(1, 2))
    out.pooled = out[0].sum(0)
    out.hidden = out["hidden"] * 2
    return out, out[1], len(out), "pooled" in out, list(out.keys()), bool(out)


def _state(obj):
    return list(obj.items()), vars(obj)


def test_a_dict_subclass_output_keeps_items_and_attributes_in_step(check, t):
    check(make_output, t(2, 3), graphs=1, fullgraph=True)
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(make_output)
    x = t(2, 3)
    (actual, *_), (expected, *_) = compiled(x), make_output(x)
    actual_items, actual_attrs = _state(actual)
    expected_items, expected_attrs = _state(expected)
    assert [k for k, _ in actual_items] == [k for k, _ in expected_items]
    assert list(actual_attrs) == list(expected_attrs)
    for key, value in expected_attrs.items():
        if isinstance(value, torch.Tensor):
            torch.testing.assert_close(actual_attrs[key], value)
            if key in expected:  # the item and the attribute are one tensor, as in eager
                assert actual_attrs[key] is dict.__getitem__(actual, key)
        else:
            assert actual_attrs[key] == value


class Layers(collections.abc.Sequence):
    def __init__(self, n, x):
        self.n = n
        self.x = x

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        return self.x * i


def iterate_sequence(x):
    return [item + 1 for item in Layers(3, x)], len(Layers(2, x))


def test_a_sequence_made_while_tracing_iterates_by_index(check, t):
    check(iterate_sequence, t(3), graphs=1, fullgraph=True)


class Window(collections.abc.Sequence):
    """A view over a list: what it yields is read from the list when the loop asks for it."""

    def __init__(self, data, log):
        self.data = data
        self.log = log

    def __len__(self):
        self.log.append("len")
        return len(self.data)

    def __getitem__(self, i):
        self.log.append(i)
        return self.data[i]


def loop_body_changes_what_comes_next(x, log):
    window = Window([x, x + 1, x + 2], log)
    total = x * 0
    for i, item in enumerate(window):
        log.append(("body", i))
        if i + 1 < len(window.data):
            window.data[i + 1] = window.data[i + 1] * 10
        total = total + item
    return total


def test_iterating_a_sequence_made_while_tracing_asks_for_each_item_when_the_loop_does(check, t):
    # Sequence's __iter__ indexes until IndexError, one item per step of the loop: each item saw what the loop body
    # wrote before (eager 51, where reading every item first gave 6), and the hooks ran in eager's order.
    check(loop_body_changes_what_comes_next, t(3), [], graphs=1, fullgraph=True)


class Config:
    attribute_map = {"layers": "n_layer"}

    def __init__(self):
        self.n_layer = 4
        self.width = 3

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


CONFIG = Config()


def read_config(x):
    return x * CONFIG.layers + CONFIG.width + CONFIG.__dict__.get("width", 0)


def test_a_python_getattribute_of_an_existing_object_is_inlined(check, t):
    check(read_config, t(3), graphs=1, fullgraph=True)


class Lazy:
    def __init__(self, x):
        self.x = x

    @property
    def missing_in_getter(self):
        raise KeyError("not an AttributeError")


def getattr_defaults(x):
    lazy = Lazy(x)
    return getattr(lazy, "x", None) * 2, getattr(lazy, "absent", 3), getattr(lazy, "missing_in_getter", 4)


def test_getattr_with_a_default_only_swallows_a_missing_attribute(check, t):
    check(getattr_defaults, t(3))


class Tracked:
    instances: list[Any] = []  # one registry shared by every instance

    def __init__(self, x):
        self.x = x
        Tracked.instances.append(self)


@capture.disable
def inspect_in_python(obj):
    obj.seen = obj.x.shape[0]


def escape_to_python_and_registry(x):
    obj = Tracked(x * 2)
    inspect_in_python(obj)
    return obj.x + obj.seen, obj


def test_an_object_passed_to_python_is_the_one_kept_by_the_frame_and_the_class(t):
    compiled = capture.optimize(CompileCounter())(escape_to_python_and_registry)
    x = t(3)
    Tracked.instances.clear()
    expected, expected_obj = escape_to_python_and_registry(x)
    actual, actual_obj = compiled(x)
    torch.testing.assert_close(actual, expected)
    assert vars(actual_obj).keys() == vars(expected_obj).keys() == {"x", "seen"}
    assert Tracked.instances == [expected_obj, actual_obj] and Tracked.instances[1] is actual_obj


class KeyValueLayer:
    def __init__(self):
        self.keys = None

    def update(self, keys):
        self.keys = keys if self.keys is None else torch.cat([self.keys, keys], -1)
        return self.keys


class Cache:
    def __init__(self, *, layers=2, offset=0):
        self.layers = [KeyValueLayer() for _ in range(layers)]
        self.offset = offset

    def update(self, keys, index):
        return self.layers[index].update(keys)


def build_cache(x):
    cache = Cache(layers=2, offset=1)
    for i in range(2):
        cache.update(x * i, i)
        cache.update(x + i, i)
    return cache


def _cache_state(cache):
    return cache.offset, [layer.keys for layer in cache.layers]


def test_a_cache_of_layer_objects_built_with_keywords(t):
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(build_cache)
    x = t(2, 3)
    actual, expected = _cache_state(compiled(x)), _cache_state(build_cache(x))
    assert actual[0] == expected[0]
    for got, want in zip(actual[1], expected[1]):
        torch.testing.assert_close(got, want)


Pair = collections.namedtuple("Pair", "first second")


class Span(typing.NamedTuple):
    start: torch.Tensor
    width: int = 2

    def end(self):
        return self.start + self.width

    @property
    def doubled(self):
        return self.start * 2


def make_named_tuples(x, given):
    pair = Pair(x, second=x + 1)
    span = Span(x * 3)
    first, second = pair
    return pair, span, span.end(), span.doubled, first + second, len(span), span[:1], span._fields, given.end()


def test_named_tuples_are_built_and_read_in_the_graph(check, t):
    check(make_named_tuples, t(3), Span(t(3), 5), graphs=1, fullgraph=True)


FINALIZED: list[str] = []


class Finalized:
    def __init__(self, x):
        self.x = x

    def __del__(self):
        FINALIZED.append("del")


def finalize_locally(x):
    Finalized(x)
    return x + 1


def test_a_class_with_a_finalizer_is_a_graph_break(t):
    compiled = capture.optimize(CompileCounter())(finalize_locally)
    x = t(3)
    FINALIZED.clear()
    with capture.observe() as seen:
        torch.testing.assert_close(compiled(x), finalize_locally(x))
    gc.collect()  # the first call's conversion may keep the frame alive a little longer
    assert FINALIZED == ["del", "del"]
    reasons = [b.reason for frame in seen.frames for b in frame.graph_breaks]
    assert any("it defines __del__" in r for r in reasons), reasons


class Celsius:
    def __init__(self, degrees):
        self.degrees = degrees

    @property
    def degrees(self):
        return self._degrees

    @degrees.setter
    def degrees(self, value):
        self._degrees = value.clamp(min=-273.15)


@dataclasses.dataclass(slots=True)
class SlottedData:
    a: torch.Tensor
    b: int = 1


@dataclasses.dataclass
class Derived(Batch):
    offset: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        self.scaled = self.scaled + self.offset


def setters_slots_and_inheritance(x):
    c = Celsius(x * 100)
    c.__dict__.update(note="set through __dict__")
    data = SlottedData(x)
    data.b = 4
    derived = Derived(x, scale=3.0)
    return c, c.degrees, (data.a, data.b, hasattr(data, "__dict__")), derived, derived.scaled


def test_property_setters_dict_updates_slotted_dataclasses_and_inherited_post_init(check, t):
    check(setters_slots_and_inheritance, t(3), graphs=1, fullgraph=True)


class Doubling:
    def __init__(self, x):
        self.x = x

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        return value * 2 if name == "x" else value


def write_then_read_through_getattribute(obj, x):
    obj.x = x + 1
    return obj.x, obj


def test_a_python_getattribute_sees_attributes_written_in_the_graph(check, t):
    check(write_then_read_through_getattribute, Doubling(t(3)), t(3), graphs=1, fullgraph=True)


def branch_on_a_tensor(holder, x):
    point = Point(x, n=1)
    holder.cache = point
    if x.sum() > 0:  # a graph break on the tensor's value: one resume function per branch
        return point.total() + 1, point is holder.cache
    return point.total() - 1, point is holder.cache


def test_an_object_built_before_a_branch_is_the_same_object_in_both_branches(check, t):
    check(branch_on_a_tensor, Holder(), t(3), graphs=2)
    check(branch_on_a_tensor, Holder(), -t(3).abs(), graphs=2)


class Countdown:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


class Evens:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        yield from range(0, self.n, 2)


def iterate_objects(x):
    return [x * i for i in Countdown(3)], [x + i for i in Evens(5)]


def test_iterating_over_new_objects_with_their_own_iter(check, t):
    check(iterate_objects, t(3))


class ShapeError(ValueError):
    pass


def raise_a_user_exception(x):
    if x.dim() != 2:
        raise ShapeError("expected a matrix")
    return x


def test_a_user_exception_class_is_still_raised_as_in_eager(check, t):
    check(raise_a_user_exception, t(3), fullgraph=True)


LAST_POINT: Any = None


def _make_and_mutate(x, n):
    p = Point(x, n=n)
    p.n = p.n * 10
    return p


def escape_everywhere(x, registry):
    global LAST_POINT
    points = [_make_and_mutate(x, i) for i in range(2)]
    registry["first"] = points[0]
    LAST_POINT = points[1]
    return points, points[0].total() + points[1].total()


def test_objects_escaping_through_lists_dict_arguments_and_globals(t):
    global LAST_POINT
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(escape_everywhere)
    x = t(3)
    expected_total = escape_everywhere(x, {})[1]
    registry: dict[str, Any] = {}
    points, total = compiled(x, registry)
    torch.testing.assert_close(total, expected_total)
    assert registry["first"] is points[0] and LAST_POINT is points[1]
    assert [vars(p).keys() for p in points] == [{"x", "n"}, {"x", "n"}] and [p.n for p in points] == [0, 10]
    LAST_POINT = None


def test_a_class_of_a_library_named_like_torch_is_built_in_the_graph(check, t):
    # (only torch's own classes are left to Python: torchvision's ImageList, made by every detection model's
    # transform, is a plain class)
    image_list = pytest.importorskip("torchvision.models.detection.image_list")

    def batch(x):
        images = image_list.ImageList(x * 2, [(3, 4)])
        return images.tensors + 1, images.image_sizes

    check(batch, t(2, 3, 4), graphs=1, fullgraph=True)
