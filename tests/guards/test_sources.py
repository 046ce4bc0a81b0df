"""Sources: readable names, seed labels, and reaching values through nested paths."""

import torch

from dynajit.guards import (
    AttrSource,
    BufferSource,
    ClosureSource,
    DefaultArgSource,
    GlobalSource,
    GuardSet,
    ItemSource,
    LocalSource,
    ParamSource,
    SubmoduleSource,
    TypeSource,
    id_match,
    is_none,
    tensor_match,
    type_match,
)


def test_names_render_readably():
    self_ = LocalSource("self")
    assert LocalSource("x").name() == "L['x']"
    assert GlobalSource("torch").name() == "G['torch']"
    assert ClosureSource("scale").name() == "C['scale']"
    assert AttrSource(AttrSource(self_, "linear"), "weight").name() == "L['self'].linear.weight"
    assert ParamSource(SubmoduleSource(self_, "linear"), "weight").name() == "L['self'].linear.weight"
    assert BufferSource(self_, "running_mean").name() == "L['self'].running_mean"
    assert ItemSource(LocalSource("xs"), 0).name() == "L['xs'][0]"
    assert ItemSource(LocalSource("d"), "k").name() == "L['d']['k']"
    assert DefaultArgSource(GlobalSource("f"), 1).name() == "G['f'].__defaults__[1]"
    assert DefaultArgSource(GlobalSource("f"), "alpha").name() == "G['f'].__kwdefaults__['alpha']"
    assert TypeSource(LocalSource("x")).name() == "type(L['x'])"


def test_labels_use_the_seed_form():
    assert LocalSource("a").label() == "local 'a'"
    assert AttrSource(LocalSource("self"), "w").label() == "local 'self.w'"
    assert GlobalSource("g").label() == "global 'g'"
    assert ItemSource(ClosureSource("c"), 2).label() == "closure 'c[2]'"


def test_sources_compare_and_hash_by_value():
    assert AttrSource(LocalSource("a"), "b") == AttrSource(LocalSource("a"), "b")
    assert len({ItemSource(LocalSource("a"), 0), ItemSource(LocalSource("a"), 0), ItemSource(LocalSource("a"), 1)}) == 2
    assert ParamSource(LocalSource("m"), "w") != AttrSource(LocalSource("m"), "w")


class Box:
    pass


def test_nested_attribute_and_item_paths_reach_their_values():
    box = Box()
    box.items = {"k": [None, 5]}
    source = ItemSource(ItemSource(AttrSource(LocalSource("b"), "items"), "k"), 1)
    compiled = GuardSet([type_match(source, 5)]).compile(("b",), {})
    assert compiled.check(box)
    box.items["k"][1] = "five"
    assert not compiled.check(box)
    assert compiled.failure_reason(box) == "L['b'].items['k'][1] type: expected int, got str"


def test_unreachable_source_fails_without_raising():
    box = Box()
    box.child = None
    compiled = GuardSet([is_none(AttrSource(LocalSource("b"), "child"))]).compile(("b",), {})
    assert compiled.check(box)
    del box.child
    assert compiled.check(box) is False
    assert compiled.failure_reason(box).startswith("L['b'].child cannot be reached: AttributeError")
    assert compiled.check(None) is False


def test_item_with_non_literal_constant_key():
    key = torch.float32
    source = ItemSource(LocalSource("d"), key)
    compiled = GuardSet([type_match(source, 1)]).compile(("d",), {})
    assert compiled.check({torch.float32: 3})
    assert not compiled.check({torch.float64: 3})


def test_closure_and_default_argument_sources():
    scale = 3

    def f(x, alpha=2, *, beta=None):
        return x * scale * alpha

    cell = f.__closure__[0]
    guards = GuardSet(
        [
            type_match(ClosureSource("scale"), scale),
            type_match(DefaultArgSource(LocalSource("fn"), 0), 2),
            is_none(DefaultArgSource(LocalSource("fn"), "beta")),
        ]
    )
    compiled = guards.compile(("fn",), {}, closure={"scale": cell})
    assert compiled.check(f)
    f.__kwdefaults__["beta"] = 1
    assert compiled.failure_reason(f) == "L['fn'].__kwdefaults__['beta']: expected None, got 1"
    f.__kwdefaults__["beta"] = None
    f.__defaults__ = (2.5,)
    assert not compiled.check(f)
    f.__defaults__ = (2,)
    scale = 1.5
    assert compiled.failure_reason(f) == "C['scale'] type: expected int, got float"


def test_module_parameter_buffer_and_submodule_sources():
    model = torch.nn.Sequential()
    model.add_module("lin", torch.nn.Linear(2, 2))
    model.lin.register_buffer("scale", torch.ones(2))
    lin = SubmoduleSource(LocalSource("m"), "lin")
    guards = GuardSet(
        [
            id_match(lin, model.lin),
            tensor_match(ParamSource(lin, "weight"), model.lin.weight),
            tensor_match(BufferSource(lin, "scale"), model.lin.scale),
        ]
    )
    compiled = guards.compile(("m",), {})
    assert compiled.check(model)
    model.lin.scale = torch.ones(3)
    assert compiled.failure_reason(model) == "L['m'].lin.scale size()[0]: expected 2, got 3"
    model.lin.weight = torch.nn.Parameter(torch.ones(2, 2, dtype=torch.float64))
    assert compiled.failure_reason(model) == "L['m'].lin.weight dtype: expected float32, got float64"


def test_global_source_reads_the_live_globals_and_builtins():
    f_globals = {"helper": abs}
    guards = GuardSet([id_match(GlobalSource("helper"), abs), id_match(GlobalSource("len"), len)])
    compiled = guards.compile((), f_globals)
    assert compiled.check()
    f_globals["len"] = max  # a global now shadows the builtin
    assert (
        compiled.failure_reason()
        == "global 'len' changed: expected <built-in function len>, got <built-in function max>"
    )
    del f_globals["len"]
    f_globals["helper"] = round
    assert not compiled.check()
