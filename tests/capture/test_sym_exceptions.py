"""PYTEST_DONT_REWRITE: exceptions raised and caught inside traced code are traced through the frame's exception table.

A KeyError from a dict lookup, an exhausted ``next()``, an IndexError, an
AttributeError of an object made in the frame or a ``raise`` of an exception
made from constants goes to the handler that covers it, in the frame that
raised it or in a caller it was inlined into, with no graph break. One that no
traced frame catches leaves the graph cut there and Python raises it itself.
"""

import collections.abc

import pytest
import torch

import dynajit.capture as capture

pytestmark = pytest.mark.filterwarnings("error:dynajit:RuntimeWarning")


def dict_key_caught(x, d):
    try:
        y = x * d["missing"]
    except KeyError:
        y = x + 1
    return y * 2


class Registry(collections.abc.MutableMapping):
    def __init__(self):
        self._items = {"sin": torch.sin}

    def __getitem__(self, key):
        return self._items[key]

    def __setitem__(self, key, value):
        self._items[key] = value

    def __delitem__(self, key):
        del self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


REGISTRY = Registry()


def mapping_get_default(x, d):
    return REGISTRY.get("eager", torch.cos)(x) + REGISTRY.get("sin")(x)


class Point:
    def __init__(self, v):
        self.v = v


def getattr_raising_caught(x, d):
    p = Point(x)
    try:
        y = p.missing
    except AttributeError as e:
        y = x * len(e.args)
    return y + p.v


def helper_raises(x, key):
    if key == "bad":
        raise ValueError("bad key", key)
    return x + 1


def helper_catches(x):
    try:
        return helper_raises(x, "bad")
    except ValueError as e:
        return x * len(e.args)


def inlined_raise_and_catch(x, d):
    return helper_catches(x) + 1


def raised_to_caller(x, d):
    try:
        y = helper_raises(x, "bad")
    except (TypeError, ValueError) as e:
        y = x - len(e.args[0])
    return y


def reraise_to_caller_handler(x, d):
    def inner(v):
        try:
            return v * d["nope"]
        except KeyError:
            v.add_(1)
            raise

    try:
        return inner(x)
    except LookupError as e:
        return x * 3 + len(e.args)


def finally_both_paths(x, d):
    log = []
    for key in ("a", "missing"):
        try:
            try:
                x = x * d[key]
            finally:
                log.append(key)
        except KeyError:
            x = x - 1
    return x, log


def exception_variable_cleared(x, d):
    e = 1
    try:
        raise KeyError("k")
    except KeyError as e:  # noqa: F841
        x = x + 1
    try:
        return e
    except UnboundLocalError:
        return x * 2


def nested_try(x, d):
    try:
        try:
            y = d["missing"]
        except IndexError:
            y = x * 100
        finally:
            x = x + 1
    except KeyError as e:
        y = x * 2 if e.args == ("missing",) else x
    return y


def next_stop_iteration(x, d):
    it = iter([x, x * 2])
    total = next(it) + next(it)
    try:
        total = total + next(it)
    except StopIteration:
        total = total * 3
    return total


def loop_try_continue(x, d):
    out = x
    for key in ("a", "missing", "b", "other"):
        try:
            value = d[key]
        except KeyError:
            continue
        out = out * value
    return out


def index_error_caught(x, d):
    items = [x, x + 1]
    try:
        y = items[5]
    except IndexError as e:
        y = x * 2 if str(e) == "list index out of range" else x
    return y


def raise_from_caught(x, d):
    try:
        try:
            d["missing"]
        except KeyError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        x = x + len(str(e))
    return x


def assert_caught(x, d):
    try:
        assert len(d) == 0, "not empty"
    except AssertionError as e:
        x = x * len(e.args[0])
    return x


def with_block_exception(x, d):
    try:
        with torch.no_grad():
            y = x * 2
            d["missing"]
    except KeyError:
        y = y + 1
    return y, y.requires_grad, torch.is_grad_enabled()


CAUGHT = [
    dict_key_caught,
    mapping_get_default,
    getattr_raising_caught,
    inlined_raise_and_catch,
    raised_to_caller,
    reraise_to_caller_handler,
    finally_both_paths,
    exception_variable_cleared,
    nested_try,
    next_stop_iteration,
    loop_try_continue,
    index_error_caught,
    raise_from_caught,
    assert_caught,
    with_block_exception,
]


@pytest.mark.parametrize("fn", CAUGHT, ids=lambda f: f.__name__)
def test_caught_in_one_graph(check, t, fn):
    x = t(3).requires_grad_() if fn is with_block_exception else t(3)
    with capture.observe() as seen:
        check(fn, x, {"a": 2.0, "b": 3.0}, graphs=1, fullgraph=True, calls=2)
    assert not [b for f in seen.frames for b in f.graph_breaks]
    assert torch.is_grad_enabled()


def escapes(x, d):
    y = x * 2
    try:
        return y * d["missing"]
    except IndexError:
        return y


def escapes_from_handler(x, d):
    y = x * 2
    try:
        return y * d["missing"]
    except KeyError as e:
        raise ValueError(f"no {e.args[0]}") from e


def escapes_inlined(x, d):
    return helper_raises(x * 2, "bad")


@pytest.mark.parametrize("fn", [escapes, escapes_from_handler, escapes_inlined], ids=lambda f: f.__name__)
def test_escaping_exception_is_eagers(check, t, fn):
    # The graph runs up to the raise; Python raises the same exception (type and message).
    check(fn, t(3), {"a": 2.0}, graphs=1, calls=2)


def test_escaping_exception_under_fullgraph(check, t):
    check(escapes_from_handler, t(3), {"a": 2.0}, graphs=1, calls=2, fullgraph=True)


def test_guarded_key_recompiles(check, t):
    # The missing key is guarded: once present, the lookup succeeds and the frame is converted again.
    counter = check(dict_key_caught, t(3), {"a": 2.0}, graphs=1, fullgraph=True)
    compiled = capture.optimize(counter, fullgraph=True)(dict_key_caught)
    x = t(3)
    torch.testing.assert_close(compiled(x, {"missing": 5.0}), dict_key_caught(x, {"missing": 5.0}))
    assert counter.frame_count == 2


def brk():
    print(end="")


def break_in_handler(x, d):
    try:
        y = x * d["missing"]
    except KeyError as e:
        y = x + 1
        brk()
        y = y * len(e.args)
    return y


def break_then_bare_raise(x, d):
    try:
        y = x * d["missing"]
    except KeyError:
        x.add_(1)
        brk()
        raise
    return y


def break_in_finally(x, d):
    try:
        y = x * d["missing"]
    finally:
        brk()
        x.mul_(2)
    return y


@pytest.mark.filterwarnings("ignore:dynajit:RuntimeWarning")
@pytest.mark.parametrize("fn", [break_in_handler, break_then_bare_raise, break_in_finally], ids=lambda f: f.__name__)
def test_break_inside_handler(check, t, fn):
    # Python's exception state (a bare raise, sys.exc_info) is set only where Python raised the exception:
    # the graph is cut at the raise and the handler runs there, with its own break.
    check(fn, t(3), {"a": 2.0}, calls=2)


class CustomError(ValueError):
    pass


class WrappingError(ValueError):
    def __init__(self, what):
        super().__init__(f"wrapped {what}")


def custom_class_caught(x, d):
    try:
        raise CustomError("custom", 2)
    except ValueError as e:
        return x * e.args[1]


def custom_init_args(x, d):
    try:
        raise WrappingError("w")
    except WrappingError as e:
        return x, e.args


def test_user_exception_class(check, t):
    check(custom_class_caught, t(3), {}, graphs=1, fullgraph=True, calls=2)


@pytest.mark.filterwarnings("ignore:dynajit:RuntimeWarning")
def test_user_init_args_are_pythons(check, t):
    # An exception class with its own __init__: its args are what that __init__ passed on, so Python says.
    check(custom_init_args, t(3), {}, calls=2)


def pairs(x, stop):
    yield x
    if stop:
        next(iter(()))  # StopIteration inside a generator: Python raises RuntimeError instead
    raise KeyError("from generator")


def generator_raises_to_consumer(x, d):
    out = x
    try:
        for v in pairs(x, False):
            out = out + v
    except KeyError as e:
        out = out * len(e.args)
    return out


def generator_stop_iteration(x, d):
    out = x
    try:
        for v in pairs(x, True):
            out = out + v
    except StopIteration:
        out = out * 5
    except RuntimeError:
        out = out * 7
    return out


def test_generator_raises_to_consumer(check, t):
    check(generator_raises_to_consumer, t(3), {}, graphs=1, fullgraph=True, calls=2)


@pytest.mark.filterwarnings("ignore:dynajit:RuntimeWarning")
def test_stop_iteration_in_generator_is_runtime_error(check, t):
    check(generator_stop_iteration, t(3), {}, calls=2)


def current_exception(x, d):
    import sys

    try:
        d["missing"]
    except KeyError:
        handled = sys.exception()
        x = x * len(handled.args)
    return x


def test_sys_exception_in_handler(check, t):
    check(current_exception, t(3), {}, graphs=1, fullgraph=True, calls=2)


def untraced_error_in_nested_finally(x, ws):
    log = []
    for w in ws:
        try:
            try:
                x = x @ w  # a shape error from a tensor op: raised in Python, its handlers run there
            finally:
                log.append(1)
        except RuntimeError:
            x = x - 1
    return x, log


@pytest.mark.filterwarnings("ignore:dynajit:RuntimeWarning")
def test_untraced_error_in_nested_finally_in_loop(check, t):
    # The raise-resume function raises into the finally handler from its prologue: its call sites are
    # intercepted with the table's own region depths (recomputing them crashed the interpreter).
    check(untraced_error_in_nested_finally, t(3), [t(3, 3), t(4, 4)], calls=2)
