"""dynajit's guards: sources, guard kinds, and guard sets compiled into fast check functions.

A :class:`Source` says how a value is reached from a call (``L['x']``,
``G['torch']``, ``L['self'].linear.weight``). A guard factory makes one guard
of one kind over sources (``tensor_match``, ``constant_match``, ...). A
:class:`GuardSet` collects guards, prints them one per line, and compiles them
into one generated function (:class:`CompiledGuards`) whose ``check(*args)``
says whether a compiled entry may be reused and whose ``failure_reason(*args)``
says, in a sentence, why not.
"""

from ._compile import CompiledGuards, GuardCompileError
from ._expression import expression
from ._guard import Check, Cost, Guard
from ._guard_set import GuardSet
from ._kinds import (
    constant_match,
    dict_contains,
    dict_keys,
    equals_match,
    function_match,
    hasattr_match,
    id_match,
    identity_of,
    is_none,
    length_check,
    nn_module,
    no_module_hooks,
    not_none,
    type_match,
    weak_referents,
)
from ._sources import (
    AttrSource,
    BufferSource,
    ClassMemberSource,
    ClosureSource,
    DefaultArgSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    ParamSource,
    PlainAttrSource,
    SizeSource,
    Source,
    StrideSource,
    SubmoduleSource,
    TypeSource,
    class_member,
)
from ._state import (
    GLOBAL_STATE_READERS,
    backend_match,
    global_module_hooks,
    global_module_hooks_dicts,
    global_state,
    process_state,
)
from ._tensor import layout_match, storage_apart, tensor_aliasing, tensor_match

__all__ = [
    "GLOBAL_STATE_READERS",
    "AttrSource",
    "BufferSource",
    "ClassMemberSource",
    "Check",
    "ClosureSource",
    "CompiledGuards",
    "Cost",
    "DefaultArgSource",
    "GlobalSource",
    "Guard",
    "GuardCompileError",
    "GuardSet",
    "ItemSource",
    "LocalSource",
    "ParamSource",
    "PlainAttrSource",
    "SizeSource",
    "Source",
    "StrideSource",
    "SubmoduleSource",
    "TypeSource",
    "backend_match",
    "class_member",
    "constant_match",
    "dict_contains",
    "dict_keys",
    "equals_match",
    "expression",
    "function_match",
    "global_module_hooks",
    "global_module_hooks_dicts",
    "global_state",
    "hasattr_match",
    "id_match",
    "identity_of",
    "is_none",
    "layout_match",
    "length_check",
    "nn_module",
    "no_module_hooks",
    "not_none",
    "process_state",
    "storage_apart",
    "tensor_aliasing",
    "tensor_match",
    "type_match",
    "weak_referents",
]
