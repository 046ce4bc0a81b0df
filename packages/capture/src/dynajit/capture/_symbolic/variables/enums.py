"""Enum classes while tracing: ``Color(2)``, ``Color["RED"]``, iteration and ``len`` over the members.

Members are existing constants, so these are lookups, never constructions: each
is answered from the class's own tables and guarded exactly where it was read
(``Color._value2member_map_[2]``, ``Color._member_map_["RED"]`` by identity,
``Color._member_names_`` by value for iteration), so a changed table recompiles.
A lookup that fails raises in Python (Python's own ValueError or KeyError);
one that would run user code (a custom ``_missing_``, a Flag's composite
values, unhashable values) or make a new enum (the functional API) is a break.
"""

from __future__ import annotations

import enum
import inspect
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.paths import Attr, Item
from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["enum_call", "enum_getitem", "enum_members", "is_enum_class"]

_ENUM_META = type(enum.Enum)  # EnumType (EnumMeta before 3.11's rename)


def is_enum_class(cls: Any) -> bool:
    """An enum class (its metaclass derives from EnumType)."""
    return isinstance(cls, _ENUM_META)


def _path(cls_vt: VT, table: str, key: Any) -> Any:
    return Item(Attr(cls_vt.source, table), key) if cls_vt.source is not None else None


def _own_protocol(cls: type, name: str) -> None:
    """Refuse a metaclass that overrides the lookup ``name`` (its Python code would decide the answer)."""
    if inspect.getattr_static(type(cls), name) is not inspect.getattr_static(_ENUM_META, name):
        unsupported(f"{type(cls).__name__}.{name} overrides the enum lookup")


def enum_call(tx: Tracer, cls_vt: VT, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``Color(value)``: the member with that value (a member is returned as it is)."""
    cls = cls_vt.const()
    _own_protocol(cls, "__call__")
    if kwargs or len(args) != 1:
        unsupported(f"calling enum {cls.__name__} with other than one value (the functional API makes a new enum)")
    if not args[0].is_const():
        unsupported(f"{cls.__name__}(value) of a value not known while tracing")
    value = args[0].const()
    if isinstance(value, cls):
        return args[0]
    try:
        member = cls._value2member_map_.get(value)
    except TypeError:
        unsupported(f"{cls.__name__}(value) of an unhashable value (looked up by a linear search)")
    if member is None:
        if inspect.getattr_static(cls, "_missing_") is not vars(enum.Enum)["_missing_"]:
            unsupported(f"{cls.__name__}._missing_ decides values that are not members")
        message = f"{value!r} is not a valid {cls.__qualname__}"
        raises_in_python(f"ValueError: {message}", ValueError(message))
    return tx.wrap(member, _path(cls_vt, "_value2member_map_", value))


def enum_getitem(tx: Tracer, cls_vt: VT, key: VT) -> VT:
    """``Color["RED"]``: the member of that name (aliases included)."""
    cls = cls_vt.const()
    _own_protocol(cls, "__getitem__")
    if not key.is_const():
        unsupported(f"{cls.__name__}[name] of a name not known while tracing")
    name = key.const()
    try:
        member = cls._member_map_[name]
    except (KeyError, TypeError) as exc:
        raises_in_python(f"{type(exc).__name__}: {exc}", type(exc)(*exc.args))
    return tx.wrap(member, _path(cls_vt, "_member_map_", name))


def enum_members(tx: Tracer, cls_vt: VT) -> list[VT]:
    """``list(Color)``: the members in definition order, aliases left out."""
    cls = cls_vt.const()
    _own_protocol(cls, "__iter__")
    source = cls_vt.source
    names = tx.wrap(cls._member_names_, Attr(source, "_member_names_") if source is not None else None)
    keys = [name.const() for name in names.unpack(tx)]
    return [tx.wrap(cls._member_map_[key], _path(cls_vt, "_member_map_", key)) for key in keys]
