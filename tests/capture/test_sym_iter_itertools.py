"""itertools while tracing: each function runs as Python defines it, over tracked items, captured whole.

Every program runs eagerly and compiled on the same inputs; effects logged by generators feeding an
itertools object show that items are taken when the consumer asks for them, as in eager.
"""

import itertools
import operator

import pytest

import dynajit.capture as capture


def chains(x):
    joined = list(itertools.chain([x], (x * k for k in range(2)), (x + 1,)))
    return joined, list(itertools.chain.from_iterable([[x], [x - 1, x - 2]]))


def combinatorics(x):
    items = [x, x * 2, x * 3]
    return (
        [a * b for a, b in itertools.product([1, 2], items[:2])],
        [a + b for a, b in itertools.combinations(items, 2)],
        [a - b for a, b in itertools.permutations(items, 2)],
        len(list(itertools.combinations_with_replacement(range(3), 2))),
        list(itertools.product(range(2), repeat=2)),
    )


def accumulations(x):
    return (
        list(itertools.accumulate([x, x, x])),
        list(itertools.accumulate([x, x + 1], operator.mul, initial=x)),
        list(itertools.accumulate([1, 5, 2, 7], max)),
    )


def slices(x):
    items = [x * k for k in range(6)]
    return (
        list(itertools.islice(items, 1, None, 2)),
        list(itertools.islice(items, 2)),
        list(itertools.islice(items, 2, 4)),
    )


def islice_leaves_the_rest(x, log):
    def produce():
        for k in range(6):
            log.append(k)
            yield x + k

    it = produce()
    head = list(itertools.islice(it, 2))
    return head, next(it)


def longest(x):
    return list(itertools.zip_longest([x, x + 1, x + 2], [x], fillvalue=0)), list(itertools.zip_longest("ab", "c"))


def infinite_ones(x):
    counted = [x * i for i, _ in zip(itertools.count(2, 3), range(3))]
    cycled = [t for t, _ in zip(itertools.cycle([x, x + 1]), range(5))]
    return counted, cycled, list(itertools.repeat(x, 2)), [r for r, _ in zip(itertools.repeat(1), range(3))]


def groups(x):
    by_value = [(k, len(list(g))) for k, g in itertools.groupby([1, 1, 2, 3, 3, 1])]
    by_key = [(k, [t * 2 for t in g]) for k, g in itertools.groupby([x, x, x + 1], key=lambda t: t.shape[0])]
    return by_value, by_key


def groupby_group_is_shared(x):
    grouped = itertools.groupby("aabbc")
    first_key, first_group = next(grouped)
    second_key, _ = next(grouped)  # advancing the groupby empties the first group
    return first_key, list(first_group), second_key, x + 1


def calls(x):
    return (
        list(itertools.starmap(operator.mul, [(x, 2), (x, 3)])),
        list(itertools.pairwise([x, x * 2, x * 4])),
        list(itertools.takewhile(lambda k: k < 3, [1, 2, 5, 1])),
        list(itertools.dropwhile(lambda k: k < 3, [1, 2, 5, 1])),
        list(itertools.filterfalse(None, [0, 1, 0, 2])),
        list(itertools.filterfalse(lambda k: k % 2, range(5))),
        list(itertools.compress([x, x + 1, x + 2], [1, 0, 1])),
    )


def chain_of_generators_is_lazy(x, log):
    def produce(tag):
        for k in range(2):
            log.append((tag, k))
            yield x + k

    chained = itertools.chain(produce("a"), produce("b"))
    first = next(chained)
    log.append("between")
    return first, list(chained)


@pytest.mark.parametrize("fn", [chains, combinatorics, accumulations, slices, longest, infinite_ones, groups, calls])
def test_itertools(check, t, fn):
    with capture.observe() as seen:
        check(fn, t(3), graphs=1, calls=2, fullgraph=True)
    assert not [b.reason for f in seen.frames for b in f.graph_breaks]


@pytest.mark.parametrize("fn", [islice_leaves_the_rest, chain_of_generators_is_lazy])
def test_itertools_take_items_when_asked(check, t, fn):
    check(fn, t(3), [], graphs=1, calls=2, fullgraph=True)


def test_groupby_groups_share_the_input(check, t):
    check(groupby_group_is_shared, t(3), graphs=1, calls=2, fullgraph=True)


def bad_islice(x):
    try:
        itertools.islice([x], -1)
    except ValueError as error:
        return x + 1, str(error)
    return x


def test_itertools_errors_are_pythons(check, t):
    check(bad_islice, t(3), graphs=1, calls=2)


def groupby_over_tensors(x):
    return [len(list(g)) for _, g in itertools.groupby([x.sum(), x.sum()])]


def test_groupby_comparing_tensors_breaks(check, t):
    with capture.observe() as seen:
        check(groupby_over_tensors, t(3), calls=2)
    assert [b.reason for f in seen.frames for b in f.graph_breaks]


def itertools_loop_with_break(x):
    total = x
    for a, b in itertools.pairwise([x, x + 1, x + 2]):
        total = total + a * b
        print(end="")
    return total


def test_break_in_a_loop_over_itertools_runs_in_python(check, t):
    check(itertools_loop_with_break, t(3), calls=2)
