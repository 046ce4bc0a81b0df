"""Guard kinds on Python values: each shows a hit and a miss, and the miss's sentence."""

import enum
import gc
import weakref

import pytest
import torch

from dynajit.guards import (
    AttrSource,
    GlobalSource,
    GuardSet,
    LocalSource,
    constant_match,
    dict_contains,
    dict_keys,
    equals_match,
    function_match,
    hasattr_match,
    id_match,
    is_none,
    length_check,
    nn_module,
    no_module_hooks,
    not_none,
    type_match,
    weak_referents,
)

X = LocalSource("x")


def compiled(*guards, arg_names=("x",), f_globals=None):
    return GuardSet(guards).compile(arg_names, f_globals if f_globals is not None else {})


def test_type_match():
    c = compiled(type_match(X, 3))
    assert c.check(7)
    assert not c.check(True)
    assert c.failure_reason(2.0) == "L['x'] type: expected int, got float"


def test_id_match():
    obj = object()
    c = compiled(id_match(X, obj))
    assert c.check(obj)
    assert not c.check(object())


def test_an_identity_guard_on_a_parameter_names_its_size_and_dtype_not_its_elements(monkeypatch):
    # A model's parameters are guarded by identity; formatting each one's values cost a second per model.
    weight = torch.nn.Parameter(torch.zeros(64, 3))
    monkeypatch.setattr(torch.Tensor, "__repr__", lambda self: pytest.fail("a tensor's elements were formatted"))
    c = compiled(id_match(X, weight))
    assert c.failure_reason(torch.nn.Parameter(torch.zeros(64, 3))) == (
        "local 'x' changed: expected Parameter(size=[64, 3], dtype=torch.float32), "
        "got Parameter(size=[64, 3], dtype=torch.float32)"
    )
    assert "is Linear module" in repr(compiled(id_match(X, torch.nn.Linear(2, 2))).guards[0])


class _Holder:
    """Something weak-referenceable, like a module or a user function."""


@pytest.mark.parametrize(
    "factory, make",
    [(id_match, _Holder), (function_match, lambda: lambda: None), (nn_module, torch.nn.ReLU)],
    ids=["id_match", "function_match", "nn_module"],
)
def test_weak_identity_guards_do_not_keep_their_object_alive(factory, make):
    obj = make()
    guard = factory(X, obj, weak=True)
    c = compiled(guard)
    assert c.check(obj)
    assert not c.check(make())
    assert [ref() for ref in weak_referents(guard)] == [obj]
    dead = weakref.ref(obj)
    del obj
    gc.collect()
    assert dead() is None
    assert not c.check(None)  # a dead referent matches nothing, not even None


def test_strong_identity_guards_keep_their_object_and_name_no_referent():
    obj = _Holder()
    guard = id_match(X, obj)
    alive = weakref.ref(obj)
    del obj
    gc.collect()
    assert alive() is not None
    assert weak_referents(guard) == []


def test_weak_identity_guard_holds_objects_without_weak_references_strongly():
    value = (1, 2)
    guard = id_match(X, value, weak=True)
    assert compiled(guard).check(value)
    assert weak_referents(guard) == []


def helper(x):
    return x + 1


def other_helper(x):
    return x + 2


def test_function_match_recompiles_when_a_global_function_is_replaced():
    f_globals = {"helper": helper}
    c = compiled(function_match(GlobalSource("helper"), helper), arg_names=(), f_globals=f_globals)
    assert c.check()
    f_globals["helper"] = other_helper
    assert not c.check()
    assert c.failure_reason().startswith("global 'helper' changed: expected <function helper")


def test_function_match_rejects_non_callables():
    with pytest.raises(TypeError, match="expects a callable"):
        function_match(X, 3)


@pytest.mark.parametrize(
    ("value", "hit", "misses"),
    [
        (2, 2, [3, 2.0, True, "2"]),
        (1, 1, [True, 1.0]),
        (True, True, [1, False]),
        (None, None, [0, False]),
        (2.5, 2.5, [2.4, "2.5"]),
        (0.0, 0.0, [-0.0, 0, False]),
        (float("nan"), float("nan"), [1.0]),
        ("relu", "relu", ["gelu", b"relu"]),
    ],
)
def test_constant_match(value, hit, misses):
    c = compiled(constant_match(X, value))
    assert c.check(hit)
    for miss in misses:
        assert not c.check(miss), miss
        assert c.failure_reason(miss).startswith("local 'x' changed: expected")


def test_constant_match_sentence_for_a_global():
    f_globals = {"scale": 2}
    c = compiled(constant_match(GlobalSource("scale"), 2), arg_names=(), f_globals=f_globals)
    f_globals["scale"] = 3
    assert c.failure_reason() == "global 'scale' changed: expected 2, got 3"
    f_globals["scale"] = 2.0
    assert c.failure_reason() == "global 'scale' changed: expected 2 (int), got 2.0 (float)"


class Color(enum.IntEnum):
    RED = 1
    BLUE = 2


def test_constant_match_on_scalar_subclasses_keeps_the_exact_type():
    c = compiled(constant_match(X, Color.RED))
    assert c.check(Color.RED)
    assert not c.check(1)
    assert not c.check(Color.BLUE)


def test_constant_match_rejects_objects():
    with pytest.raises(TypeError, match="equals_match"):
        constant_match(X, [1, 2])


def test_equals_match_compares_to_a_copy():
    value = [1, (2, 3)]
    guard = equals_match(X, value)
    value.append(4)  # mutating the original after guarding does not move the guard
    c = compiled(guard)
    assert c.check([1, (2, 3)])
    assert not c.check([1, (2, 3), 4])
    assert not c.check((1, (2, 3)))
    c = compiled(equals_match(X, torch.float16))
    assert c.check(torch.float16)
    assert not c.check(torch.bfloat16)


@pytest.mark.parametrize(
    ("example", "hit", "miss"),
    [([1, 2], [5, 6], [1, 2, 3]), ((1,), (9,), [9]), ({"a": 1}, {"b": 2}, {})],
)
def test_length_check(example, hit, miss):
    c = compiled(length_check(X, example))
    assert c.check(hit)
    assert not c.check(miss)
    assert c.failure_reason(miss)


def test_length_check_sentence():
    c = compiled(length_check(X, [1, 2]))
    assert c.failure_reason([1, 2, 3]) == "L['x'] length: expected 2, got 3"
    assert c.failure_reason((1, 2)) == "L['x'] type: expected list, got tuple"


def test_dict_keys_in_order():
    c = compiled(dict_keys(X, {"a": 1, "b": 2}))
    assert c.check({"a": 0, "b": None})
    assert not c.check({"b": 0, "a": 0})
    assert c.failure_reason({"a": 1}) == "L['x'] keys: expected ['a', 'b'], got ['a']"


def test_none_guards():
    assert compiled(is_none(X)).check(None)
    assert not compiled(is_none(X)).check(0)
    assert compiled(not_none(X)).check(0)
    assert compiled(not_none(X)).failure_reason(None) == "L['x']: expected not None, got None"


class Thing:
    pass


def test_hasattr_match():
    thing = Thing()
    has = compiled(hasattr_match(X, "flag"))
    lacks = compiled(hasattr_match(X, "flag", expected=False))
    assert lacks.check(thing) and not has.check(thing)
    thing.flag = 1
    assert has.check(thing) and not lacks.check(thing)
    assert lacks.failure_reason(thing) == "L['x']: expected to not have attribute 'flag'"


def test_dict_contains():
    thing = Thing()
    lacks = compiled(dict_contains(AttrSource(X, "__dict__"), "flag", expected=False))
    has = compiled(dict_contains(AttrSource(X, "__dict__"), "flag"))
    assert lacks.check(thing) and not has.check(thing)
    thing.flag = 1
    assert has.check(thing) and not lacks.check(thing)
    assert lacks.failure_reason(thing) == "L['x'].__dict__: expected to not contain 'flag'"
    assert str(GuardSet([lacks_guard := dict_contains(X, 3, expected=False)])) == "- local 'x' DICT_CONTAINS"
    assert lacks_guard == dict_contains(X, 3, expected=False) != dict_contains(X, 3)
    assert compiled(lacks_guard).check({4: 0}) and not compiled(lacks_guard).check({3: 0})


def test_no_module_hooks():
    module = torch.nn.Linear(2, 2)
    c = compiled(no_module_hooks(X, module))
    assert c.check(module)
    handle = module.register_forward_pre_hook(lambda m, i: None)
    assert not c.check(module)
    assert c.failure_reason(module) == "L['x']: hooks were registered"
    handle.remove()
    assert c.check(module)
    module.register_full_backward_hook(lambda m, gi, go: None)
    assert not c.check(module)


def test_nn_module_identity_and_training_flag():
    module = torch.nn.Linear(2, 2)
    c = compiled(nn_module(AttrSource(X, "m"), module))
    holder = Thing()
    holder.m = module
    assert c.check(holder)
    module.eval()
    assert not c.check(holder)
    assert c.failure_reason(holder) == "L['x'].m.training: expected True, got False"
    module.train()
    holder.m = torch.nn.Linear(2, 2)
    assert c.failure_reason(holder).startswith("local 'x.m' changed")


def test_nn_module_rejects_non_modules():
    with pytest.raises(TypeError, match=r"torch.nn.Module"):
        nn_module(X, object())


def test_factories_reject_non_sources():
    with pytest.raises(TypeError, match="Source"):
        type_match("x", 1)


def test_equals_match_on_an_uncopyable_value_is_a_clear_error():
    class Uncopyable:
        def __deepcopy__(self, memo):
            raise RuntimeError("no copies")

    with pytest.raises(TypeError, match="id_match"):
        equals_match(X, Uncopyable())


def test_describing_a_guarded_object_runs_none_of_its_code():
    # Guards describe what they hold when built: a class's own __repr__ (a metaclass's, a bound method's
    # object's) ran at every compile, and one that raises made the compile fail.
    calls = []

    class Loud(type):
        def __repr__(cls):
            calls.append(cls)
            raise RuntimeError("repr")

    class Config(metaclass=Loud):
        scale = 2

        def method(self):
            return self

        def __repr__(self):
            calls.append(self)
            raise RuntimeError("repr")

    config = Config()
    for obj in (Config, config, config.method, [config], {"k": (config,)}):
        assert id_match(GlobalSource("obj"), obj).detail.startswith(("is <", "is [", "is {"))
    assert calls == []
    compiled = GuardSet([id_match(GlobalSource("obj"), Config)]).compile((), {"obj": Config})
    assert compiled.check()
