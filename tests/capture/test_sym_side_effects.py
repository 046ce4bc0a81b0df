"""Side effects are recorded while tracing and replayed once, in order, after the graph runs."""

import torch
from torch import nn

import dynajit.capture as capture

COUNTER = 0
HISTORY = []
STATE = {"calls": 0}


def s_append_to_arg(x, acc):
    acc.append(x * 2)
    acc.append(len(acc))
    return x + 1


def s_dict_write(x, d):
    d["out"] = x.sin()
    d["n"] = d.get("n", 0) + 1
    del d["drop"]
    return x


def s_global_write(x):
    global COUNTER
    COUNTER = COUNTER + 1
    return x * COUNTER


def s_global_list(x):
    HISTORY.append(x.sum())
    STATE["calls"] += 1
    return x + STATE["calls"]


class Box:
    def __init__(self):
        self.value = 1
        self.tensor = None


def s_attr_write(x, box):
    box.value = box.value + 1
    box.tensor = x * box.value
    return box.tensor + 1


def make_closure_writer():
    total = 0

    def add(x):
        nonlocal total
        total += 2
        return x * total

    return add


CLOSURE_WRITER = make_closure_writer()


def s_closure_cell_write(x):
    return CLOSURE_WRITER(x)


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


def s_module_attr(m, x):
    return m(x)


def s_list_mutation_then_break(x, acc):
    acc.append(x * 3)
    capture.graph_break()  # a graph break after the mutation
    acc.append(x * 2)
    return x + 1


def s_new_list_returned_twice(x):
    items = [x, x + 1]
    return items, items


def test_list_argument_mutation(check, t):
    check(s_append_to_arg, t(3), [t(3)], graphs=1)


def test_dict_argument_mutation(check, t):
    check(s_dict_write, t(3), {"n": 1, "drop": 0}, graphs=1)


def test_global_write_applied_once(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    global COUNTER
    COUNTER = 0
    counter = CompileCounter()
    compiled = capture.optimize(counter)(s_global_write)
    x = t(3)
    first = compiled(x)
    assert COUNTER == 1
    torch.testing.assert_close(first, x * 1)
    second = compiled(x)
    assert COUNTER == 2
    torch.testing.assert_close(second, x * 2)


def test_global_containers_mutated_once(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    HISTORY.clear()
    STATE["calls"] = 0
    compiled = capture.optimize(CompileCounter())(s_global_list)
    x = t(3)
    out = compiled(x)
    assert len(HISTORY) == 1 and STATE["calls"] == 1
    torch.testing.assert_close(HISTORY[0], x.sum())
    torch.testing.assert_close(out, x + 1)


def test_attribute_writes_on_user_object(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    box_eager, box_compiled = Box(), Box()
    x = t(3)
    expected = s_attr_write(x, box_eager)
    counter = CompileCounter()
    actual = capture.optimize(counter)(s_attr_write)(x, box_compiled)
    torch.testing.assert_close(actual, expected)
    assert box_compiled.value == box_eager.value == 2
    torch.testing.assert_close(box_compiled.tensor, box_eager.tensor)
    assert counter.frame_count == 1


def test_closure_cell_write(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    eager_writer = make_closure_writer()
    x = t(3)
    expected = [eager_writer(x) for _ in range(2)]
    compiled = capture.optimize(CompileCounter())(s_closure_cell_write)
    actual = [compiled(x) for _ in range(2)]
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    assert CLOSURE_WRITER.__closure__[0].cell_contents == 4


def test_module_attribute_write(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    torch.manual_seed(0)
    m_eager = Counter()
    m_compiled = Counter()
    m_compiled.load_state_dict(m_eager.state_dict())
    x = t(2, 3)
    compiled = capture.optimize(CompileCounter())(s_module_attr)
    for _ in range(2):
        torch.testing.assert_close(compiled(m_compiled, x), s_module_attr(m_eager, x))
    assert m_compiled.calls == m_eager.calls == 2


def test_mutation_before_a_break(check, t):
    check(s_list_mutation_then_break, t(3), [], graphs=2)


def test_new_list_keeps_identity(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    a, b = capture.optimize(CompileCounter())(s_new_list_returned_twice)(t(3))
    assert a is b


class WithSetter:
    def __init__(self):
        self._v = 1

    @property
    def v(self):
        return self._v * 10

    @v.setter
    def v(self, value):
        self._v = value + 1


def s_property_setter(x, obj):
    obj.v = 2
    return x * obj.v


def test_property_setter_runs_in_python(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    eager_obj, compiled_obj = WithSetter(), WithSetter()
    x = t(3)
    expected = s_property_setter(x, eager_obj)
    actual = capture.optimize(CompileCounter())(s_property_setter)(x, compiled_obj)
    torch.testing.assert_close(actual, expected)
    assert compiled_obj._v == eager_obj._v == 3


class Noisy:
    calls = 0

    def __eq__(self, other):
        Noisy.calls += 1
        return True

    __hash__ = object.__hash__

    def __str__(self):
        Noisy.calls += 1
        return "noisy"


def s_user_dunders(x, a, b):
    same = a == b
    text = str(a)
    return x * same + len(text)


def test_user_dunder_methods_run_once_per_call(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    compiled = capture.optimize(CompileCounter())(s_user_dunders)
    a, b, x = Noisy(), Noisy(), t(3)
    Noisy.calls = 0
    torch.testing.assert_close(compiled(x, a, b), s_user_dunders(x, a, b))
    assert Noisy.calls == 4  # two in the compiled call, two in the eager one
