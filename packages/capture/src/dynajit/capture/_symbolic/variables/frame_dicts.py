"""Dict subclass objects of the frame (transformers' ModelOutput): the dict base's own C methods.

``keys``/``values``/``items``/``get``/``[]``/``in``/``len``/iteration of such an object, and ``super().get``
(``__getitem__``, ``__contains__``) from its Python overrides, read the real dict: every item by its key under
a DICT_KEYS guard on the object, so a key added or removed recompiles.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from dynajit.capture._symbolic.paths import Item
from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar, constant_key

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer
    from dynajit.capture._symbolic.variables.objects import UserObjectVar

__all__ = ["DICT_READS", "DictRead", "FrameDictMethod", "dict_base_method"]

DICT_READS = ("get", "__getitem__", "__contains__")


# Methods of dict and OrderedDict read from a subclass object of the frame (ModelOutput.keys, .items, ...).
_FRAME_DICT_METHODS = ("keys", "values", "items", "get", "__getitem__", "__contains__", "__len__", "__iter__")


def dict_base_method(cls: type, name: str) -> type | None:
    """The dict base whose own C method ``cls`` uses as ``name`` (None when a Python class defines it)."""
    if name not in _FRAME_DICT_METHODS:
        return None
    for base in cls.__mro__:
        if name in vars(base):
            return base if base in (dict, collections.OrderedDict) else None
    return None


class FrameDictMethod(VT):
    """``obj.keys`` (``values``, ``items``, ``get``, ...) of a dict subclass object from the frame: the dict base's
    own method over the real items, read each by its key and guarded by the keys."""

    def __init__(self, obj: UserObjectVar, name: str) -> None:
        self.obj, self.name = obj, name

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.variables.containers import DictViewVar
        from dynajit.capture._symbolic.variables.item_iterators import IteratorVar

        name, instance = self.name, self.obj.value
        if name in DICT_READS:
            return DictRead(instance, self.obj, name).call(tx, args, kwargs)
        if args or kwargs:
            raises_in_python(f"{type(instance).__name__}.{name}() takes no arguments (TypeError)")
        items = self.obj.dict_items(tx)
        if name == "__len__":
            return ConstVar(len(items))
        if name == "__iter__":
            return IteratorVar([ConstVar(key) for key in items])
        base = dict_base_method(type(instance), name) or dict
        return DictViewVar(self.obj, items, name, base)

    def children(self) -> list[VT]:
        return [self.obj]

    def __repr__(self) -> str:
        return f"FrameDictMethod({type(self.obj.value).__name__}.{self.name})"


class DictRead(VT):
    """``super().get(key)`` in a dict subclass: the item read from the real dict, guarded by its keys."""

    def __init__(self, instance: dict, obj: VT, name: str) -> None:
        self.instance, self.obj, self.name = instance, obj, name

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs or not 1 <= len(args) <= (2 if self.name == "get" else 1) or not args[0].is_const():
            unsupported(f"dict.{self.name} with these arguments")
        key = args[0].const()
        if key is not None and not constant_key(key):
            unsupported(f"dict.{self.name} with a {type(key).__name__} key")
        tx.output.guard("dict_keys", self.obj.source, self.instance)
        present = dict.__contains__(self.instance, key)
        if self.name == "__contains__":
            return ConstVar(present)
        if not present:
            if self.name == "__getitem__":
                raises_in_python(f"KeyError: {key!r}", KeyError(key))
            return args[1] if len(args) == 2 else ConstVar(None)
        # dict's own read, like the one being traced (an overridden __getitem__ would not be what super() calls)
        assert self.obj.source is not None  # checked by SuperVar before making this
        return tx.wrap(dict.__getitem__(self.instance, key), Item(self.obj.source, key))

    def __repr__(self) -> str:
        return f"DictRead({type(self.instance).__name__}.{self.name})"
