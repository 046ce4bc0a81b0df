"""User functions, closures, lambdas, nested functions, defaults, nn.Modules and user objects are inlined."""

import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

SCALE = 3.0


def helper(x, k=2):
    return x * k + SCALE


def helper_kwonly(x, *, shift=1.0, **extra):
    return x + shift + len(extra)


def recursive_sum(x, depth):
    if depth == 0:
        return x
    return recursive_sum(x + 1, depth - 1)


def u_call(x):
    return helper(x) + helper(x, 3) + helper(x, k=4)


def u_kwonly(x):
    return helper_kwonly(x, shift=2.0, a=1, b=2)


def u_recursion(x):
    return recursive_sum(x, 3)


def u_lambda(x):
    f = lambda v: v.sin() * 2
    return f(x) + (lambda: 1)()


def u_nested_def(x):
    def inner(v, bias=0.5):
        return v.cos() + bias

    return inner(x) + inner(x, bias=2.0)


def u_closure(x):
    factor = 4

    def inner(v):
        return v * factor

    return inner(x)


def u_closure_of_tensor(x):
    def add_x(v):
        return v + x

    return add_x(x * 2)


def u_nonlocal_counter(x):
    count = 0

    def bump(v):
        nonlocal count
        count += 1
        return v + count

    y = bump(x)
    y = bump(y)
    return y, count


def u_map_lambda(x):
    return sum(map(lambda v: v * 2, [1, 2, 3])) * x if False else x * len([f for f in (1, 2)])


def u_star_args(x):
    def total(*parts):
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out

    args = (x, x * 2, x * 3)
    return total(*args)


def u_kwargs_dict(x):
    def scaled(v, scale=1.0, shift=0.0):
        return v * scale + shift

    opts = {"scale": 2.0, "shift": -1.0}
    return scaled(x, **opts)


def u_global_function_in_module(x):
    return F.relu(x) + torch.nn.functional.silu(x)


def u_partial_like(x):
    def make_adder(n):
        def add(v):
            return v + n

        return add

    return make_adder(3)(x)


class Point:
    def __init__(self, scale):
        self.scale = scale
        self.offset = 1.5

    def apply(self, x):
        return x * self.scale + self.offset

    @property
    def double(self):
        return self.scale * 2

    @staticmethod
    def static_add(x):
        return x + 10

    @classmethod
    def class_name_len(cls):
        return len(cls.__name__)


POINT = Point(2.0)


def u_object_attrs(x, p):
    return p.apply(x) + p.double + Point.static_add(x) + p.class_name_len()


def u_global_object(x):
    return POINT.apply(x)


CASES = [
    u_call, u_kwonly, u_recursion, u_lambda, u_nested_def, u_closure, u_closure_of_tensor, u_nonlocal_counter,
    u_map_lambda, u_star_args, u_kwargs_dict, u_global_function_in_module, u_partial_like, u_global_object,
]  # fmt: skip


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_inlined_in_one_graph(check, t, fn):
    check(fn, t(4), graphs=1)


def test_user_object(check, t):
    check(u_object_attrs, t(4), Point(3.0), graphs=1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)
        self.register_buffer("shift", torch.ones(2))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) + self.shift


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.norm = nn.LayerNorm(4)
        self.training_scale = 2.0

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) + i
        x = self.seq(x)
        if self.training:
            x = x * self.training_scale
        return self.norm(x), len(self.layers), self.layers[0](x)


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return self.pool(torch.relu(self.bn(self.conv(x)))).flatten(1)


def run_module(m, x):
    return m(x)


@pytest.mark.parametrize("module_cls", [MLP, Stack], ids=lambda c: c.__name__)
def test_module_forward_is_inlined(check, t, module_cls):
    torch.manual_seed(0)
    m = module_cls()
    check(run_module, m, t(3, 4), graphs=1)


def test_module_eval_mode(check, t):
    torch.manual_seed(0)
    m = Stack().eval()
    check(run_module, m, t(3, 4), graphs=1)


def test_conv_module_in_eval(check, t):
    torch.manual_seed(0)
    m = Conv().eval()
    check(run_module, m, t(2, 2, 5, 5), graphs=1)


def test_module_parameters_are_get_attr_nodes(check, t):
    torch.manual_seed(0)
    counter = check(run_module, MLP(), t(3, 4), graphs=1)
    gm = counter.graphs[0]
    targets = {node.target for node in gm.graph.nodes if node.op == "get_attr"}
    assert any("fc1" in target and "weight" in target for target in targets)
    assert not [node for node in gm.graph.nodes if node.op == "placeholder" and "weight" in node.name]


def test_compiled_module_method(check, t):
    torch.manual_seed(0)
    m = MLP()
    check(MLP.forward, m, t(2, 4), graphs=1)


def test_replaced_parameter_recompiles(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    torch.manual_seed(0)
    m = MLP()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(run_module)
    x = t(2, 4)
    torch.testing.assert_close(compiled(m, x), m(x))
    m.fc1.weight = nn.Parameter(torch.zeros_like(m.fc1.weight))
    torch.testing.assert_close(compiled(m, x), m(x))
    assert counter.frame_count == 2


def test_functools_partial_breaks_but_matches(check, t):
    part = functools.partial(helper, k=5)

    def use(x):
        return part(x) + 1

    check(use, t(4))


def g_no_grad(x, w):
    with torch.no_grad():
        y = x * w
    z = y + x * w
    return z, y.requires_grad, z.requires_grad


def g_enable_inside_no_grad(x, w):
    with torch.no_grad():
        a = x * w
        with torch.enable_grad():
            b = x * w
    return a, b


def g_set_grad_enabled(x, w):
    with torch.set_grad_enabled(False):
        return x * w


def g_break_in_with(x, w):
    with torch.no_grad():
        y = x * w
        LOG.append(id(y))
    return y


LOG = []


@pytest.mark.parametrize("fn", [g_no_grad, g_enable_inside_no_grad, g_set_grad_enabled], ids=lambda f: f.__name__)
def test_grad_mode_blocks(check, t, fn):
    w = t(3).requires_grad_()
    check(fn, t(3), w, graphs=1)
    assert torch.is_grad_enabled()


def test_break_inside_grad_block_resumes(check, t):
    # the graph before the break; the resume function only leaves the block, which its transformed code does
    # after no graph (a graph ends in the mode it starts in)
    check(g_break_in_with, t(3), t(3).requires_grad_(), graphs=1)
    assert torch.is_grad_enabled()


def test_call_to_a_compiled_function_is_inlined(check, t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    inner = capture.optimize(CompileCounter())(helper)

    def outer(x):
        return inner(x) * 2

    check(outer, t(3), graphs=1)


class Greeter:
    def scale(self, x):
        return x * 2


def call_method(g, x):
    return g.scale(x) + 1


def test_method_replaced_on_the_class_recompiles(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    counter = CompileCounter()
    compiled = capture.optimize(counter)(call_method)
    g, x = Greeter(), t(3)
    torch.testing.assert_close(compiled(g, x), x * 2 + 1)
    original = Greeter.scale
    try:
        Greeter.scale = lambda self, v: v * 5
        torch.testing.assert_close(compiled(g, x), x * 5 + 1)
    finally:
        Greeter.scale = original
    assert counter.frame_count == 2


class Clash(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Module()
        self.a.b = nn.Parameter(torch.ones(3))
        self.a_b = nn.Parameter(torch.full((3,), 2.0))

    def forward(self, x):
        return x * self.a.b + self.a_b


def test_parameters_with_clashing_flat_names(check, t):
    check(run_module, Clash(), t(3), graphs=1)


GLOBAL_WEIGHT = torch.linspace(-1, 1, 3)


def uses_global_tensor(x):
    return x * GLOBAL_WEIGHT


def make_uses_closure_tensor():
    weight = torch.linspace(0, 1, 3)

    def inner(x):
        return x + weight

    return inner


def test_global_tensor_is_a_graph_input(check, t):
    counter = check(uses_global_tensor, t(3), graphs=1)
    assert len([n for n in counter.graphs[0].graph.nodes if n.op == "placeholder"]) == 2


def test_closure_tensor_is_a_graph_input(check, t):
    check(make_uses_closure_tensor(), t(3), graphs=1)


def test_global_tensor_replaced_recompiles(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    global GLOBAL_WEIGHT
    counter = CompileCounter()
    compiled = capture.optimize(counter)(uses_global_tensor)
    x = t(3)
    torch.testing.assert_close(compiled(x), x * GLOBAL_WEIGHT)
    saved = GLOBAL_WEIGHT
    try:
        GLOBAL_WEIGHT = torch.ones(3, dtype=torch.float64)
        torch.testing.assert_close(compiled(x), x * GLOBAL_WEIGHT)
    finally:
        GLOBAL_WEIGHT = saved
    assert counter.frame_count == 2


SETTINGS = {"scale": 3}
SETTINGS_READS = []


def read_scale(offset):
    SETTINGS_READS.append(offset)
    return SETTINGS["scale"] + offset


def scaled_by_setting(x):
    return x * read_scale(1)


def test_assume_constant_result_is_called_once_and_baked_in(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    capture.assume_constant_result(read_scale)
    try:
        SETTINGS["scale"], SETTINGS_READS[:] = 3, []
        counter = CompileCounter()
        compiled = capture.optimize(counter)(scaled_by_setting)
        x = t(3)
        torch.testing.assert_close(compiled(x), x * 4)
        assert SETTINGS_READS == [1]  # once, while tracing
        SETTINGS["scale"] = 10  # not guarded: the baked-in result stays
        torch.testing.assert_close(compiled(x), x * 4)
        assert SETTINGS_READS == [1] and counter.frame_count == 1
        assert not any(n.op == "call_function" and n.target is read_scale for n in counter.graphs[0].graph.nodes)
    finally:
        capture.reset()


def _scaled(x, factor=2.0):
    return x * factor


def code_introspection(x):
    # as decorators do: look a parameter up in the wrapped function's code object
    position = _scaled.__code__.co_varnames.index("factor") if "factor" in _scaled.__code__.co_varnames else 0
    return _scaled(x) + position


def test_reading_a_functions_code_object_stays_in_the_graph(check, t):
    check(code_introspection, t(3), graphs=1)


def test_replacing_a_functions_code_object_recompiles(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    def reads_code(x):
        return x + len(_scaled.__code__.co_varnames)

    counter = CompileCounter()
    compiled = capture.optimize(counter)(reads_code)
    x = t(3)
    torch.testing.assert_close(compiled(x), reads_code(x))
    original = _scaled.__code__
    try:
        _scaled.__code__ = (lambda x, factor=2.0, extra=1: x).__code__
        torch.testing.assert_close(compiled(x), reads_code(x))
    finally:
        _scaled.__code__ = original
    assert counter.frame_count == 2


def _doubled(x, k=2):
    return x * k


class _Layer(nn.Module):
    def forward(self, x):
        return x + 1


def test_a_called_function_whose_code_object_is_replaced_runs_the_new_code(t):
    # The trace ran the function's code: its identity alone (FUNCTION_MATCH) stays true when __code__ is assigned.
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    layers = nn.Sequential(_Layer(), _Layer())

    def calls(x):
        return _doubled(x) + layers(x)

    counter = CompileCounter()
    compiled = capture.optimize(counter)(calls)
    x = t(3)
    torch.testing.assert_close(compiled(x), calls(x))
    originals = _doubled.__code__, _Layer.forward.__code__
    try:
        _doubled.__code__ = (lambda x, k=2: x + k).__code__
        torch.testing.assert_close(compiled(x), calls(x))
        _Layer.forward.__code__ = (lambda self, x: x * 10).__code__
        torch.testing.assert_close(compiled(x), calls(x))
    finally:
        _doubled.__code__, _Layer.forward.__code__ = originals
    torch.testing.assert_close(compiled(x), calls(x))
    assert counter.frame_count == 3


_BUILTIN_USERS = """
import torch
def scaled_by_rank(x):
    return x * ord("a")
def calls_helper(x, helper):
    return helper(x) + 1
"""


def test_a_builtin_the_trace_used_is_guarded_against_a_global_shadowing_it_and_against_replacement(t):
    # The compiled code keeps what the name meant: a global defined later with a builtin's name, or a replaced
    # builtin, changes what Python calls, in the compiled function's own module and in a module it calls into.
    import builtins
    import types

    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    frame_module, other_module = {}, types.ModuleType("other_module")
    exec(_BUILTIN_USERS, frame_module)
    exec("def rank_of(x):\n    return x * ord('b')\n", vars(other_module))
    x = t(3)
    counter = CompileCounter()
    direct = capture.optimize(counter)(frame_module["scaled_by_rank"])
    through = capture.optimize(counter)(frame_module["calls_helper"])
    original_ord = builtins.ord
    try:
        for change in (
            lambda: None,
            lambda: setattr(builtins, "ord", lambda v: 11),
            lambda: frame_module.__setitem__("ord", lambda v: 5),
            lambda: vars(other_module).__setitem__("ord", lambda v: 7),
        ):
            change()
            torch.testing.assert_close(direct(x), frame_module["scaled_by_rank"](x))
            expected = frame_module["calls_helper"](x, other_module.rank_of)
            torch.testing.assert_close(through(x, other_module.rank_of), expected)
    finally:
        builtins.ord = original_ord
    assert counter.frame_count == 6  # two, then each change recompiles the functions it reaches
