"""Graph breaks: the graph so far is compiled, the step runs in Python, a resume function continues."""

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter

LOG = []


def record(value):
    capture.graph_break()
    LOG.append(value is not None)
    return value


def b_print_like(x):
    y = x + 1
    record(y)
    return y * 2


def b_marked_graph_break(x):
    y = x.sin()
    capture.graph_break()
    return y.cos()


def b_item(x):
    y = x * 2
    k = y.sum().item()
    return y + k


def inner_with_break(v):
    w = v * 3
    record(w)
    return w + 1


def b_break_inside_inlined(x):
    y = x - 1
    z = inner_with_break(y)
    return z * z


def b_nested_call_expression(x):
    return torch.add(x, record(x * 2)) + 1


def b_keyword_call(x):
    y = x.exp()
    out = dict_of(first=y, second=x)
    return out["first"] + out["second"]


def dict_of(**kw):
    capture.graph_break()
    LOG.append(len(kw))
    return kw


def b_live_python_values(x):
    items = [x, x + 1]
    cfg = {"k": 3}
    n = 5
    record(n)
    return items[1] * cfg["k"] + n


def b_tensor_condition_in_loop(x):
    for _ in range(3):
        if x.sum() > 0:
            x = x - 1
        else:
            x = x + 2
    return x


def b_branch_in_inlined(x):
    return sign_scale(x) + 1


def sign_scale(v):
    if v.mean() > 0:
        return v * 2
    return v * -2


def b_and_on_tensor(x):
    ok = bool(x.sum() > 0)
    return x + ok


def b_try_block(x):
    try:
        y = x + 1
        record(y)
    except ValueError:
        y = x
    return y * 2


def b_last_statement_of_a_try_raises(x):
    # The break is the try body's last instruction: the continuation after it is outside the block, but the
    # handler it raises into reads `kept`, which only the handler needs.
    kept = [x * 2]
    pair = ([1], [2])
    try:
        pair[0] += [3]  # extends the list, then raises: a tuple's item cannot be assigned
    except TypeError as error:
        return kept[0] + len(pair[0]), str(error)
    return x


def b_nested_handlers_read_their_own_locals(x):
    outer = x * 2
    try:
        inner = x * 3
        try:
            frozen = (1,)
            frozen[0] = 2
        except KeyError:
            return inner
    except TypeError:
        return outer + 1


def b_unsupported_builtin(x):
    y = x + 1
    ident = id(y)
    return y * (ident > 0)


def b_disabled_callee(x):
    return disabled_helper(x + 1) * 2


@capture.disable
def disabled_helper(v):
    return v.cos()


def test_break_on_unsupported_call_gives_two_graphs(check, t):
    check(b_print_like, t(4), graphs=2)


def test_graph_break_mark(check, t):
    check(b_marked_graph_break, t(4), graphs=2)


def test_item_breaks(check, t):
    check(b_item, t(4), graphs=2)


def test_break_inside_inlined_function_intercepts_the_callee(check, t):
    # outer graph, callee's graph before its break, callee's resume graph, outer resume graph
    check(b_break_inside_inlined, t(4), graphs=4)


def test_break_in_nested_call_expression(check, t):
    check(b_nested_call_expression, t(4), graphs=2)


def test_break_at_keyword_call(check, t):
    check(b_keyword_call, t(4), graphs=2)


def test_live_python_values_survive_the_break(check, t):
    check(b_live_python_values, t(4), graphs=2)


def test_tensor_condition_in_loop(check, t):
    gen = torch.Generator().manual_seed(3)
    check(b_tensor_condition_in_loop, calls=20, make_args=lambda: (torch.randn(4, generator=gen),))


def test_branch_inside_inlined_function(check, t):
    gen = torch.Generator().manual_seed(4)
    check(b_branch_in_inlined, calls=10, make_args=lambda: (torch.randn(4, generator=gen),))


def test_bool_of_tensor(check, t):
    check(b_and_on_tensor, t(4))


def test_break_in_try_block_resumes(check, t):
    # the graph before the break and the one in the resume function, which continues inside the try block
    check(b_try_block, t(4), graphs=2)


@pytest.mark.parametrize("fn", [b_last_statement_of_a_try_raises, b_nested_handlers_read_their_own_locals])
def test_a_break_raising_into_its_handler_keeps_the_handler_s_locals(check, t, fn):
    check(fn, t(4), calls=2)


def test_unsupported_builtin(check, t):
    check(b_unsupported_builtin, t(4), graphs=2)


def test_disabled_function_is_not_inlined(check, t):
    check(b_disabled_callee, t(4), graphs=2)


def test_resume_function_names_and_interception(t):
    from dynajit.capture._convert import convert_frame
    from dynajit.capture._frame import FrameContext

    intercepted = []

    def intercept(fn):
        intercepted.append(getattr(fn, "__name__", fn))
        return fn

    converted = convert_frame(b_print_like, (t(4),), FrameContext(backend=CompileCounter(), intercept=intercept))
    resumes = [name for name in converted.new_globals if name.startswith("__resume_at_")]
    assert len(resumes) == 1 and resumes[0] in intercepted
    (brk,) = converted.graph_breaks
    assert "graph_break" in brk.reason
    assert brk.user_stack[0].lineno == b_print_like.__code__.co_firstlineno + 2  # the call in the outer frame
    assert brk.user_stack[-1].name == "record"  # innermost last


def test_resume_code_is_reused_across_conversions(t):
    from dynajit.capture._convert import convert_frame
    from dynajit.capture._frame import FrameContext

    first = convert_frame(b_print_like, (t(4),), FrameContext(backend=CompileCounter()))
    second = convert_frame(b_print_like, (t(4),), FrameContext(backend=CompileCounter()))
    names = {n for n in first.new_globals if n.startswith("__resume")}
    assert names == {n for n in second.new_globals if n.startswith("__resume")}


def passed_through_a_break(value):
    print(end="")  # a break before the argument is read: nothing of it is guarded
    return value


def test_an_argument_read_only_after_a_break_is_not_guarded_before_it():
    # a270.0:34. Arguments were wrapped, and guarded, at the frame's entry: a helper that breaks before reading its
    # argument compiled once per tensor dtype, int value and grad mode, reaching the cache size limit (strict: an
    # error; else it ran eagerly), where TorchDynamo reads arguments when they are loaded.
    counter = CompileCounter()
    compiled = capture.optimize(counter)(passed_through_a_break)
    values = [torch.randn(3), torch.randn(2, dtype=torch.float64), torch.ones(1, dtype=torch.int32), 3, 4, None]
    with capture.config.patch(strict=True, cache_size_limit=3):
        for mode in (torch.enable_grad, torch.no_grad, torch.inference_mode):
            for value in values:
                with mode():
                    assert compiled(value) is passed_through_a_break(value)
    assert counter.frame_count == 0  # (no graph: nothing before the break)
