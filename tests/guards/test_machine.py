"""The guard machine against the generated Python check: the same answer for every change a guard watches.

Each scenario builds a guard set over live objects, compiles it once, then changes one fact at a time (an
attribute gone or replaced, a key added, a hook registered, an object dead, a value whose comparison or
truth raises) and asks both the machine and the Python function. They must agree on every call, and an
exception that is not an ``Exception`` (KeyboardInterrupt) must reach the caller from both.
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

from dynajit.guards import (
    AttrSource,
    ClosureSource,
    GlobalSource,
    GuardSet,
    ItemSource,
    LocalSource,
    constant_match,
    dict_contains,
    dict_keys,
    equals_match,
    function_match,
    global_state,
    hasattr_match,
    id_match,
    is_none,
    length_check,
    nn_module,
    no_module_hooks,
    not_none,
    tensor_aliasing,
    tensor_match,
    type_match,
)
from dynajit.guards._native import machine_module

X, Y = LocalSource("x"), LocalSource("y")


@pytest.fixture(autouse=True)
def _machine() -> None:
    if machine_module(wait=True) is None:
        pytest.skip("the guard machine cannot be built here (no C compiler or Python headers)")


def _agree(compiled: Any, *args: Any) -> bool:
    assert compiled.check is not compiled.python_check, "the machine did not run"
    answer = compiled.check(*args)
    assert answer is compiled.python_check(*args), args
    return answer


class Settings:
    def __init__(self) -> None:
        self.flag = True
        self.scale = 2.5
        self.table = {"a": 1, "b": [1, 2]}
        self.name = "x"


class Raising:
    """Comparisons and truth that raise: an Exception answers False, a KeyboardInterrupt propagates."""

    def __init__(self, error: type[BaseException]) -> None:
        self.error = error

    def __eq__(self, other: object) -> bool:
        raise self.error("compared")

    def __len__(self) -> int:
        raise self.error("measured")

    def __contains__(self, item: object) -> bool:
        raise self.error("searched")

    __hash__ = object.__hash__


def _settings_guards(settings: Settings) -> GuardSet:
    return GuardSet(
        [
            type_match(X, settings),
            constant_match(AttrSource(X, "flag"), True),
            constant_match(AttrSource(X, "scale"), 2.5),
            equals_match(AttrSource(X, "name"), "x"),
            dict_keys(AttrSource(X, "table"), settings.table),
            length_check(ItemSource(AttrSource(X, "table"), "b"), settings.table["b"]),
            constant_match(ItemSource(ItemSource(AttrSource(X, "table"), "b"), 1), 2),
            dict_contains(AttrSource(X, "__dict__"), "extra", False),
            hasattr_match(X, "missing", False),
        ]
    )


_CHANGES: list[tuple[str, Callable[[Settings], Any]]] = [
    ("nothing", lambda s: None),
    ("flag flipped", lambda s: setattr(s, "flag", False)),
    ("flag a truthy int", lambda s: setattr(s, "flag", 1)),
    ("scale changed", lambda s: setattr(s, "scale", 3.0)),
    ("name equal but another object", lambda s: setattr(s, "name", "".join(["x"]))),
    ("name changed", lambda s: setattr(s, "name", "y")),
    ("name compares raising", lambda s: setattr(s, "name", Raising(ValueError))),
    ("attribute deleted", lambda s: delattr(s, "scale")),
    ("key added", lambda s: s.table.__setitem__("c", 3)),
    ("key removed", lambda s: s.table.pop("a")),
    ("list grown", lambda s: s.table["b"].append(3)),
    ("list item changed", lambda s: s.table["b"].__setitem__(1, 5)),
    ("list replaced by a mapping", lambda s: s.table.__setitem__("b", {1: 2})),
    ("length raising", lambda s: s.table.__setitem__("b", Raising(TypeError))),
    ("extra attribute", lambda s: setattr(s, "extra", 1)),
    ("missing attribute appears", lambda s: setattr(s, "missing", None)),
    ("type swapped", lambda s: setattr(s, "__class__", type("Other", (Settings,), {}))),
]


@pytest.mark.parametrize(("what", "change"), _CHANGES, ids=[c[0] for c in _CHANGES])
def test_object_state_guards_agree(what, change):
    settings = Settings()
    compiled = _settings_guards(settings).compile(("x",), {})
    assert _agree(compiled, settings)
    change(settings)
    _agree(compiled, settings)


class Interrupting:
    """Its missing attributes raise AttributeError, or KeyboardInterrupt once ``interrupt`` is set."""

    interrupt = False

    def __getattr__(self, name: str) -> Any:
        raise (KeyboardInterrupt if self.interrupt else AttributeError)(name)


def test_a_keyboard_interrupt_propagates_from_both():
    obj = Interrupting()
    compiled = GuardSet([hasattr_match(X, "missing", False)]).compile(("x",), {})
    assert _agree(compiled, obj)
    obj.interrupt = True
    with pytest.raises(KeyboardInterrupt):
        compiled.check(obj)
    with pytest.raises(KeyboardInterrupt):
        compiled.python_check(obj)


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(2, 2)
        self.eps = 1e-5


def _module_guards(block: Block) -> GuardSet:
    proj = AttrSource(X, "proj")
    return GuardSet(
        [
            nn_module(X, block, weak=True),
            no_module_hooks(X, block),
            nn_module(proj, block.proj, weak=True),
            no_module_hooks(proj, block.proj),
            constant_match(AttrSource(X, "eps"), 1e-5),
            id_match(AttrSource(proj, "weight"), block.proj.weight, weak=True),
            function_match(AttrSource(AttrSource(X, "__class__"), "forward"), Block.forward),
            not_none(AttrSource(proj, "bias")),
        ]
    )


_MODULE_CHANGES: list[tuple[str, Callable[[Block], Any]]] = [
    ("nothing", lambda b: None),
    ("eval mode", lambda b: b.eval()),
    ("inner eval mode", lambda b: b.proj.eval()),
    ("forward hook", lambda b: b.register_forward_hook(lambda *a: None)),
    ("inner pre-hook", lambda b: b.proj.register_forward_pre_hook(lambda *a: None)),
    ("weight replaced", lambda b: setattr(b.proj, "weight", torch.nn.Parameter(torch.ones(2, 2)))),
    ("bias removed", lambda b: setattr(b.proj, "bias", None)),
    ("eps changed", lambda b: setattr(b, "eps", 1e-6)),
    ("eps deleted", lambda b: delattr(b, "eps")),
    ("submodule replaced", lambda b: setattr(b, "proj", torch.nn.Linear(2, 2))),
    ("instance attribute shadows a submodule", lambda b: b.__dict__.__setitem__("proj", torch.nn.Linear(2, 2))),
]


@pytest.mark.parametrize(("what", "change"), _MODULE_CHANGES, ids=[c[0] for c in _MODULE_CHANGES])
def test_module_guards_agree(what, change):
    block = Block()
    compiled = _module_guards(block).compile(("x",), {})
    assert _agree(compiled, block)
    change(block)
    _agree(compiled, block)


def test_a_dead_module_fails_in_both():
    block = Block()
    compiled = _module_guards(block).compile(("x",), {})
    other = Block()
    del block
    gc.collect()
    assert not _agree(compiled, other)


def _closure_of(value: Any) -> types.CellType:
    def inner() -> Any:
        return value

    assert inner.__closure__ is not None
    return inner.__closure__[0]


def test_globals_and_closure_cells_agree():
    namespace = {"SCALE": 3, "helper": len}
    cell = _closure_of([1, 2])
    guards = GuardSet(
        [
            constant_match(GlobalSource("SCALE"), 3),
            function_match(GlobalSource("helper"), len),
            length_check(ClosureSource("items"), [1, 2]),
            is_none(ItemSource(GlobalSource("OPTIONAL"), 0)),
        ]
    )
    namespace["OPTIONAL"] = [None]
    compiled = guards.compile(("x",), namespace, {"items": cell})
    assert _agree(compiled, 0)
    namespace["SCALE"] = 4
    assert not _agree(compiled, 0)
    namespace["SCALE"] = 3
    cell.cell_contents.append(3)
    assert not _agree(compiled, 0)
    cell.cell_contents.pop()
    del cell.cell_contents  # an empty cell
    assert not _agree(compiled, 0)
    cell.cell_contents = [1, 2]
    namespace["OPTIONAL"] = []
    assert not _agree(compiled, 0)
    del namespace["helper"]  # (falls back to the builtins, where `helper` is not)
    assert not _agree(compiled, 0)


def test_tensor_guards_agree():
    a, b = torch.ones(2, 3), torch.zeros(2, 3)
    compiled = GuardSet([tensor_match(X, a), tensor_match(Y, b), tensor_aliasing([], [X, Y])]).compile(("x", "y"), {})
    assert _agree(compiled, a, b)
    for x, y in [
        (a, a),  # aliased
        (a.t(), b),  # strides
        (a.double(), b),  # dtype
        (a.requires_grad_(), b),  # requires grad
        (torch.ones(3, 3), b),  # shape
        ([1, 2], b),  # not a tensor
    ]:
        _agree(compiled, x, y)


class _RaisingTensorLike:
    @property
    def dtype(self) -> Any:
        raise RuntimeError("no dtype")


def test_tensor_metadata_and_global_state_agree():
    a = torch.ones(2, 3)
    compiled = GuardSet([tensor_match(X, a), global_state()]).compile(("x",), {})
    assert _agree(compiled, a)
    with torch.inference_mode():
        inference = torch.ones(2, 3)
    for x in [
        inference,  # an inference tensor
        torch.ones(2, 3, device="meta"),  # another device
        torch.ones(3, 2).t(),  # strides
        torch.ones(2, 3)._neg_view(),  # the negative bit
        torch.ones(2, 3, dtype=torch.int64),  # dtype
        torch.ones(2, 3).to_sparse(),  # layout
        _RaisingTensorLike(),  # a read that raises
    ]:
        assert not _agree(compiled, x)
    with torch.no_grad():
        assert not _agree(compiled, a)  # grad mode
    with torch.autocast("cpu"):
        assert not _agree(compiled, a)  # autocast
    assert _agree(compiled, torch.zeros(2, 3))


def test_tensor_metadata_and_global_state_run_no_python():
    # Reads of a tensor's metadata and of the global state are the machine's own instructions: a check of a
    # tensor calls no Python function (each call cost as much as the rest of its check).
    a = torch.ones(2, 3)
    compiled = GuardSet([tensor_match(X, a), global_state()]).compile(("x",), {})
    called: list[str] = []
    sys.setprofile(lambda frame, event, arg: called.append(frame.f_code.co_filename) if event == "call" else None)
    try:
        assert compiled.check(a)
    finally:
        sys.setprofile(None)
    assert called == []


class _Fallback:
    """A missing attribute is answered by ``__getattr__``, as nn.Module's members are."""

    def __getattr__(self, name: str) -> Any:
        if name == "member":
            return "from __getattr__"
        raise AttributeError(name)


class _Described(_Fallback):
    @property
    def value(self) -> str:  # (a data descriptor comes before the instance's dict)
        return "from the property"


class _Looked(_Fallback):
    def __getattribute__(self, name: str) -> Any:
        return "from __getattribute__" if name == "value" else object.__getattribute__(self, name)


class _Slotted:
    __slots__ = ("value",)


class _ClassLevel:
    value = "from the class"  # (an instance's dict comes before a plain class attribute)


def _with_dict_value(cls: type) -> Any:
    obj = cls()
    if hasattr(obj, "__dict__"):
        obj.__dict__["value"] = "from the dict"
    else:
        obj.value = "from the slot"
    return obj


@pytest.mark.parametrize("cls", [Settings, _Fallback, _Described, _Looked, _Slotted, _ClassLevel])
def test_attribute_reads_are_getattrs_whichever_way_the_class_looks_them_up(cls):
    # The machine reads an instance's dict itself where getattr would (a class keeping object's lookup, with no
    # attribute of that name); every other read is getattr's own.
    obj = _with_dict_value(cls)
    expected = getattr(obj, "value")
    compiled = GuardSet([equals_match(AttrSource(X, "value"), expected)]).compile(("x",), {})
    assert _agree(compiled, obj)
    other = _with_dict_value(cls)
    if hasattr(other, "__dict__"):
        other.__dict__["value"] = "another"
    else:
        other.value = "another"
    assert _agree(compiled, other) is (getattr(other, "value") == expected)
    if hasattr(other, "__dict__"):
        del other.__dict__["value"]
        assert _agree(compiled, other) is (getattr(other, "value", None) == expected)
    member = GuardSet([equals_match(AttrSource(X, "member"), "from __getattr__")]).compile(("x",), {})
    assert _agree(member, obj) is isinstance(obj, _Fallback)


class _Meta(type):
    @property
    def on_the_metaclass(cls) -> int:
        return 1

    @property
    def raising(cls) -> int:
        raise AttributeError("computed, then refused")


class _WithMeta(metaclass=_Meta):
    on_the_class = 2


class _Missing:
    def __getattr__(self, name: str) -> Any:
        raise ValueError(name)  # (not an AttributeError: hasattr raises it, and the check fails)


@pytest.mark.parametrize(
    "obj",
    [_WithMeta, _WithMeta(), Settings, Settings(), _Fallback(), _Missing(), torch.nn.Linear(2, 2), torch.nn.Linear],
    ids=lambda obj: obj.__name__ if isinstance(obj, type) else f"{type(obj).__name__}()",
)
@pytest.mark.parametrize("name", ["on_the_metaclass", "raising", "on_the_class", "flag", "member", "weight", "nope"])
def test_hasattr_checks_are_hasattr(obj, name):
    for expected in (True, False):
        compiled = GuardSet([hasattr_match(X, name, expected)]).compile(("x",), {})
        assert compiled.check is not compiled.python_check
        _agree(compiled, obj)
