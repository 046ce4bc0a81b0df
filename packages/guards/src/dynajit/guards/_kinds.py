"""Guard kinds on Python values: types, identities, constants, containers, attributes, modules."""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Hashable, Sequence
from typing import Any

import torch

from ._guard import Check, Cost, Guard, hashable_value, short_repr
from ._sources import Source

__all__ = [
    "constant_match",
    "dict_contains",
    "dict_keys",
    "equals_match",
    "function_match",
    "hasattr_match",
    "id_match",
    "identity_of",
    "is_none",
    "length_check",
    "nn_module",
    "no_module_hooks",
    "not_none",
    "type_check",
    "type_match",
    "type_name",
    "weak_referents",
]

# The kinds whose first check is that the value is one object (``identity_of`` returns it).
_IDENTITY_KINDS = ("ID_MATCH", "FUNCTION_MATCH", "NN_MODULE")

# Python scalars CONSTANT_MATCH accepts; anything else equality-comparable goes through EQUALS_MATCH.
_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented))


def type_name(cls: type) -> str:
    """A short readable name of a class: ``int``, ``torch.Tensor``, ``mymod.MyModule``."""
    module = cls.__module__
    if module == "builtins":
        return cls.__qualname__
    if module.startswith("torch.") and getattr(torch, cls.__qualname__, None) is cls:
        module = "torch"
    return f"{module}.{cls.__qualname__}"


def _require_source(source: Any, factory: str) -> Source:
    if not isinstance(source, Source):
        raise TypeError(f"{factory}() needs a Source as its first argument (e.g. LocalSource('x')), got {source!r}")
    return source


def type_check(source: Source, cls: type) -> Check:
    """The check ``type(value) is cls`` with its sentence."""
    return Check(
        "type({0}) is {cls}",
        (source,),
        Cost.IDENTITY,
        lambda values: f"{source.name()} type: expected {type_name(cls)}, got {type_name(type(values[0]))}",
        {"cls": cls},
    )


def type_match(source: Source, example: Any) -> Guard:
    """TYPE_MATCH: the value's exact class is ``type(example)``."""
    _require_source(source, "type_match")
    cls = type(example)
    return Guard(
        "TYPE_MATCH", (source,), (type_check(source, cls),), f"type is {type_name(cls)}", ("TYPE", source, cls)
    )


def _identity_check(source: Source, obj: Any, weak: bool) -> Check:
    """The check that the value is ``obj``: by a strong reference, or by a weak one when ``weak`` and possible."""

    expected = short_repr(obj)  # the sentence must not hold ``obj`` either

    def changed(values: tuple[Any, ...]) -> str:
        return f"{source.label()} changed: expected {expected}, got {short_repr(values[0])}"

    if weak:
        try:
            ref = weakref.ref(obj)
        except TypeError:  # no weak references to it (an int, a tuple): held strongly
            pass
        else:
            # `ref() is value is not None`: a dead referent (None) matches nothing, not even a None value.
            return Check("{ref}() is {0} is not None", (source,), Cost.IDENTITY, changed, {"ref": ref})
    return Check("{0} is {obj}", (source,), Cost.IDENTITY, changed, {"obj": obj})


def _identity_guard(kind: str, source: Source, obj: Any, weak: bool) -> Guard:
    """The value is ``obj`` itself.

    A strong guard keeps ``obj`` alive, so its id cannot be reused. A weak one does not: once ``obj`` dies the
    guard fails for every value, and :func:`weak_referents` names what its owner should watch to drop it.
    """
    check = _identity_check(source, obj, weak)
    return Guard(kind, (source,), (check,), f"is {short_repr(obj)} (id {id(obj):#x})", (kind, source, id(obj)))


def id_match(source: Source, obj: Any, *, weak: bool = False) -> Guard:
    """ID_MATCH: the value is the very object ``obj`` (identity); ``weak=True`` does not keep ``obj`` alive."""
    _require_source(source, "id_match")
    return _identity_guard("ID_MATCH", source, obj, weak)


def function_match(source: Source, fn: Any, *, weak: bool = False) -> Guard:
    """FUNCTION_MATCH: the value is the function ``fn``; replacing it (e.g. a global helper) recompiles."""
    _require_source(source, "function_match")
    if not callable(fn):
        raise TypeError(f"function_match() expects a callable for {source.name()}, got {short_repr(fn)}")
    return _identity_guard("FUNCTION_MATCH", source, fn, weak)


def identity_of(guard: Guard) -> Any:
    """The object an identity guard (ID_MATCH, FUNCTION_MATCH, NN_MODULE) expects (None once a weakly held one died)."""
    if guard.kind not in _IDENTITY_KINDS:
        raise ValueError(f"identity_of() takes an identity guard ({', '.join(_IDENTITY_KINDS)}), got {guard.kind}")
    check = guard.checks[0]  # the identity check comes first
    return check.constants["ref"]() if "ref" in check.constants else check.constants["obj"]


def weak_referents(guard: Guard) -> list[weakref.ref[Any]]:
    """The weak references a guard's checks compare with (empty for a guard made with ``weak=False``)."""
    return [value for check in guard.checks for value in check.constants.values() if isinstance(value, weakref.ref)]


def _describe_value(value: Any) -> str:
    return f"{short_repr(value)} ({type_name(type(value))})"


def _value_checks(source: Source, value: Any) -> tuple[Check, ...]:
    """Checks that the source's value has ``value``'s exact type and equals it (NaN and -0.0 included)."""
    cls = type(value)

    def changed(values: tuple[Any, ...]) -> str:
        got = values[0]
        if type(got) is not cls:
            return f"{source.label()} changed: expected {_describe_value(value)}, got {_describe_value(got)}"
        return f"{source.label()} changed: expected {short_repr(value)}, got {short_repr(got)}"

    if value is None or cls is bool or value is Ellipsis or value is NotImplemented:
        return (Check("{0} is {value}", (source,), Cost.IDENTITY, changed, {"value": value}),)
    type_check = Check("type({0}) is {cls}", (source,), Cost.IDENTITY, changed, {"cls": cls})
    if cls is float and math.isnan(value):
        return type_check, Check("{0} != {0}", (source,), Cost.CHEAP, changed)
    if cls is float and value == 0.0:
        sign = math.copysign(1.0, value)
        zero = Check(
            "{0} == 0.0 and {copysign}(1.0, {0}) == {sign}",
            (source,),
            Cost.CHEAP,
            changed,
            {"copysign": math.copysign, "sign": sign},
        )
        return type_check, zero
    return type_check, Check("{0} == {value}", (source,), Cost.CHEAP, changed, {"value": value})


def constant_match(source: Source, value: Any) -> Guard:
    """CONSTANT_MATCH: a Python scalar or string (None, bool, int, float, complex, str, bytes, or a subclass
    such as an ``IntEnum`` member), of that exact type and equal to ``value``.

    ``1``, ``1.0`` and ``True`` are told apart (a graph specialised on an int
    must not run for a bool).
    """
    _require_source(source, "constant_match")
    if not isinstance(value, _CONSTANT_TYPES):
        raise TypeError(
            f"constant_match() takes a Python scalar or string, got {type_name(type(value))} for {source.name()}; "
            "use equals_match() for other equality-comparable values or id_match() for objects"
        )
    return Guard(
        "CONSTANT_MATCH",
        (source,),
        _value_checks(source, value),
        f"== {value!r}",
        ("CONSTANT", source, hashable_value(value)),
    )


def equals_match(source: Source, value: Any) -> Guard:
    """EQUALS_MATCH: same exact type and ``==`` to a copy of ``value`` taken now (tuples, lists, dtypes, ...)."""
    _require_source(source, "equals_match")
    try:
        expected = copy.deepcopy(value)
    except Exception as error:
        raise TypeError(
            f"equals_match() cannot copy the value of {source.name()} ({type_name(type(value))}: {error}); "
            "guard an object that cannot be copied with id_match() or type_match()"
        ) from error
    return Guard(
        "EQUALS_MATCH",
        (source,),
        _value_checks(source, expected),
        f"== {short_repr(expected)}",
        ("EQUALS", source, hashable_value(expected)),
    )


def length_check(source: Source, example: Sequence[Any] | dict[Any, Any]) -> Guard:
    """LENGTH_CHECK: the value has ``type(example)`` exactly and ``len(example)`` items (lists, tuples, dicts)."""
    _require_source(source, "length_check")
    cls, length = type(example), len(example)

    def wrong_length(values: tuple[Any, ...]) -> str:
        return f"{source.name()} length: expected {length}, got {len(values[0])}"

    checks = (
        type_check(source, cls),
        Check("len({0}) == {length}", (source,), Cost.CHEAP, wrong_length, {"length": length}),
    )
    return Guard(
        "LENGTH_CHECK", (source,), checks, f"{type_name(cls)} of length {length}", ("LEN", source, cls, length)
    )


def dict_keys(source: Source, example: dict[Any, Any]) -> Guard:
    """DICT_KEYS: the value is a dict (of ``type(example)``) with exactly ``example``'s keys, in the same order."""
    _require_source(source, "dict_keys")
    if not isinstance(example, dict):
        raise TypeError(f"dict_keys() needs a dict example for {source.name()}, got {type_name(type(example))}")
    cls, keys = type(example), tuple(example)

    def wrong_keys(values: tuple[Any, ...]) -> str:
        return f"{source.name()} keys: expected {short_repr(list(keys))}, got {short_repr(list(values[0]))}"

    checks = (
        type_check(source, cls),
        Check("tuple({0}) == {keys}", (source,), Cost.CHEAP, wrong_keys, {"keys": keys}),
    )
    return Guard("DICT_KEYS", (source,), checks, f"keys {short_repr(list(keys))}", ("KEYS", source, cls, keys))


def _presence_guard(
    kind: str, source: Source, test: str, member: Any, what: str, expected: bool, key: Hashable
) -> Guard:
    """A guard whose one check is ``test`` (a template over ``{0}`` and ``{member}``) being ``expected``."""
    state = "" if expected else "not "

    def wrong(values: tuple[Any, ...]) -> str:
        return f"{source.name()}: expected to {state}{what}"

    template = test if expected else f"not ({test})"
    check = Check(template, (source,), Cost.CHEAP, wrong, {"member": member})
    return Guard(kind, (source,), (check,), f"{state}{what}", key)


def dict_contains(source: Source, key: Any, expected: bool = True) -> Guard:
    """DICT_CONTAINS: ``key in value`` is ``expected`` (an instance ``__dict__`` that must not shadow a class member).

    ``key`` must be hashable; it is bound as a constant of the check.
    """
    _require_source(source, "dict_contains")
    expected = bool(expected)
    dedupe = ("DICT_CONTAINS", source, hashable_value(key), expected)
    what = f"contain {short_repr(key)}"
    return _presence_guard("DICT_CONTAINS", source, "{member} in {0}", key, what, expected, dedupe)


def not_none(source: Source) -> Guard:
    """NOT_NONE: the value is not ``None``."""
    _require_source(source, "not_none")
    check = Check(
        "{0} is not None", (source,), Cost.IDENTITY, lambda values: f"{source.name()}: expected not None, got None"
    )
    return Guard("NOT_NONE", (source,), (check,), "is not None", ("NOT_NONE", source))


def is_none(source: Source) -> Guard:
    """IS_NONE: the value is ``None``."""
    _require_source(source, "is_none")
    check = Check(
        "{0} is None",
        (source,),
        Cost.IDENTITY,
        lambda values: f"{source.name()}: expected None, got {short_repr(values[0])}",
    )
    return Guard("IS_NONE", (source,), (check,), "is None", ("IS_NONE", source))


def hasattr_match(source: Source, attr: str, expected: bool = True) -> Guard:
    """HASATTR: ``hasattr(value, attr)`` is ``expected``."""
    _require_source(source, "hasattr_match")
    expected = bool(expected)
    dedupe = ("HASATTR", source, attr, expected)
    what = f"have attribute {attr!r}"
    return _presence_guard("HASATTR", source, "hasattr({0}, {member})", attr, what, expected, dedupe)


# A module's own hook registries that nn.Module.__call__ consults.
MODULE_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def no_module_hooks(source: Source, module: Any) -> Guard:
    """NO_MODULE_HOOKS: the module has no forward, forward-pre, backward or backward-pre hooks (one check
    over the registries ``module`` has, as a trace that inlined its forward relies on)."""
    _require_source(source, "no_module_hooks")
    names = [name for name in MODULE_HOOK_DICTS if isinstance(getattr(module, name, None), dict)]
    template = "not ({})".format(" or ".join(f"{{0}}.{name}" for name in names))

    def wrong(values: tuple[Any, ...]) -> str:
        return f"{source.name()}: hooks were registered"

    check = Check(template, (source,), Cost.CHEAP, wrong)
    return Guard("NO_MODULE_HOOKS", (source,), (check,), "no hooks", ("NO_MODULE_HOOKS", source, tuple(names)))


def nn_module(source: Source, module: Any, *, weak: bool = False) -> Guard:
    """NN_MODULE: the value is ``module`` itself and its ``training`` flag is unchanged (``weak``: as id_match)."""
    _require_source(source, "nn_module")
    training = getattr(module, "training", None)
    if not isinstance(training, bool):
        raise TypeError(f"nn_module() needs a torch.nn.Module for {source.name()}, got {type_name(type(module))}")
    identity = _identity_check(source, module, weak)
    mode = Check(
        "{0}.training is {training}",
        (source,),
        Cost.CHEAP,
        lambda values: f"{source.name()}.training: expected {training}, got {values[0].training}",
        {"training": training},
    )
    detail = f"is {type_name(type(module))} (id {id(module):#x}), training={training}"
    return Guard("NN_MODULE", (source,), (identity, mode), detail, ("NN_MODULE", source, id(module), training))
