"""collections and dict methods while tracing: OrderedDict, defaultdict, deque, namedtuple, dict.fromkeys,
update from pairs and keywords, ``|`` and ``|=``, setdefault, copy, popitem.

Each program runs eagerly and compiled on the same inputs (results, their classes and key order, and
mutated arguments compared) and is captured in one graph.
"""

import collections

import pytest
import torch

import dynajit.capture as capture


def ordered_dicts(x):
    d = collections.OrderedDict(a=x, b=x + 1)
    d["c"] = x * 2
    d.move_to_end("a")
    d.move_to_end("c", last=False)
    first = d.popitem(last=False)
    last = d.popitem()
    d.update([("z", x - 1)], y=x)
    return d, first, last, list(d.keys()), collections.OrderedDict.fromkeys("ab", 1)


def default_dicts(x):
    groups = collections.defaultdict(list)
    for key, value in [("a", x), ("b", x + 1), ("a", x * 2)]:
        groups[key].append(value)
    counts = collections.defaultdict(int, {"q": 3})
    counts["p"] += 2
    counts["q"] += 1
    return dict(groups), dict(counts), groups.get("missing"), "missing" in groups, counts.default_factory is int


def deques(x):
    d = collections.deque([x], maxlen=3)
    d.append(x + 1)
    d.appendleft(x - 1)
    d.append(x * 5)  # full: drops the leftmost
    right = d.pop()
    d.extend([x * 6, x * 7])
    d.rotate(1)
    left = d.popleft()
    d.extendleft([x * 8])
    free = collections.deque(range(4))
    free.rotate(-1)
    return list(d), right, left, len(d), d.maxlen, free, d[0], free.count(2)


def deque_errors(x):
    messages = []
    try:
        collections.deque().pop()
    except IndexError as error:
        messages.append(str(error))
    try:
        collections.deque([1], maxlen=1).insert(0, 2)
    except IndexError as error:
        messages.append(str(error))
    return x + 1, messages


Point = collections.namedtuple("Point", ["a", "b"], defaults=[1])


def named_tuples(x):
    p = Point(x)
    q = p._replace(b=x * 2)
    return q, q._asdict(), p.b, Point._fields, p._make([x, 3])


def dict_methods(x):
    d = dict.fromkeys(["a", "b"], 0)
    d.update([("c", x)], e=x + 1)
    d.update({"f": x * 2})
    merged = d | {"g": 1}
    d |= {"h": 2}
    d |= [("i", x)]
    d.setdefault("j", x - 1)
    d.setdefault("a", 99)
    copied = d.copy()
    copied["k"] = 5
    key, value = d.popitem()
    return d, merged, copied, key, value, dict([("p", x)], q=1)


def mutate_frame_dicts(x, table, ordered):
    table |= {"new": x}
    table.update([("pair", x + 1)])
    ordered.move_to_end("a")
    ordered.popitem(last=False)
    return x + 1


def empty_popitem(x):
    messages = []
    for d in ({}, collections.OrderedDict()):
        try:
            d.popitem()
        except KeyError as error:
            messages.append(str(error))
    return x + 1, messages


@pytest.mark.parametrize(
    "fn", [ordered_dicts, default_dicts, deques, deque_errors, named_tuples, dict_methods, empty_popitem]
)
def test_collections(check, t, fn):
    with capture.observe() as seen:
        check(fn, t(3), graphs=1, calls=2)
    assert not [b.reason for f in seen.frames for b in f.graph_breaks]


def test_frame_dicts_are_written_back_in_order(t):
    capture.reset()
    from dynajit.capture.testing import CompileCounter

    def args():
        return {"k": 1}, collections.OrderedDict(a=1, b=2, c=3)

    eager_table, eager_ordered = args()
    mutate_frame_dicts(t(3), eager_table, eager_ordered)
    table, ordered = args()
    counter = CompileCounter()
    capture.optimize(counter, fullgraph=True)(mutate_frame_dicts)(t(3), table, ordered)
    assert list(table) == list(eager_table) and list(ordered.items()) == list(eager_ordered.items())
    assert type(ordered) is collections.OrderedDict and counter.frame_count == 1


def deque_escapes_a_break(x):
    d = collections.deque([x, x + 1], maxlen=2)
    print(end="")
    d.append(x + 2)
    return list(d), d.maxlen, type(d).__name__


def test_deque_rebuilt_at_a_break(check, t):
    check(deque_escapes_a_break, t(3), calls=2)


def counters(x):
    c = collections.Counter("abca")
    c.update(["b", "b"])
    c.update({"a": 2})
    return c["a"], c["b"], dict(c), x + 1


def test_counter_counts_while_tracing(check, t):
    with capture.observe() as seen:
        check(counters, t(3), graphs=1, calls=2)
    assert not [b.reason for f in seen.frames for b in f.graph_breaks]


def deque_argument(d, x):
    d.append(x * 2)  # full at maxlen 3: the leftmost drops
    d.rotate(1)
    left = d.popleft()
    d.appendleft(x - d[0])
    d[1] = d[1] + 1
    return left, len(d), d.maxlen, sum(d)


def default_dict_argument(groups, x):
    groups["seen"].append(x)
    groups["new"].append(x * 2)
    return len(groups), groups["seen"][0] + 1


def _deque_args(maxlen, count=3):
    values = torch.arange(float(count + 1)).view(count + 1, 1).expand(count + 1, 4) * 1.5
    return collections.deque(list(values[:count]), maxlen=maxlen), values[count]


@pytest.mark.parametrize("maxlen", [3, None])
def test_a_deque_argument_is_traced_and_written_back_in_one_graph(maxlen):
    from dynajit.capture.testing import CompileCounter

    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(deque_argument)
    for _ in range(2):
        eager_d, x = _deque_args(maxlen)
        expected = deque_argument(eager_d, x)
        got_d, x = _deque_args(maxlen)
        actual = compiled(got_d, x)
        for a, e in zip([*actual, *got_d], [*expected, *eager_d]):
            assert type(a) is type(e) and (a == e if not hasattr(a, "shape") else bool((a == e).all()))
        assert type(got_d) is collections.deque and got_d.maxlen == maxlen and len(got_d) == len(eager_d)
    assert counter.frame_count == 1
    compiled(*_deque_args(maxlen, count=2))  # another length, guarded
    compiled(_deque_args(5)[0], _deque_args(5)[1])  # another maxlen, guarded
    assert counter.frame_count == 3


def test_a_defaultdict_argument_calls_its_factory_for_a_missing_key_and_is_written_back():
    from dynajit.capture.testing import CompileCounter

    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(default_dict_argument)

    def args():
        groups = collections.defaultdict(list)
        groups["seen"].append(torch.ones(4))
        return groups, torch.full((4,), 2.0)

    eager_groups, x = args()
    expected = default_dict_argument(eager_groups, x)
    groups, x = args()
    actual = compiled(groups, x)
    assert actual[0] == expected[0] and bool((actual[1] == expected[1]).all())
    assert type(groups) is collections.defaultdict and groups.default_factory is list
    assert list(groups) == list(eager_groups) and [len(v) for v in groups.values()] == [2, 1]
    assert counter.frame_count == 1


CASTS = {torch.float32: torch.float64, torch.float16: torch.float32}


class Casts(dict):
    """A dict subclass keyed by dtypes, read through the dict base's own methods."""


def casts_by_dtype(x, table):
    wider = x.to(CASTS[x.dtype]) * 2
    return wider, table[x.dtype], x.dtype in table, table.get(torch.bfloat16, "none"), CASTS.get(x.dtype)


@pytest.mark.parametrize("table_type", [dict, Casts])
def test_a_table_keyed_by_dtypes_is_read_in_one_graph(check, t, table_type):
    # A key of a type other than str, int, class or function was a graph break (the table was read in Python).
    table = table_type({torch.float32: "single", torch.float16: "half"})
    with capture.observe() as seen:
        check(casts_by_dtype, t(3), table, graphs=1, calls=2)
        check(casts_by_dtype, t(3, dtype=torch.float16), table, calls=2)
    assert not [b.reason for f in seen.frames for b in f.graph_breaks]
    CASTS[torch.bfloat16] = torch.float32  # a new key: the keys guard recompiles
    try:
        check(casts_by_dtype, t(3, dtype=torch.bfloat16), table, graphs=1)
    finally:
        del CASTS[torch.bfloat16]
