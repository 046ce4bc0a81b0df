"""``functools.lru_cache``/``functools.cache`` functions called while tracing: the cache serves as in eager.

Eager runs a cached function's body once per distinct arguments and returns the cached object afterwards. Each
program here runs eagerly, then (the caches cleared and the seeds reset) compiled, over several calls; values,
effects and the number of body runs are compared call by call.
"""

import functools

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    capture.reset()
    yield
    capture.reset()


def _run_both(fn, calls, clear, fullgraph=True):
    """fn's results over ``calls`` argument tuples, eager then compiled; ``clear()`` resets the state in between."""
    results = []
    counter = CompileCounter()
    for run in (fn, capture.optimize(counter, fullgraph=fullgraph)(fn)):
        clear()
        torch.manual_seed(0)
        results.append([run(*args) for args in calls])
    return results, counter


def _same(expected, actual):
    for e, a in zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(actual), strict=True):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a, e)
        else:
            assert type(a) is type(e) and a == e


def _break_reasons(fn, *args):
    with capture.observe() as seen:
        capture.optimize(CompileCounter())(fn)(*args)
    return [b.reason for frame in seen.frames for b in frame.graph_breaks]


BODY_RUNS = []


@functools.lru_cache(maxsize=8)
def _logged_double(n):
    BODY_RUNS.append(n)
    return n * 2


def test_the_body_runs_once_per_arguments_as_in_eager_not_on_every_compiled_call():
    def fn(x):
        return x + _logged_double(x.shape[0])

    calls = [(torch.ones(4),), (torch.ones(5),), (torch.ones(4),), (torch.ones(5),)]
    runs = []

    def clear():
        runs.append(list(BODY_RUNS))
        BODY_RUNS.clear()
        _logged_double.cache_clear()

    (eager, compiled), counter = _run_both(fn, calls, clear)
    clear()
    _same(eager, compiled)
    assert runs[1] == runs[2] == [4, 5]
    assert counter.frame_count == 2  # one graph per size, no break


@functools.cache
def _noise(n):
    return torch.randn(n)


def test_a_cached_random_tensor_is_the_same_tensor_on_every_call():
    def fn(x):
        return x + _noise(4)

    calls = [(torch.zeros(4),)] * 3
    (eager, compiled), _ = _run_both(fn, calls, _noise.cache_clear)
    _same(eager, compiled)
    torch.testing.assert_close(compiled[0], compiled[2])  # a fresh draw per call would differ


@functools.cache
def _accumulator(n):
    return torch.zeros(n)


def test_a_cached_tensor_written_in_place_keeps_what_each_call_wrote():
    def fn(x):
        acc = _accumulator(3)
        acc.add_(x)
        return acc * 1

    calls = [(torch.tensor([1.0, 2.0, 3.0]),)] * 3
    (eager, compiled), counter = _run_both(fn, calls, _accumulator.cache_clear)
    _same(eager, compiled)
    torch.testing.assert_close(compiled[2], torch.tensor([3.0, 6.0, 9.0]))
    assert counter.frame_count == 1


MODE = {"scale": 2}


@functools.lru_cache
def _scale_of(kind, *, offset=0):
    return MODE["scale"] + offset


def test_a_cleared_cache_is_computed_again_and_the_compiled_call_follows():
    def fn(x):
        return x * _scale_of("a", offset=1)

    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(fn)
    x = torch.ones(2)
    _scale_of.cache_clear()
    torch.testing.assert_close(compiled(x), x * 3)
    MODE["scale"] = 5  # eager still serves 3 from the cache
    torch.testing.assert_close(compiled(x), fn(x))
    _scale_of.cache_clear()  # now eager computes 6
    torch.testing.assert_close(compiled(x), x * 6)
    torch.testing.assert_close(compiled(x), fn(x))
    assert counter.frame_count == 2
    MODE["scale"] = 2


@functools.cache
def _halved(n):
    return n / 2


@functools.cache
def _tripled(n):
    return n * 3


def test_rebinding_the_name_to_another_cached_function_recompiles():
    table = {"op": _halved}

    def fn(x):
        return x * table["op"](4)

    counter = CompileCounter()
    compiled = capture.optimize(counter)(fn)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), x * 2)
    table["op"] = _tripled
    torch.testing.assert_close(compiled(x), x * 12)
    assert counter.frame_count == 2


@functools.cache
def _checked(n):
    if n < 0:
        raise ValueError("negative size")
    return n


def test_a_cached_function_that_raises_raises_in_the_compiled_call():
    def fn(x, n):
        return x * _checked(n)

    compiled = capture.optimize(CompileCounter())(fn)
    with pytest.raises(ValueError, match="negative size"):
        fn(torch.ones(1), -1)
    with pytest.raises(ValueError, match="negative size"):
        compiled(torch.ones(1), -1)


@functools.cache
def _by_tensor(t):
    return t * 2


def test_a_cached_function_given_a_tensor_is_a_graph_break_and_serves_its_cached_tensor():
    def fn(x):
        return _by_tensor(x) + 1

    x = torch.randn(3)
    reasons = _break_reasons(fn, x)
    assert any("lru_cache" in r and "not constants" in r for r in reasons), reasons
    first = _by_tensor(x)
    capture.reset()
    out = capture.optimize(CompileCounter())(lambda t: _by_tensor(t))(x)
    assert out is first  # eager's cache answered


STATE = {"k": 1}


@functools.cache
def _read_state():
    return STATE["k"]


def test_a_call_after_an_unwritten_change_is_a_graph_break_and_reads_the_change():
    def fn(x):
        STATE["k"] = 7  # written back after the graph; the body must read it
        return x * _read_state()

    (eager, compiled), _ = _run_both(fn, [(torch.ones(2),)] * 2, _read_state.cache_clear, fullgraph=False)
    _same(eager, compiled)
    torch.testing.assert_close(compiled[0], torch.full((2,), 7.0))
    _read_state.cache_clear()
    STATE["k"] = 1
    reasons = _break_reasons(fn, torch.ones(2))
    assert any("after the trace changed a Python object" in r for r in reasons), reasons


@functools.cache
def _draw():
    return torch.rand(())


def test_a_call_after_the_graph_drew_random_numbers_keeps_eagers_order_of_draws():
    def fn(x):
        y = x + torch.rand(2)
        return y * _draw()

    (eager, compiled), _ = _run_both(fn, [(torch.ones(2),)] * 2, _draw.cache_clear, fullgraph=False)
    _same(eager, compiled)
    _draw.cache_clear()
    reasons = _break_reasons(fn, torch.ones(2))
    assert any("random numbers" in r for r in reasons), reasons
