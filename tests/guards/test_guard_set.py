"""GuardSet: dedupe, printing, and the compiled check (one generated function, cheapest first)."""

import pytest
import torch

from dynajit.guards import (
    AttrSource,
    GlobalSource,
    GuardCompileError,
    GuardSet,
    LocalSource,
    constant_match,
    expression,
    global_state,
    id_match,
    tensor_match,
    type_match,
)

X, Y = LocalSource("x"), LocalSource("y")


def test_dedupe_keeps_insertion_order():
    guards = GuardSet()
    guards.add(tensor_match(X, torch.zeros(2)))
    guards.add(constant_match(Y, 3))
    guards.extend([tensor_match(X, torch.ones(2)), constant_match(Y, 3), constant_match(Y, 4)])
    assert len(guards) == 3
    assert guards.kinds() == ["TENSOR_MATCH", "CONSTANT_MATCH", "CONSTANT_MATCH"]
    merged = GuardSet([type_match(X, 1)])
    merged.update(guards)
    assert len(merged) == 4 and list(merged)[1:] == list(guards)
    assert tensor_match(X, torch.zeros(2)) in guards


def test_adding_something_else_is_a_clear_error():
    with pytest.raises(TypeError, match="guard factories"):
        GuardSet().add("x")


def test_prints_one_guard_per_line_in_the_seed_format():
    guards = GuardSet(
        [
            tensor_match(X, torch.zeros(2)),
            id_match(AttrSource(LocalSource("self"), "linear"), object()),
            constant_match(GlobalSource("scale"), 2),
            global_state(),
        ]
    )
    assert str(guards) == "\n".join(
        [
            "- local 'x' TENSOR_MATCH",
            "- local 'self.linear' ID_MATCH",
            "- global 'scale' CONSTANT_MATCH",
            "- global '' GLOBAL_STATE",
        ]
    )
    verbose = guards.format(verbose=True)
    assert "- local 'x' TENSOR_MATCH\n    torch.Tensor float32 cpu requires_grad=False size=[2] stride=[1]" in verbose
    assert "    | L['x'].dtype is torch.float32" in verbose
    assert "    | is_grad_enabled() is True" in verbose
    assert repr(list(guards)[2]) == "<Guard global 'scale' CONSTANT_MATCH: == 2>"


def test_expression_prints_with_source_names_and_checks():
    guard = expression("L['x'].size()[0] == L['y'].size()[0]", [X, Y], "x and y have the same length")
    guards = GuardSet([guard])
    assert str(guards) == "- L['x'].size()[0] == L['y'].size()[0] EXPRESSION"
    c = guards.compile(("x", "y"), {})
    assert c.check(torch.zeros(3), torch.zeros(3))
    assert not c.check(torch.zeros(3), torch.zeros(4))
    assert c.failure_reason(torch.zeros(3), torch.zeros(4)) == (
        "x and y have the same length: expected L['x'].size()[0] == L['y'].size()[0], which is false"
    )


def test_expression_with_bindings_and_braces():
    guard = expression("L['x'] in {1, 2} and limit(L['x'])", [X], "small", bindings={"limit": lambda v: v < 2})
    c = GuardSet([guard]).compile(("x",), {})
    assert c.check(1)
    assert not c.check(2)
    assert not c.check(3)


def test_expression_must_name_all_its_sources():
    with pytest.raises(ValueError, match="refers to L\\['y'\\]"):
        expression("L['x'] == L['y']", [X], "equal")
    with pytest.raises(ValueError, match="invalid Python"):
        expression("L['x'] ==", [X], "broken")


def test_compiled_check_is_one_function_cheapest_first_with_accessors_computed_once():
    self_ = LocalSource("self")
    weight = AttrSource(AttrSource(self_, "linear"), "weight")
    module = torch.nn.Linear(2, 2)
    guards = GuardSet([tensor_match(weight, module.weight), type_match(AttrSource(self_, "linear"), module)])
    c = guards.compile(("self",), {})
    assert c.check(torch.nn.Sequential()) is False
    holder = torch.nn.Module()
    holder.linear = module
    assert c.check(holder)
    assert c.code.count("def ") == 1
    assert c.code.count(".linear") == 1  # L['self'].linear read once
    lines = [line.strip() for line in c.code.splitlines() if line.strip().startswith("if not")]
    assert lines[0].startswith("if not (type(")
    assert lines[1].startswith("if not (type(")
    assert "torch" not in c.code  # constants are bound, not looked up by name


def test_check_returns_bool_and_never_raises():
    class Exploding:
        @property
        def value(self):
            raise RuntimeError("boom")

    c = GuardSet([type_match(AttrSource(X, "value"), 1)]).compile(("x",), {})
    assert c.check(Exploding()) is False
    assert c.failure_reason(Exploding()) == "L['x'].value cannot be reached: RuntimeError: boom"


def test_argument_names_that_shadow_builtins_work():
    guards = GuardSet([type_match(LocalSource("type"), 1), constant_match(LocalSource("len"), 2)])
    c = guards.compile(("type", "len"), {})
    assert c.check(5, 2)
    assert not c.check(5, 3)


def test_unknown_local_or_closure_is_a_clear_error():
    with pytest.raises(GuardCompileError, match="arguments are \\('y',\\)"):
        GuardSet([type_match(X, 1)]).compile(("y",), {})
    from dynajit.guards import ClosureSource

    with pytest.raises(GuardCompileError, match="closure="):
        GuardSet([type_match(ClosureSource("c"), 1)]).compile((), {})


def test_arg_names_must_be_a_sequence_of_names():
    with pytest.raises(TypeError, match="wrap it"):
        GuardSet().compile("x", {})


def test_empty_guard_set_always_passes():
    c = GuardSet().compile(("x",), {})
    assert c.check(object()) is True
    assert c.failure_reason(1) is None


def test_a_check_shared_by_two_guards_runs_once():
    c = GuardSet([type_match(X, torch.zeros(1)), tensor_match(X, torch.zeros(1))]).compile(("x",), {})
    assert c.code.count("type(x) is") == 1
    assert c.check(torch.ones(1)) and not c.check(1.0)


def test_dynamic_dim_with_a_symbolic_shape_expression_over_size_sources():
    from dynajit.guards import SizeSource

    x_len, y_len = SizeSource(X, 0), SizeSource(Y, 0)
    assert x_len.name() == "L['x'].size()[0]"
    guards = GuardSet(
        [
            tensor_match(X, torch.zeros(4), dynamic_dims=(0,)),
            tensor_match(Y, torch.zeros(4), dynamic_dims=(0,)),
            expression("L['x'].size()[0] == L['y'].size()[0]", [x_len, y_len], "x and y have one length"),
            expression("L['x'].size()[0] >= 2", [x_len], "x is not specialized to 0 or 1"),
        ]
    )
    c = guards.compile(("x", "y"), {})
    assert ".size(0)" in c.code
    assert c.check(torch.zeros(9), torch.zeros(9))
    assert not c.check(torch.zeros(9), torch.zeros(8))
    assert c.failure_reason(torch.zeros(1), torch.zeros(1)) == (
        "x is not specialized to 0 or 1: expected L['x'].size()[0] >= 2, which is false"
    )


def test_an_expression_that_raises_is_a_miss_with_its_error():
    guard = expression('1 // L["x"] == 0', [X], "x is not zero")  # double quotes name the same source
    c = GuardSet([guard]).compile(("x",), {})
    assert c.check(2)
    assert c.check(0) is False
    assert c.failure_reason(0) == "1 // L['x'] == 0 raised ZeroDivisionError: integer division or modulo by zero"
