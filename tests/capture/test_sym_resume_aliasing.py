"""A local bound to another local's value, across a graph break: each keeps its own value.

After ``residual = hidden_states`` the traced value of ``residual`` is reached
through ``L['hidden_states']`` (the frame's entry value). When ``hidden_states``
is re-bound before the break, the transformed code must read that path before
storing the new ``hidden_states``, whatever the names' order; the same holds
for the stack, cells, and attributes rewritten by side effects.
"""

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("error:dynajit:RuntimeWarning")

torch.manual_seed(0)
NORM = torch.nn.LayerNorm(4)
LIN = torch.nn.Linear(4, 4)


def brk():
    print(end="")  # a graph break with no effect on the values


def decoder_block(hidden_states):
    residual = hidden_states
    hidden_states = NORM(hidden_states)
    brk()
    hidden_states = LIN(hidden_states)
    return residual + hidden_states


def alias_sorted_after(a):
    # the alias sorts after the re-bound name
    z = a
    a = a.sin()
    brk()
    return z * 10 + a


def alias_sorted_before(x):
    # the alias sorts before the re-bound name
    b = x
    x = x.cos()
    brk()
    return b * 10 + x


def two_aliases_chain(x):
    y = x
    w = y
    x = x + 1
    y = y * 2
    brk()
    return x, y, w


def swapped(p, q):
    p, q = q, p
    brk()
    return p - 2 * q


def swapped_computed(p, q):
    p, q = q * 3, p
    brk()
    return p - 2 * q


def rotated(a, b, c):
    a, b, c = c, a, b
    brk()
    return a + 10 * b + 100 * c


def rebound_after_break(x):
    r = x
    brk()
    x = x * 3
    return r + x


def rebound_in_resume_function(x):
    # a second break inside the resume function, with its own aliasing
    r = x
    x = NORM(x)
    brk()
    h = x
    x = LIN(x)
    brk()
    return r + h * 2 + x * 3


def non_tensor_aliases(x, items, n):
    orig = items
    items = [*items, x * 2]
    k = n
    n = n + 1
    brk()
    return len(orig), len(items), k, n, items[-1] + orig[0]


def list_alias_mutated(x, items):
    orig = items
    items = []
    orig.append(x + 1)
    items.append(x)
    brk()
    return orig, items


def alias_on_the_stack(x):
    y = x
    x = x.sin()
    return torch.add(y, record(x))


def record(value):
    brk()
    return value


class Holder:
    def __init__(self, t):
        self.t = t


def attribute_read_then_written(x, obj):
    old = obj.t
    obj.t = x * 2
    brk()
    return old + obj.t


def alias_in_closure(x):
    y = x
    x = x + 1

    def read():
        return x * 5

    brk()
    return read() + y


def inlined_decoder(x):
    return decoder_block(x) * 2 + 1


def branch_after_alias(x):
    residual = x
    x = NORM(x)
    if x.sum() > 0:
        x = x + 1
    else:
        x = x - 1
    return residual * 10 + x


def alias_in_loop(x):
    acc = x
    for _ in range(3):
        prev = acc
        acc = LIN(acc)
        brk()
        acc = acc + prev
    return acc


@pytest.mark.parametrize(
    "fn",
    [
        decoder_block,
        alias_sorted_after,
        alias_sorted_before,
        two_aliases_chain,
        rebound_after_break,
        rebound_in_resume_function,
        alias_on_the_stack,
        alias_in_closure,
        inlined_decoder,
        alias_in_loop,
    ],
)
def test_one_tensor(check, t, fn):
    check(fn, t(2, 4), calls=2)


@pytest.mark.parametrize("fn", [swapped, swapped_computed])
def test_swaps(check, t, fn):
    check(fn, t(2, 4), t(2, 4), calls=2)


def test_rotation(check, t):
    check(rotated, t(4), t(4), t(4), calls=2)


def test_non_tensor_aliases(check, t):
    check(non_tensor_aliases, t(4), [t(4), t(4)], 3, calls=2)


def test_list_alias_mutated(check, t):
    check(list_alias_mutated, t(4), [t(4)], calls=2)


def test_attribute_read_then_written(check, t):
    check(attribute_read_then_written, t(4), Holder(t(4)), calls=2)


def test_branch_after_alias(check, t):
    gen = torch.Generator().manual_seed(5)
    check(branch_after_alias, calls=6, make_args=lambda: (torch.randn(2, 4, generator=gen),))


def test_decoder_block_graph_count(check, t):
    # the graph before the break and the one in the resume function
    check(decoder_block, t(2, 4), graphs=2)
