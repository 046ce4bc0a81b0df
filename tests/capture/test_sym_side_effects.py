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


# An effect on an object reached through a container (or a global) that an earlier effect rewrites:
# the object is the one the path named at entry, not the one it names after the rewrite.


def s_attr_write_after_renaming_key(x, **kwargs):
    kwargs["cache"] = kwargs.pop("past")  # the renaming a deprecated-keyword wrapper makes
    kwargs["cache"].tensor = x + 1
    return x * 2


def s_attr_write_after_swapping_items(x, d):
    d["a"], d["b"] = d["b"], d["a"]
    d["a"].value = 7
    return x + 1


def s_attr_write_after_reversing(x, items):
    items.reverse()
    items[0].tensor = x * 3
    return x - 1


SLOT = Box()


def s_attr_write_after_rebinding_global(x, replacement):
    global SLOT
    old = SLOT
    SLOT = replacement
    old.value = 5
    return x + 2


def _boxes():
    return Box(), Box()


def _differential(fn, make_args, x):
    """Run ``fn`` eagerly and compiled on fresh, equal arguments; compare results and every Box's state."""
    from dynajit.capture.testing import CompileCounter

    eager_args, compiled_args = make_args(), make_args()
    expected = fn(x, *eager_args[0], **eager_args[1])
    counter = CompileCounter()
    actual = capture.optimize(counter)(fn)(x, *compiled_args[0], **compiled_args[1])
    torch.testing.assert_close(actual, expected)
    assert counter.frame_count == 1
    return eager_args, compiled_args


def _box_state(box):
    return box.value, None if box.tensor is None else box.tensor.tolist()


def test_attribute_write_through_a_renamed_keyword(t):
    def make():
        return (), {"past": Box()}

    x = t(3)
    (_, eager), (_, compiled) = _differential(s_attr_write_after_renaming_key, make, x)
    assert _box_state(compiled["past"]) == _box_state(eager["past"])  # the same Box object, not a KeyError


def test_attribute_write_through_swapped_dict_items(t):
    pairs = []

    def make():
        a, b = _boxes()
        pairs.append((a, b))
        return ({"a": a, "b": b},), {}

    _differential(s_attr_write_after_swapping_items, make, t(3))
    (eager_a, eager_b), (compiled_a, compiled_b) = pairs
    assert (compiled_a.value, compiled_b.value) == (eager_a.value, eager_b.value) == (1, 7)


def test_attribute_write_through_a_reversed_list(t):
    lists = []

    def make():
        items = list(_boxes())
        lists.append(list(items))
        return (items,), {}

    _differential(s_attr_write_after_reversing, make, t(3))
    eager, compiled = lists
    assert [_box_state(b) for b in compiled] == [_box_state(b) for b in eager]


def test_attribute_write_through_a_rebound_global(t):
    global SLOT
    states, x = [], t(3)
    for run in ("eager", "compiled"):
        SLOT = first = Box()
        replacement = Box()
        fn = s_attr_write_after_rebinding_global
        if run == "compiled":
            from dynajit.capture.testing import CompileCounter

            fn = capture.optimize(CompileCounter())(fn)
        torch.testing.assert_close(fn(x, replacement), x + 2)
        states.append((first.value, replacement.value, SLOT is replacement))
    assert states[0] == states[1] == (5, 1, True)


def s_tensor_attr_after_swapping_items(x, d):
    d["a"], d["b"] = d["b"], d["a"]
    d["a"].tag = 7
    return x + 1


def test_tensor_attribute_write_through_swapped_dict_items(t):
    from dynajit.capture.testing import CompileCounter

    x = t(3)
    states = []
    for fn in (
        s_tensor_attr_after_swapping_items,
        capture.optimize(CompileCounter())(s_tensor_attr_after_swapping_items),
    ):
        a, b = t(2), t(2)
        d = {"a": a, "b": b}
        torch.testing.assert_close(fn(x, d), x + 1)
        states.append((getattr(a, "tag", None), getattr(b, "tag", None), d["a"] is b))
    assert states[0] == states[1] == (None, 7, True)
