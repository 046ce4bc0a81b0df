"""Iterators over lists read the list as it is at each step, and an iterator the frame holds by name is one
object, however many loops and calls advance it: with and without a graph break inside the loop, compiled code
takes the items Python takes. Each a differential against eager (every case here returned other numbers)."""

from __future__ import annotations

import pytest


def _break():
    print(end="")  # a graph break


def reversed_list_shrunk(x, broken):
    # Python's reversed() holds an index into the list: once the list is shorter than it, the loop ends
    items = [1, 2, 3, 4]
    for i in reversed(items):
        x = x * 2 + i
        if broken:
            _break()
        if i == 4:
            items.pop(0)
            items.pop(0)
    return x


def reversed_list_replaced(x, broken):
    items = [1, 2, 3]
    for i in reversed(items):
        x = x * 2 + i
        if broken:
            _break()
        items[0] = 10
    return x


def zip_over_a_list_the_body_changes(x, broken):
    firsts, seconds = [1, 2, 3], [4, 5, 6]
    for i, j in zip(firsts, seconds):
        x = x + i * j
        if broken:
            _break()
        firsts.append(7)
        seconds.pop()
    return x


def enumerate_over_a_list_grown_in_front(x, broken):
    items = [1, 2, 3]
    for i, v in enumerate(items):
        x = x + v * i
        if broken:
            _break()
        if i == 0:
            items.insert(0, 50)
    return x


def named_iterator_advanced_in_its_loop(x, broken):
    it = iter(range(5))
    for v in it:
        x = x + v
        if broken:
            _break()
        next(it, None)
    return x


def named_list_iterator_advanced_in_its_loop(x, broken):
    items = [x, x + 1, x * 2, x - 3]
    it = iter(items)
    for v in it:
        x = x * 2 + v
        if broken:
            _break()
        next(it, None)
    return x


def zip_of_a_named_iterator(x, broken):
    it = iter((1, 2, 3, 4))
    for a, b in zip(it, (10, 20)):
        x = x + a * b
        if broken:
            _break()
        next(it, None)
    return x, list(it)


def zip_over_a_list_the_body_clears(x, broken):
    # the second list iterator is past the end of its cleared list: zip ends, it does not raise StopIteration
    firsts, seconds = [x, x + 1, x], [x, x, x, x]
    for v, w in zip(firsts, seconds):
        x = x + v - w
        seconds.clear()
        if broken:
            _break()
    return x


def list_loop_past_the_end_of_a_shrunk_list_that_grows_again(x, broken):
    # an iterator past the end is not yet exhausted: the list growing past its position revives it
    items = [x, x + 1, x + 2]
    steps = 0
    for v in items:
        x = x + v
        steps += 1
        if steps == 2:
            items.clear()
            if broken:
                _break()
            items.extend([x, x * 2, x * 3])
    return x * steps


def named_iterator_past_the_end_of_a_shrunk_list(x, broken):
    items = [x, x, x]
    it = iter(items)
    next(it)
    next(it)
    items.clear()
    if broken:
        _break()
    items.extend([x + 1, x + 2, x + 3])
    return next(it)


def exhausted_list_iterator_ignores_later_appends(x, broken):
    # once a list iterator has ended it lets go of its list for good
    items = [x]
    it = iter(items)
    taken = list(it)
    items.append(x + 1)
    if broken:
        _break()
    return next(it, x * 0), len(taken)


SHARED = [1, 2, 3]


def zip_over_a_global_list(x, broken):
    for a, b in zip(SHARED, (1, 2, 3)):
        x = x + a * b
        if broken:
            _break()
        SHARED[-1] = 30
    SHARED[-1] = 3
    return x


@pytest.mark.parametrize("broken", [False, True], ids=["one_graph", "graph_break"])
@pytest.mark.parametrize(
    "fn",
    [
        reversed_list_shrunk,
        reversed_list_replaced,
        zip_over_a_list_the_body_changes,
        enumerate_over_a_list_grown_in_front,
        named_iterator_advanced_in_its_loop,
        named_list_iterator_advanced_in_its_loop,
        zip_of_a_named_iterator,
        zip_over_a_global_list,
        zip_over_a_list_the_body_clears,
        list_loop_past_the_end_of_a_shrunk_list_that_grows_again,
        named_iterator_past_the_end_of_a_shrunk_list,
        exhausted_list_iterator_ignores_later_appends,
    ],
)
def test_a_loop_takes_the_items_python_takes(check, t, fn, broken):
    check(fn, t(3), broken, calls=2)


def over_a_new_list_zipped(x):
    for scale, shift in zip((1.0, 2.0), [x, x + 1]):
        x = x * scale + shift
        _break()
    return x


def test_a_loop_over_a_list_no_one_else_holds_still_compiles_each_segment(check, t):
    check(over_a_new_list_zipped, t(3), graphs=2, calls=2)
