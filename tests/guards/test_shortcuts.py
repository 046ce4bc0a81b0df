"""The compiled check's shortcuts: what is read through a path pinned to an object is read once, through one
path to it, and a module's members come from its tables; every change a full read would see still fails."""

import torch

from dynajit.guards import AttrSource, GuardSet, ItemSource, LocalSource, function_match, id_match, nn_module

X = LocalSource("x")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(2, 2)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Block()
        self.b = Block()


def _guards(model: Model) -> GuardSet:
    """What a trace of ``model`` reads: each block, its projection, and each block's class's ``forward``."""
    guards = [nn_module(X, model)]
    for name in ("a", "b"):
        block = AttrSource(X, name)
        proj = AttrSource(block, "proj")
        guards += [nn_module(block, getattr(model, name)), nn_module(proj, getattr(model, name).proj)]
        guards.append(function_match(AttrSource(AttrSource(block, "__class__"), "forward"), Block.forward))
        guards.append(id_match(AttrSource(proj, "weight"), getattr(model, name).proj.weight, weak=True))
    return GuardSet(guards)


def test_members_of_pinned_modules_are_read_from_their_tables():
    """``m.a`` and ``m.a.proj.weight`` are ``nn.Module.__getattr__`` calls; the check reads the tables instead."""
    model = Model()
    compiled = _guards(model).compile(("x",), {})
    assert compiled.check(model)
    assert "._modules['a']" in compiled.code and "._parameters['weight']" in compiled.code
    assert ".proj\n" not in compiled.code and ".weight\n" not in compiled.code


def test_a_class_read_through_two_modules_is_checked_once():
    """Both blocks reach ``Block.forward``: once each block's class is checked, the function is read once."""
    model = Model()
    compiled = _guards(model).compile(("x",), {})
    assert compiled.code.count(".forward") == 1


def test_every_change_a_full_read_sees_still_fails():
    model = Model()
    compiled = _guards(model).compile(("x",), {})
    assert compiled.check(model)
    model.b.proj = torch.nn.Linear(2, 2)  # a submodule replaced
    assert not compiled.check(model)
    model = Model()
    compiled = _guards(model).compile(("x",), {})
    model.b.proj.__dict__["weight"] = torch.nn.Parameter(torch.ones(2, 2))  # an instance attribute shadows it
    assert model.b.proj.weight is not model.b.proj._parameters["weight"]
    assert not compiled.check(model)
    model = Model()
    compiled = _guards(model).compile(("x",), {})

    class Other(Block):
        def forward(self, x):
            return x

    model.b.__class__ = Other  # one block's class swapped: its own class check fails
    assert not compiled.check(model)
    original = Block.forward
    try:
        model = Model()
        compiled = _guards(model).compile(("x",), {})
        Block.forward = lambda self, x: x  # the shared function replaced
        assert not compiled.check(model)
    finally:
        Block.forward = original


def test_facts_below_two_paths_to_one_object_are_read_through_one():
    """Two items holding one function: its attribute is read once, and rebinding either item still fails."""

    def helper():
        return 1

    holder = {"first": helper, "second": helper}
    first, second = ItemSource(X, "first"), ItemSource(X, "second")
    guards = GuardSet(
        [
            function_match(first, helper, weak=True),
            function_match(second, helper, weak=True),
            id_match(AttrSource(first, "__code__"), helper.__code__),
            id_match(AttrSource(second, "__code__"), helper.__code__),
        ]
    )
    compiled = guards.compile(("x",), {})
    assert compiled.check(holder)
    assert compiled.code.count(".__code__") == 1
    holder["second"] = lambda: 2
    assert not compiled.check(holder)
    assert compiled.failure_reason(holder).startswith("local 'x['second']' changed")
