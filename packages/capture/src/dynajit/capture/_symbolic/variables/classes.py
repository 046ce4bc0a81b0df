"""Classes as values: reading their attributes and calling them (construction, enum lookups, metaclasses).

Calling a class follows ``type(cls).__call__``: a metaclass whose ``__call__``
is written in Python has it inlined (``variables/metaclasses.py``; its
``super().__call__(...)`` is ``type.__call__``, the construction below); an
enum class is a lookup of an existing member (``variables/enums.py``);
classes written in Python are constructed while tracing (``construct.py``);
builtin classes go through the builtins table.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from dynajit.capture._symbolic.paths import Attr
from dynajit.capture._symbolic.variables.base import VT, attribute_missing, unsupported
from dynajit.capture._symbolic.variables.enums import enum_call, enum_members, is_enum_class
from dynajit.capture._symbolic.variables.objects import ObjectVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["ClassVar"]


class ClassVar(ObjectVar):
    """A class. Reading attributes works; calling one constructs, looks up or goes through the builtins table."""

    def getattr(self, tx: Tracer, name: str) -> VT:
        try:
            inspect.getattr_static(self.value, name)
        except AttributeError:
            if hasattr(self.value, name):  # its metaclass answers it (a __getattr__, a descriptor)
                unsupported(f"attribute {name!r} of class {self.value.__name__} comes from its metaclass")
            attribute_missing(tx, self.source, name, f"type object {self.value.__name__!r} has no attribute {name!r}")
        return tx.wrap(getattr(self.value, name), Attr(self.source, name) if self.source is not None else None)

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.builtins_table import BUILTINS, call_builtin
        from dynajit.capture._symbolic.construct import (
            construct_instance,
            construct_torch_module,
            constructs_instances,
            is_plain_module_subclass,
            is_stateless_torch_module_class,
        )
        from dynajit.capture._symbolic.variables.contexts import CONTEXT_MANAGER_CALLS
        from dynajit.capture._symbolic.variables.metaclasses import python_metaclass_call

        cls = self.value
        if is_enum_class(cls):
            return enum_call(tx, self, args, kwargs)
        if is_plain_module_subclass(cls) and not args and not kwargs:
            return construct_torch_module(tx, cls, args, kwargs)  # made for real: only nn.Module.__init__ runs
        if cls not in BUILTINS and cls not in CONTEXT_MANAGER_CALLS and constructs_instances(cls):
            meta_call = python_metaclass_call(tx, self)
            if meta_call is not None:
                return meta_call.call(tx, [self, *args], kwargs)
            return construct_instance(tx, cls, self.source, args, kwargs)
        if is_stateless_torch_module_class(cls):
            return construct_torch_module(tx, cls, args, kwargs)
        return call_builtin(tx, cls, args, kwargs)

    def unpack(self, tx: Tracer) -> list[VT]:
        if is_enum_class(self.value):
            return enum_members(tx, self)
        return super().unpack(tx)

    def reconstruct(self, cg: CodeGen) -> None:
        # A class read without a path (a builtin such as IndexError) is loaded from a global of the new code.
        self.reconstruct_object(cg, self.value)
