"""Generators called from traced code run lazily: each item is computed when the consumer asks for it.

A ``for`` loop over a generator whose body reads a variable or a tensor the
loop re-binds or mutates must see the new state at each step, as in Python; a
generator consumed part-way runs only that far.
"""

import pytest
import torch

import dynajit.capture as capture

pytestmark = pytest.mark.filterwarnings("error:dynajit:RuntimeWarning")


def loop_rebinds_what_the_generator_reads(x):
    for t in (x * k for k in range(3)):
        x = x + t
    return x


def loop_mutates_what_the_generator_reads(x):
    x = x.clone()
    for t in (x * k for k in range(1, 4)):
        x.add_(t)
    return x


def generator_with_effects(x, log):
    def produce():
        for k in range(5):
            log.append(k)
            yield x * k

    items = produce()
    first = next(items)
    second = next(items)
    return first + second


def generator_consumed_whole(x):
    return sum(x * k for k in range(3)), torch.stack(list(x + k for k in range(2)))


def generator_in_zip(x):
    return [a + b for a, b in zip((x * k for k in range(3)), [x, x * 2, x * 3])]


def interleaved_generators(x, log):
    def produce(tag):
        for k in range(3):
            log.append((tag, k))
            yield x + k

    pairs = []
    for a, b in zip(produce("a"), produce("b")):
        pairs.append(a * b)
    return pairs


def generator_loop_with_break(x):
    for t in (x * k for k in range(3)):
        x = x + t
        print(end="")  # not resumable with a generator part-way: the frame runs in Python
    return x


@pytest.mark.parametrize(
    "fn",
    [
        loop_rebinds_what_the_generator_reads,
        loop_mutates_what_the_generator_reads,
        generator_consumed_whole,
        generator_in_zip,
    ],
)
def test_generators_are_lazy(check, t, fn):
    check(fn, t(3), graphs=1, calls=2)


def test_generator_effects_happen_when_items_are_asked_for(check, t):
    check(generator_with_effects, t(3), [], graphs=1, calls=2)


def test_zip_interleaves_generators(check, t):
    check(interleaved_generators, t(3), [], graphs=1, calls=2)


def test_break_in_a_loop_over_a_generator_is_reported(check, t):
    with capture.observe() as seen:
        check(generator_loop_with_break, t(3), calls=2)
    reasons = [b.reason for f in seen.frames for b in f.graph_breaks]
    assert any("loop over a generator cannot be resumed" in r for r in reasons), reasons


def generator_branching_on_a_tensor(x):
    def produce():
        for k in range(3):
            if (x * k).sum() > 0:  # a tensor condition inside the generator, reached from the loop's FOR_ITER
                yield x * k
            else:
                yield x - k

    total = x
    for t in produce():
        total = total + t
    return total


def test_tensor_branch_inside_a_generator(check):
    gen = torch.Generator().manual_seed(2)
    check(generator_branching_on_a_tensor, calls=4, make_args=lambda: (torch.randn(3, generator=gen),))
