"""functools while tracing: ``reduce`` takes items as Python's does, ``lru_cache``/``cache`` functions called with
constants are served by their cache (more in ``test_sym_cached_functions``), ``wraps`` copies names.

Each program runs eagerly and compiled with ``fullgraph=True`` on the same inputs, values or raised errors
compared, and is one graph.
"""

import functools

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _same(fn, *args):
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(fn)
    expected, actual = fn(*args), compiled(*args)
    for e, a in zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(actual), strict=True):
        torch.testing.assert_close(a, e) if isinstance(e, torch.Tensor) else None
        assert type(a) is type(e) and (isinstance(e, torch.Tensor) or a == e)
    assert counter.frame_count == 1
    capture.reset()


def test_reduce_over_tensors_with_and_without_an_initial_value():
    x = torch.randn(3)
    _same(lambda t: functools.reduce(lambda a, b: a * 2 + b, [t, t + 1, t - 2]), x)
    _same(lambda t: functools.reduce(torch.add, (t, t), t * 10), x)
    _same(lambda t: functools.reduce(lambda a, b: a + b, [], t) * 2, x)
    _same(lambda t: t * functools.reduce(lambda a, b: a * b, range(1, 5)), x)


def test_reduce_takes_items_lazily_from_a_generator():
    def fn(t, log):
        def produce():
            for k in range(3):
                log.append(k)
                yield t + k

        def combine(a, b):
            log.append("combine")
            return a + b

        return functools.reduce(combine, produce())

    x = torch.randn(2)
    eager_log, compiled_log = [], []
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(fn)
    torch.testing.assert_close(compiled(x, compiled_log), fn(x, eager_log))
    assert compiled_log == eager_log == [0, 1, "combine", 2, "combine"]
    capture.reset()


def test_reduce_of_an_empty_iterable_without_an_initial_value_raises_typeerror():
    fn = lambda t: functools.reduce(lambda a, b: a + b, [])
    with pytest.raises(TypeError, match="empty"):
        fn(torch.ones(1))
    with pytest.raises(TypeError, match="empty"):
        capture.optimize(CompileCounter())(fn)(torch.ones(1))
    capture.reset()


@functools.lru_cache(maxsize=8)
def _doubled(n):
    return n * 2


@functools.cache
def _scaled(k, offset=0):
    return k * 10 + offset


def test_lru_cache_and_cache_functions_called_with_constants_are_one_graph():
    x = torch.randn(4)
    _same(lambda t: t * _doubled(3) + _doubled(1), x)
    _same(lambda t: _scaled(3, offset=1) + t, x)


def test_wraps_keeps_the_wrapped_function_callable():
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args) + 1

        return wrapper

    @decorate
    def body(t):
        return t * 2

    _same(lambda t: (body(t), body.__name__), torch.randn(3))


@pytest.mark.parametrize("wrapped", [torch.sin, torch.Tensor.cos, torch.nn.functional.relu], ids=lambda f: f.__name__)
def test_wraps_of_a_torch_function_reads_the_attributes_it_has(wrapped):
    # A builtin lacks `__wrapped__` and `__dict__`, which `wraps` reads in a try block: the missing attribute
    # raised out of the trace, and the frame ran eagerly.
    def fn(t):
        @functools.wraps(wrapped)
        def shifted(x):
            return wrapped(x) + 1

        return shifted(t) * 2, shifted.__name__, shifted.__doc__ == wrapped.__doc__

    _same(fn, torch.randn(3))
