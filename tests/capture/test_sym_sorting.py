"""``sorted()`` and ``list.sort()`` while tracing: keys compared at trace time, tensors' values never."""

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def break_reasons(check, fn, *args, **options):
    """Run the differential check; return the reasons of the graph breaks it met."""
    with capture.observe() as seen:
        check(fn, *args, **options)
    return [b.reason for frame in seen.frames for b in frame.graph_breaks]


def s_constant_list_with_key(x):
    words = ["pear", "fig", "banana", "kiwi"]
    by_length = sorted(words, key=len)  # stable: "pear" stays before "kiwi"
    return x * len(by_length[0]), by_length, sorted(words, key=len, reverse=True)


def s_tuple_with_lambda(x):
    pairs = ((3, "c"), (1, "a"), (2, "b"), (1, "z"))
    ordered = sorted(pairs, key=lambda p: p[0], reverse=True)
    return x + ordered[0][0], ordered


def s_sizes(x):
    dims = sorted(x.shape)
    order = sorted(range(x.dim()), key=lambda d: x.shape[d], reverse=True)
    return x.permute(*order) * dims[0], dims, order


def s_tensors_by_size(xs):
    return [t * 2 for t in sorted(xs, key=len)]


def s_tensors_by_lambda_of_shape(xs):
    return [t + 1 for t in sorted(xs, key=lambda t: (t.dim(), -t.shape[-1]))]


def s_dict_keys(x):
    weights = {"b": 2, "c": 3, "a": 1}
    return [x * weights[k] for k in sorted(weights)]


def s_list_sort_in_place(x, sizes):
    sizes.sort(reverse=True)
    return x[: sizes[0]], sizes


def s_list_sort_with_key(x):
    items = [x, x[:2], x[:3]]
    items.sort(key=lambda t: t.shape[0])
    return items


def s_argument_list_sorted_with_key(xs):
    xs.sort(key=lambda t: t.numel(), reverse=True)
    return xs[0] + 1


def s_key_builtin_abs(x):
    return x * sorted([-3, 2, -1], key=abs)[0]


def s_empty_and_single(x):
    return x + len(sorted([])), sorted([x])


def s_key_none(x):
    return x * sorted([3, 1, 2], key=None)[0]


SORTING_FUNCTIONS = [
    (s_tuple_with_lambda, lambda t: (t(4),)),
    (s_sizes, lambda t: (t(2, 5, 3),)),
    (s_tensors_by_size, lambda t: ([t(3), t(1), t(2)],)),
    (s_tensors_by_lambda_of_shape, lambda t: ([t(2, 3), t(4), t(2, 5), t(1)],)),
    (s_dict_keys, lambda t: (t(4),)),
    (s_list_sort_with_key, lambda t: (t(5),)),
    (s_argument_list_sorted_with_key, lambda t: ([t(2), t(3), t(1)],)),
    (s_empty_and_single, lambda t: (t(4),)),
]

# Sorting constants with a builtin key or none folds at trace time, as it did before keys were traced.
CONSTANT_SORTING_FUNCTIONS = [s_constant_list_with_key, s_list_sort_in_place, s_key_builtin_abs, s_key_none]


@pytest.mark.parametrize(("fn", "make"), SORTING_FUNCTIONS, ids=lambda v: getattr(v, "__name__", ""))
def test_sorting_is_traced(check, t, fn, make):
    assert break_reasons(check, fn, *make(t), graphs=1) == []


@pytest.mark.parametrize("fn", CONSTANT_SORTING_FUNCTIONS, ids=lambda f: f.__name__)
def test_sorting_constants_folds(check, t, fn):
    args = (t(6), [1, 4, 2]) if fn is s_list_sort_in_place else (t(4),)
    assert break_reasons(check, fn, *args, graphs=1) == []


def s_tensors_by_value(a, b):
    return sorted([a, b], reverse=True)


def s_key_is_a_tensor(xs):
    return sorted(xs, key=lambda t: t.sum())


def s_list_sort_of_tensors(a, b):
    items = [a, b]
    items.sort()
    return items


@pytest.mark.parametrize("fn", [s_tensors_by_value, s_list_sort_of_tensors], ids=lambda f: f.__name__)
def test_sorting_tensors_by_value_is_a_graph_break(check, t, fn):
    reasons = break_reasons(check, fn, t(1), t(1))
    assert reasons == ["sorting tensors compares their values, which needs their data"]


def test_a_key_computing_a_tensor_is_a_graph_break(check, t):
    reasons = break_reasons(check, s_key_is_a_tensor, [t(3), t(3), t(3)])
    assert reasons == ["sorting tensors compares their values, which needs their data"]


def s_incomparable(x):
    return x + sorted([3, None, 1])[0]


def s_bad_keyword(x):
    return x * sorted([2, 1], cmp=None)[0]


def s_list_sort_positional(x):
    items = [2, 1]
    items.sort(None)
    return x * items[0]


@pytest.mark.parametrize("fn", [s_incomparable, s_bad_keyword, s_list_sort_positional], ids=lambda f: f.__name__)
def test_sorting_errors_are_raised_as_in_eager(check, t, fn):
    check(fn, t(4), graphs=0)


def test_sorted_symbolic_sizes_are_guarded(t):
    counter = CompileCounter()
    compiled = capture.optimize(counter, dynamic=True)(s_sizes)
    for shape in [(2, 5, 3), (3, 7, 4), (1, 9, 2), (5, 2, 3)]:
        x = torch.randn(*shape)
        got, want = compiled(x), s_sizes(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
    # The first two shapes order their sizes alike; the third has a size 1 (specialised, its own graph); the
    # fourth orders them differently.
    assert counter.frame_count == 3
