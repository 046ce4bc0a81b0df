"""collections and dict methods while tracing: OrderedDict, defaultdict, deque, namedtuple, dict.fromkeys,
update from pairs and keywords, ``|`` and ``|=``, setdefault, copy, popitem.

Each program runs eagerly and compiled on the same inputs (results, their classes and key order, and
mutated arguments compared) and is captured in one graph.
"""

import collections

import pytest

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
