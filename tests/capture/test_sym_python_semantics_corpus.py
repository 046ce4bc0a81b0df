"""Python's own semantics inside a traced frame, each program run eagerly and compiled and compared.

Programs a user writes without thinking of a compiler: generators driven by ``send``, a ``finally`` that
overrides a ``return``, chained exceptions, aliases of a list extended in place, late-bound lambdas, rounding
rules, properties with side effects, ``__getattr__`` fallbacks, lazy ``map``, ``for``/``while`` ``else``,
decorators, enums and named tuples, and the identity of the tensors in-place ops and ``out=`` return. Many
cross a graph break (``_break``), where a resume function must carry every local on.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import enum
import functools
import itertools
import operator
import typing

import pytest
import torch

import dynajit.capture as capture


def _break() -> None:
    print(end="")  # a graph break that prints nothing


def generator_driven_by_send(x):
    def running_total():
        total = 0
        while True:
            value = yield total
            if value is None:
                return total
            total = total + value

    it = running_total()
    next(it)
    it.send(x)
    it.send(x * 2)
    try:
        it.send(None)
    except StopIteration as stop:
        return stop.value


def finally_overrides_return(x):
    def inner(y):
        try:
            return y + 1
        finally:
            return y - 1  # noqa: B012 (the semantics under test)

    return inner(x)


def finally_runs_after_return(x):
    def inner(y):
        try:
            return y + 1
        finally:
            y.mul_(2)

    z = x.clone()
    return inner(z), z


def chained_exceptions(x):
    try:
        try:
            raise ValueError("inner")
        except ValueError as err:
            raise KeyError("outer") from err
    except KeyError as outer:
        return x + 1, type(outer.__cause__).__name__, str(outer.__context__), outer.__suppress_context__


def list_alias_extended_in_place(x):
    items = [x]
    alias = items
    items += [x + 1]
    pair = (x,)
    pair_alias = pair
    pair += (x * 2,)
    return len(alias), len(pair_alias), len(pair), alias[-1]


def containers_of_constants_changed_in_place(x):
    # `+=` and `*=` extend the list itself: a copy of a list of constants left its aliases as they were
    items = [1, 2]
    alias = items
    items += [3]
    items *= 2
    empty = []
    empty_alias = empty
    empty += range(2)
    kept = {1, 2}  # and a set's |=, &=, -=, ^= change the set itself
    kept_alias = kept
    kept |= {3, 4}
    kept -= {1}
    kept &= {2, 3, 9}
    kept ^= {5}
    return x * len(alias), alias, empty_alias, sorted(kept_alias)


def iterator_over_a_list_grown_by_iadd_after_a_break(x):
    items = [x, x * 2, x * 3]
    it = iter(items)
    first = next(it)
    items.clear()
    _break()
    items += [x * 5, x * 6]  # the iterator is past the end of the cleared list: it gives x * 6
    return first, list(it)


def container_errors_are_pythons(x):
    # the errors a traced handler catches carry the container's own message, and a failed pop changes nothing
    pair, items, caught = (1, 2), [x, x + 1], []
    for attempt in (lambda: pair[5], lambda: pair.index(7), lambda: items.pop(5), lambda: items.index(x * 0 + 9)):
        try:
            attempt()
        except (IndexError, ValueError, RuntimeError) as error:
            caught.append(f"{type(error).__name__}: {error}")
    try:
        items[::2] = [x, x, x]
    except ValueError as error:
        caught.append(str(error))
    return len(items), caught


def walrus_in_a_comprehension(x):
    kept = [y for i in range(3) if (y := x * i).sum() > -100]
    return y, len(kept)


def rounding_rules(x):
    return x * round(2.5) + round(3.5) + int(-2.5) + divmod(-7, 2)[0] + (-7 % 3) + (-7 // 2) + round(-0.5)


def mutable_default_argument(x):
    def append(value, acc=[]):  # noqa: B006 (the semantics under test)
        acc.append(value)
        return len(acc)

    return x * append(1) * append(2)


@dataclasses.dataclass
class _Pair:
    a: torch.Tensor
    b: int = 2


def dataclass_replace_and_compare(x):
    pair = _Pair(x)
    pair.b += 3
    other = dataclasses.replace(pair, b=10)
    return pair.a * pair.b + other.b, dataclasses.asdict(pair)["b"], pair == _Pair(x, 5)


class _Logged:
    def __init__(self):
        self._value = 1
        self.log = []

    @property
    def value(self):
        self.log.append("get")
        return self._value

    @value.setter
    def value(self, new):
        self.log.append("set")
        self._value = new


def property_side_effects(x):
    logged = _Logged()
    logged.value = logged.value + 2
    logged.value += 1
    return x * logged.value, logged.log


class _Fallback:
    def __init__(self):
        self.table = {"w": 3}

    def __getattr__(self, name):
        if name in self.table:
            return self.table[name]
        raise AttributeError(name)


def getattr_fallback(x):
    obj = _Fallback()
    return x * obj.w, hasattr(obj, "missing"), getattr(obj, "missing", 7)


def lazy_map_side_effects(x):
    log = []
    doubled = map(lambda v: (log.append(v), v * 2)[1], [1, 2, 3])
    first = next(doubled)
    seen = list(log)
    return x * first, seen, list(doubled), log


def zip_strict_raises(x):
    try:
        return list(zip([1, 2], [3], strict=True))
    except ValueError as err:
        return x + 1, str(err)


def late_binding_lambdas(x):
    scales = [lambda v: v * i for i in range(3)]
    return [scale(x) for scale in scales]


def suppressing_context_manager(x):
    class Suppress:
        def __init__(self):
            self.log = []

        def __enter__(self):
            self.log.append("enter")
            return self

        def __exit__(self, kind, value, tb):
            self.log.append(kind.__name__ if kind else None)
            return True

    manager = Suppress()
    with manager:
        y = x + 1
        raise RuntimeError("suppressed")
    return y, manager.log


def super_chain_and_mro(x):
    class A:
        def f(self, v):
            return v + 1

    class B(A):
        def f(self, v):
            return super().f(v) * 2

    class C(B):
        def f(self, v):
            return super().f(v) - 3

    return C().f(x), [k.__name__ for k in C.__mro__]


def generator_closed_runs_finally(x):
    log = []

    def numbers():
        try:
            yield 1
            yield 2
        finally:
            log.append("closed")

    it = numbers()
    first = next(it)
    it.close()
    return x * first, log


def loop_else_clauses(x):
    for i in range(3):
        if i == 5:
            break
        x = x + i
    else:
        x = x * 10
    n = 0
    while n < 2:
        n += 1
    else:
        x = x - n
    return x


def try_with_a_break_inside(x):
    try:
        y = x + 1
        _break()
        y = y * 2
        raise ValueError("v")
    except ValueError:
        y = y - 1
    finally:
        y = y * 3
    return y


def no_grad_block_with_a_break_inside(x):
    with torch.no_grad():
        y = x * 2
        _break()
        z = y + 1
    return z, torch.is_grad_enabled()


def deleted_local_across_a_break(x):
    y = x + 1
    z = y
    del y
    _break()
    try:
        return y  # noqa: F821 (raises UnboundLocalError, as it should)
    except UnboundLocalError:
        return z * 2


def _plus_one(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return wrapper


@_plus_one
def _scaled(x, *, k=2):
    return x * k


def wrapped_function(x):
    return _scaled(x, k=3), _scaled.__name__, _scaled.__wrapped__(x)


class _Color(enum.Enum):
    RED = 1
    BLUE = 2


def enum_members(x):
    color = _Color.BLUE
    return x * color.value, color.name, color is _Color.BLUE, _Color(1).name, [m.name for m in _Color]


class _Named(typing.NamedTuple):
    a: torch.Tensor
    b: int = 4


def named_tuple_replace(x):
    named = _Named(x)
    other = named._replace(b=5)
    return named, other, other.a * other.b, named._asdict()["b"], _Named._fields


def arguments_forwarded(x):
    def inner(a, b=1, *rest, c=2, **extra):
        return a * b + sum(rest) + c + sum(extra.values())

    args = (x, 2, 3, 4)
    kwargs = {"c": 5, "d": 6}
    return inner(*args, **kwargs), inner(x, **{"b": 3})


def list_consumed_while_growing(x):
    items = [x, x * 2, x * 3]
    out = []
    while items:
        value = items.pop(0)
        if len(items) == 1:
            items.append(value + 100)
        out.append(value)
        if len(out) > 5:
            break
    return out


def dict_updates(x):
    d = {}
    d.setdefault("a", []).append(x)
    d.setdefault("a", []).append(x + 1)
    d.update(b=2, c=3)
    d |= {"e": 4}
    del d["b"]
    d["b"] = 0
    return d, {**d, "f": 5}, dict(zip("xy", [x, 1]))


def ordered_dict_moves(x):
    od = collections.OrderedDict(a=1, b=2, c=3)
    od.move_to_end("a")
    od.popitem(last=False)
    return list(od.items()), x * od["a"], collections.Counter("abracadabra").most_common(2)


def list_methods(x):
    items = [3, 1, 2]
    items.sort()
    items.reverse()
    items.insert(1, 9)
    items.remove(1)
    items.extend([7])
    return items, items.index(9), items.count(7), x * items[0], items * 2, items + [0]  # noqa: RUF005


def reduce_and_accumulate(x):
    return functools.reduce(operator.add, [x, x, x]), [x * i for i in itertools.accumulate([1, 2, 3])]


def in_place_results_are_their_tensors(x):
    y = x.clone()
    returned = (y.fill_(3), y.zero_(), y.copy_(x), y.clamp_(0, 1), y.masked_fill_(y > 0.5, 0))
    keyed = {y: "y"}
    written = y.mul_(2)
    items = [y, y * 2]
    position = items.index(written)
    return [r is y for r in returned], keyed.get(written, "missing"), written in keyed, position


def out_results_are_their_tensors(x):
    out, total = torch.empty(2, 3), torch.empty(3)
    values, indices = torch.empty(0), torch.empty(0, dtype=torch.long)
    product = torch.mul(x, 2, out=out)
    summed = torch.sum(x, 0, out=total)
    best = torch.max(x, 1, out=(values, indices))
    return product is out, summed is total, best[0] is values, best[1] is indices, out, total, values, indices


def same_tensor_methods(x):
    return (
        x.contiguous() is x,
        x.to(torch.float32) is x,
        x.float() is x,
        x.double() is x,
        x.detach() is x,
        x.view_as(x) is x,
        x.type_as(x) is x,
    )


def identity_across_a_break(x):
    y = x.add_(1)
    _break()
    z = y.mul_(2)
    return z is x, y is x


PROGRAMS = [
    generator_driven_by_send,
    finally_overrides_return,
    finally_runs_after_return,
    chained_exceptions,
    list_alias_extended_in_place,
    containers_of_constants_changed_in_place,
    iterator_over_a_list_grown_by_iadd_after_a_break,
    container_errors_are_pythons,
    walrus_in_a_comprehension,
    rounding_rules,
    mutable_default_argument,
    dataclass_replace_and_compare,
    property_side_effects,
    getattr_fallback,
    lazy_map_side_effects,
    zip_strict_raises,
    late_binding_lambdas,
    suppressing_context_manager,
    super_chain_and_mro,
    generator_closed_runs_finally,
    loop_else_clauses,
    try_with_a_break_inside,
    no_grad_block_with_a_break_inside,
    deleted_local_across_a_break,
    wrapped_function,
    enum_members,
    named_tuple_replace,
    arguments_forwarded,
    list_consumed_while_growing,
    dict_updates,
    ordered_dict_moves,
    list_methods,
    reduce_and_accumulate,
    in_place_results_are_their_tensors,
    same_tensor_methods,
    identity_across_a_break,
]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_python_semantics_match_eager(check, fn):
    check(fn, torch.randn(3), calls=2)


def _grow_arguments(x, counts, flags):
    counts += [len(counts)]
    flags *= 2
    return x * len(counts)


def test_lists_of_constants_from_the_caller_are_grown_in_place(check):
    check(_grow_arguments, torch.randn(3), [1, 2], [True], calls=2)


def test_out_results_are_the_tensors_they_wrote(check):
    check(out_results_are_their_tensors, torch.randn(2, 3), calls=2)


def joined_names(x, names):
    label = "-".join(name.upper() for name in names)
    return x * len(label), label, ",".join([str(size) for size in x.shape]), b"".join([b"a", b"b"])


def container_methods_taken_from_their_class(x, items, table):
    copied = copy.copy(items)  # copy.copy calls list.copy, taken from its table of copiers
    copied.append(x)
    list.append(items, x * 2)
    shallow = copy.copy(table)
    shallow["b"] = x
    dict.update(table, c=1)
    seen = {1}
    set.add(seen, 2)
    return len(items), copied, shallow, dict.get(table, "z", 5), tuple.count((1, 1, 2), 1) + len(seen)


def operator_functions_and_tensor_types(x, items, other):
    half = x.to(torch.float16)
    return (
        operator.truth(items) and operator.truth(x.shape),
        operator.is_(x, x),
        operator.is_not(x, other),
        operator.is_(items, None),
        half.type(),
        other.type(half.type()),  # a cast named by the type string
        f"{x.__class__.__name__} of {x.type()}",
        x.__class__ is torch.Tensor,
    )


@pytest.mark.parametrize(
    "fn, args",
    [
        (joined_names, (["a", "bb"],)),
        (container_methods_taken_from_their_class, ([1, 2], {"a": 1})),
        (operator_functions_and_tensor_types, ([1], torch.ones(2, dtype=torch.float64))),
    ],
    ids=["str.join", "list.append", "operator.truth"],
)
def test_builtin_methods_over_what_the_trace_holds_are_traced(check, fn, args):
    # str.join of a generator, a container's method taken from its class (list.append, copy.copy's list.copy),
    # operator.truth/is_/is_not, Tensor.type() and a tensor's __class__ were graph breaks.
    with capture.observe() as seen:
        check(fn, torch.randn(2, 3), *args, graphs=1, calls=2)
    assert not [b.reason for f in seen.frames for b in f.graph_breaks]
