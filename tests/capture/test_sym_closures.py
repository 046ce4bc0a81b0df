"""Graph breaks in closures and in functions whose variables are captured by inner functions."""

import pytest
import torch

SINK = []


def opaque(value):
    SINK.append(id(value) > 0)  # id() of a tensor is not traced: a graph break
    return value


def make_scaled(scale):
    def scaled(x):
        y = x * scale
        opaque(y)
        return y + scale

    return scaled


def captured_by_inner(x):
    offset = x.sum()

    def shift(v):
        return v + offset

    y = shift(x)
    opaque(y)
    return shift(y) * 2


def closure_branch(factor):
    def branch(x):
        if x.sum() > 0:
            return x * factor
        return x - factor

    return branch


def test_break_in_closure(check, t):
    check(make_scaled(3.0), t(4), graphs=2)


def test_two_closures_over_different_cells_do_not_mix(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    counter = CompileCounter()
    x = t(4)
    for scale in (2.0, 5.0):
        fn = make_scaled(scale)
        torch.testing.assert_close(capture.optimize(counter)(fn)(x), fn(x))


def test_break_with_cell_variables(check, t):
    check(captured_by_inner, t(4), graphs=2)


def test_tensor_branch_in_closure(check, t):
    gen = torch.Generator().manual_seed(5)
    check(closure_branch(2.0), calls=6, make_args=lambda: (torch.randn(4, generator=gen),))


def counted_across_a_break(x):
    calls = 0

    def count():
        nonlocal calls
        calls += 1

    count()
    opaque(x)
    count()
    return x * calls


def counted_after_a_break(x):
    calls = [0, 0]

    def count(i):
        nonlocal calls
        calls = [*calls[:i], calls[i] + 1, *calls[i + 1 :]]

    opaque(x)
    count(1)
    return x * calls[1] - calls[0]


def rebound_around_a_break(x):
    n = 0

    def read():
        return n

    n = 5
    opaque(x)
    n = 7
    return x * read()


def written_on_both_sides(x):
    n = 1

    def add(k):
        nonlocal n
        n += k

    add(2)
    opaque(x)
    n *= 10
    add(4)
    return x * n, n


@pytest.mark.parametrize(
    "fn", [counted_across_a_break, counted_after_a_break, rebound_around_a_break, written_on_both_sides]
)
def test_a_cell_after_a_break_is_the_one_its_closures_hold(check, t, fn):
    # The resume function made new cells from the values passed in, which a closure made before the break
    # never saw: its `nonlocal` writes were lost, and the frame's writes never reached it. The closure, made
    # anew at each call, is guarded by its code: the second call reuses the first's resume entry.
    check(fn, t(4), graphs=1, calls=2)


def counter_pair():
    n = 0

    def increment():
        nonlocal n
        n += 1

    def scaled(x):
        increment()
        return x * n

    return scaled


def test_a_frame_and_a_function_over_the_same_cell_see_each_others_writes(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    eager, compiled = counter_pair(), capture.optimize(CompileCounter(), fullgraph=True)(counter_pair())
    x = t(4)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), eager(x))
