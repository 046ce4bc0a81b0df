"""Arguments that become one object after compiling: a write through one name must be seen through the other.

The trace tracks each list, dict and deque it reaches as its own object. Compiled on two different lists,
a call passing one list twice must still append twice and read its own appends, on every backend, as eager does;
so must keyword arguments and an argument that is also a global.
"""

from __future__ import annotations

import collections

import pytest
import torch

import dynajit.compiler as dc

BACKENDS = ("inductor", "aot_eager", "eager")


def _same_as_eager(fn, make, backend):
    """Compiled and eager, called on two objects apart, then on one object passed twice, give the same results
    and leave the arguments the same."""
    compiled = dc.compile(fn, backend=backend)
    for shared in (False, True):
        runs = []
        for call in (fn, compiled):
            a, b, x = make(shared)
            runs.append(repr((call(a, b, x), a, b)))
        assert runs[1] == runs[0], f"shared={shared}"


@pytest.fixture(params=BACKENDS)
def backend(request, fresh_compiler):
    return request.param


def test_one_list_passed_twice_appends_twice(backend):
    def f(left, right, x):
        left.append(x + 1)
        right.append(x - 1)
        return len(left) + len(right)

    def make(shared):
        a = []
        return a, (a if shared else []), torch.ones(2)

    _same_as_eager(f, make, backend)


def test_one_dict_passed_twice_reads_its_own_write(backend):
    def f(d1, d2, x):
        d1["k"] = x + 1
        return d2.get("k", x) * 2

    def make(shared):
        d = {}
        return d, (d if shared else {}), torch.ones(2)

    _same_as_eager(f, make, backend)


def test_one_deque_passed_twice(backend):
    def f(q1, q2, x):
        q1.append(x)
        return x + len(q2)

    def make(shared):
        q = collections.deque()
        return q, (q if shared else collections.deque()), torch.ones(2)

    _same_as_eager(f, make, backend)


def test_identity_of_two_lists_is_guarded(backend):
    def f(a, b, x):
        return x + 1 if a is b else x - 1

    def make(shared):
        a = [1]
        return a, (a if shared else [1]), torch.ones(2)

    _same_as_eager(f, make, backend)


def test_keyword_lists_that_become_one(backend):
    def f(x, **kw):
        kw["a"].append(1)
        return x + len(kw["b"])

    compiled = dc.compile(f, backend=backend)
    x = torch.ones(2)
    assert torch.equal(compiled(x, a=[], b=[]), f(x, a=[], b=[]))
    one, other = [], []
    assert torch.equal(compiled(x, a=one, b=one), f(x, a=other, b=other))
    assert one == other == [1]


SHARED_LOG: list = []


def test_argument_that_is_also_a_global(backend):
    def f(log, x):
        log.append(x)
        return x + len(SHARED_LOG)

    SHARED_LOG.clear()
    compiled = dc.compile(f, backend=backend)
    x = torch.ones(2)
    assert torch.equal(compiled([], x), f([], x))
    expected = f(SHARED_LOG, x)
    SHARED_LOG.clear()
    assert torch.equal(compiled(SHARED_LOG, x), expected)
    assert len(SHARED_LOG) == 1


def test_objects_apart_recompile_once_when_they_become_one(fresh_compiler):
    """The guard that keeps them apart fails only when they meet: other calls reuse the entry."""
    from dynajit.capture import observe

    def f(a, b, x):
        a.append(x)
        return x + len(b)

    compiled = dc.compile(f, backend="eager")
    x = torch.ones(2)
    with observe() as seen:
        for _ in range(3):
            compiled([], [], x)
    assert len(seen.frames) == 1
    shared = []
    assert torch.equal(compiled(shared, shared, x), x + 1)


class _WritesItsArgument(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(4))

    def forward(self, x):
        x.add_(1)
        return self.b * 2


class _WritesItsBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(4))

    def forward(self, x):
        self.b.add_(1)
        return x * 2


# The argument a call passes when it shares the buffer's memory: the buffer itself, or a view of part of it.
_PICKS = {"buffer": lambda module: module.b, "view": lambda module: module.b[1:3]}


@pytest.mark.parametrize("module", [_WritesItsArgument, _WritesItsBuffer])
@pytest.mark.parametrize("pick", sorted(_PICKS))
@pytest.mark.parametrize("shared_first", [False, True], ids=["apart-first", "shared-first"])
def test_a_buffer_passed_as_the_argument(backend, module, pick, shared_first):
    """The module's own buffer, or a view of it, as its argument on the first call or a later one: a write through
    either name is read through the other, as in eager. (A graph reading them as two tensors answered with the old
    value; one traced with them sharing memory read the buffer for another argument; one compiled for the buffer
    failed AOT autograd's duplicate-input assertion on another tensor.)"""
    eager, compiled_module = module(), module()
    compiled = dc.compile(compiled_module, backend=backend)
    for shared in (shared_first, not shared_first, shared_first):
        own = _PICKS[pick]
        expected = eager(own(eager) if shared else torch.ones_like(own(eager)))
        actual = compiled(own(compiled_module) if shared else torch.ones_like(own(compiled_module)))
        assert torch.equal(actual, expected), f"shared={shared}"
        assert torch.equal(compiled_module.b, eager.b), f"shared={shared}"
