"""Builtins over iterables are lazy iterators, as in Python: zip, enumerate, map, filter, reversed, iter, next.

Each program runs eagerly and compiled on the same inputs (values, raised errors and the effects logged
in order compared) and is captured whole.
"""

import operator

import pytest

import dynajit.capture as capture


def zip_of_generators_interleaves(x, log):
    def produce(tag):
        for k in range(3):
            log.append((tag, k))
            yield x + k

    return [a * b for a, b in zip(produce("a"), produce("b"))]


def zip_stops_at_the_first_exhausted(x, log):
    def produce():
        for k in range(5):
            log.append(k)
            yield x * k

    gen = produce()
    pairs = list(zip([1, 2], gen))  # takes a third item from the list first: gen is not advanced again
    return pairs, next(gen)


def zip_of_one_iterator_twice(x):
    it = iter([x, x + 1, x + 2, x + 3])
    return [a - b for a, b in zip(it, it)]


def enumerate_resumes_where_next_left_it(x):
    it = enumerate([x, x * 2, x * 3], start=5)
    first = next(it)
    return first, [i * t for i, t in it]


def map_is_lazy(x, log):
    def scaled(k):
        log.append(k)
        return x * k

    mapped = map(scaled, range(4))
    first = next(mapped)
    log.append("between")
    return first, list(mapped)


def map_over_two_iterables(x):
    return list(map(operator.add, [x, x * 2, x * 3], [1, 2]))


def filter_with_function_and_none(x):
    kept = [x * k for k in filter(lambda k: k % 2, range(6))]
    return kept, list(filter(None, [0, 1, "", "a", None, 2]))


def reversed_sequences(x):
    return [t for t in reversed([x, x + 1, x + 2])], list(reversed((1, 2, 3))), list(reversed({"a": 1, "b": 2}))


def next_with_default(x):
    it = iter([x])
    return next(it), next(it, None), next(it, x * 2)


def len_of_an_iterator_raises(x):
    try:
        len(zip([x], [x]))
    except TypeError:
        return x + 1
    return x


def reversed_of_an_iterator_raises(x):
    try:
        reversed(iter([x]))
    except TypeError:
        return x + 1
    return x


def next_of_a_list_raises(x):
    try:
        next([x])
    except TypeError:
        return x + 1
    return x


def strict_zip_raises(x):
    try:
        list(zip([x, x], [x], strict=True))
    except ValueError as error:
        return x - 1, str(error)
    return x


def errors_carry_python_messages(x):
    messages = []
    for action in (lambda: len(iter([x])), lambda: reversed(iter([])), lambda: next([x]), lambda: max([])):
        try:
            action()
        except (TypeError, ValueError) as error:
            messages.append(str(error))
    return x + 1, messages


def min_max_with_key(x, y):
    by_size = max([x, y], key=lambda t: t.shape[0])
    smallest = min([x, y], key=lambda t: t.numel())
    return by_size * 2, smallest, min([3, 1, 2], key=lambda k: -k), max([], default=7), max(4, 9, 2)


def min_max_tie_keeps_the_first(x):
    items = [(1, "a"), (0, "b"), (1, "c")]
    return max(items, key=lambda p: p[0]), min(items, key=lambda p: -p[0]), x + 1


def sum_of_tensors(x):
    return sum([x, x * 2]), sum((x * k for k in range(3)), x)


LOGGED = [zip_of_generators_interleaves, zip_stops_at_the_first_exhausted, map_is_lazy]
PLAIN = [
    zip_of_one_iterator_twice,
    enumerate_resumes_where_next_left_it,
    map_over_two_iterables,
    filter_with_function_and_none,
    reversed_sequences,
    next_with_default,
    len_of_an_iterator_raises,
    reversed_of_an_iterator_raises,
    next_of_a_list_raises,
    strict_zip_raises,
    errors_carry_python_messages,
    min_max_tie_keeps_the_first,
    sum_of_tensors,
]


@pytest.mark.parametrize("fn", LOGGED)
def test_effects_happen_when_items_are_taken(check, t, fn):
    check(fn, t(3), [], graphs=1, calls=2, fullgraph=True)


@pytest.mark.parametrize("fn", PLAIN)
def test_iteration_builtins(check, t, fn):
    with capture.observe() as seen:
        counter = check(fn, t(3), calls=2)
    assert not [b.reason for f in seen.frames for b in f.graph_breaks]
    assert counter.frame_count == 1


def test_min_max_with_key(check, t):
    check(min_max_with_key, t(3), t(4), graphs=1, calls=2, fullgraph=True)


def tensor_maximum(x):
    return max([x.sum(), x.mean()])


def test_max_over_tensors_compares_data(check, t):
    with capture.observe() as seen:
        check(tensor_maximum, t(3), calls=2)
    reasons = [b.reason for f in seen.frames for b in f.graph_breaks]
    assert any("compares their values" in r for r in reasons), reasons


def zip_loop_with_break(x):
    total = x
    for i, (a, b) in enumerate(zip([x, x + 1, x + 2], (1, 2, 3))):
        total = total + a * b * i
        print(end="")
    return total


def map_loop_with_break(x):
    total = x
    for t in map(lambda k: x * k, range(3)):
        total = total + t
        print(end="")
    return total


def test_loop_over_zip_and_enumerate_resumes(check, t):
    check(zip_loop_with_break, t(3), calls=2)


def test_loop_over_map_with_a_break(check, t):
    check(map_loop_with_break, t(3), calls=2)


def partly_consumed_before_a_break(x):
    it = zip([x, x + 1, x + 2], [1, 2, 3])
    first = next(it)
    print(end="")
    return first, list(it)


def test_iterator_partly_consumed_before_a_break(check, t):
    check(partly_consumed_before_a_break, t(3), calls=2)


def any_all_stop_at_the_deciding_item(x, log):
    def flags(values):
        for value in values:
            log.append(value)
            yield value

    return any(flags([0, 1, 1])), all(flags([1, 0, 1])), any(flags([])), all(flags([])), x + 1


def test_any_all_are_lazy(check, t):
    check(any_all_stop_at_the_deciding_item, t(3), [], graphs=1, calls=2, fullgraph=True)


def one_iterator_in_two_places_at_a_break(x):
    it = iter([x, x + 1, x + 2, x + 3])
    same = it
    next(it)
    print(end="")
    return next(same), list(it)


def test_iterator_shared_by_two_names_across_a_break(check, t):
    check(one_iterator_in_two_places_at_a_break, t(3), calls=2)


class _Box:
    def __init__(self, inner):
        self.inner = inner


def getters(x):
    pairs = [(2, x), (1, x + 1), (3, x * 2)]
    by_first = sorted(pairs, key=operator.itemgetter(0))
    firsts = list(map(operator.itemgetter(0, 1), pairs))
    box = _Box(_Box(x))
    return by_first, firsts, operator.attrgetter("inner.inner")(box) + 1, max(pairs, key=operator.itemgetter(0))


def test_item_and_attribute_getters(check, t):
    with capture.observe() as seen:
        check(getters, t(3), graphs=1, calls=2)
    assert not [b.reason for f in seen.frames for b in f.graph_breaks]
