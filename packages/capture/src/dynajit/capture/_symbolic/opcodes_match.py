"""Opcode handlers of structural pattern matching (``match``/``case``), as ``Python/bytecodes.c`` defines them.

``MATCH_SEQUENCE`` and ``MATCH_MAPPING`` read the subject's class flags, ``GET_LEN`` its length, ``MATCH_KEYS``
the values of a mapping pattern's keys (through ``get``, never ``__getitem__``, so ``__missing__`` is not called),
``MATCH_CLASS`` an ``isinstance`` check and the attributes a class pattern names (positional ones through the
class's ``__match_args__``). Each reads what its Python counterpart reads, through the same traced operations
(``isinstance``, ``getattr`` with a default, ``len``), so each fact is guarded where those guard it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.builtins_table import BUILTINS
from dynajit.capture._symbolic.opcodes_ops import getitem, identical
from dynajit.capture._symbolic.registry import handler
from dynajit.capture._symbolic.variables import ConstVar, DictVar, TupleVar, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.attribute_reads import read_or_missing

if TYPE_CHECKING:
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer
    from dynajit.capture._symbolic.variables import VT

__all__: list[str] = []

_SEQUENCE = 1 << 5  # Py_TPFLAGS_SEQUENCE: list, tuple, range, deque, Sequence ABC subclasses; not str or bytes
_MAPPING = 1 << 6  # Py_TPFLAGS_MAPPING: dict and Mapping ABC subclasses
_MATCH_SELF = 1 << 22  # _Py_TPFLAGS_MATCH_SELF: bool, int, float, str, bytes, list, dict, ...: `int(x)` binds itself
_ABSENT = object()  # the default a mapping pattern's get() is given: no user value is this object


def _flag(tx: Tracer, flag: int) -> None:
    tx.push(ConstVar(bool(tx.stack[-1].python_type().__flags__ & flag)))


@handler("MATCH_SEQUENCE")
def _match_sequence(tx: Tracer, inst: Inst) -> None:
    _flag(tx, _SEQUENCE)


@handler("MATCH_MAPPING")
def _match_mapping(tx: Tracer, inst: Inst) -> None:
    _flag(tx, _MAPPING)


@handler("GET_LEN")
def _get_len(tx: Tracer, inst: Inst) -> None:
    tx.push(BUILTINS[len](tx, [tx.stack[-1]], {}))


def _key_constants(tx: Tracer, keys: VT) -> list[Any]:
    values = [key.const() for key in keys.unpack(tx)]
    for i, key in enumerate(values):
        if key in values[:i]:
            raises_in_python(
                f"mapping pattern checks duplicate key ({key!r}) (ValueError)",
                ValueError(f"mapping pattern checks duplicate key ({key!r})"),
            )
    return values


@handler("MATCH_KEYS")
def _match_keys(tx: Tracer, inst: Inst) -> None:
    subject, keys = tx.stack[-2], tx.stack[-1]
    names = _key_constants(tx, keys)
    if isinstance(subject, DictVar) and subject.python_type().get is dict.get:
        if not all(name in subject.items for name in names):
            tx.push(ConstVar(None))
            return
        tx.push(TupleVar([getitem(tx, subject, ConstVar(name)) for name in names]))
        return
    get = subject.getattr(tx, "get")
    found = []
    for name in names:
        value = tx.call(get, [ConstVar(name), ConstVar(_ABSENT)], {})
        if identical(value, ConstVar(_ABSENT), tx):
            tx.push(ConstVar(None))
            return
        found.append(value)
    tx.push(TupleVar(found))


@handler("COPY_DICT_WITHOUT_KEYS", until=(3, 12))
def _copy_dict_without_keys(tx: Tracer, inst: Inst) -> None:
    subject, keys = tx.stack[-2], tx.stack[-1]
    if not isinstance(subject, DictVar):
        unsupported(f"a mapping pattern's **rest of {subject}")
    names = set(_key_constants(tx, keys))
    tx.stack[-1] = DictVar({k: v for k, v in subject.items.items() if k not in names})


def _type_error(message: str) -> None:
    raises_in_python(f"{message} (TypeError)", TypeError(message))


def _class_pattern_names(tx: Tracer, cls_var: VT, positional: int, keywords: tuple[str, ...]) -> tuple[bool, list[str]]:
    """Whether the subject itself is the one positional sub-pattern (``int(x)``), and the attribute names the
    class pattern reads after it, in order. Raises in Python the TypeErrors CPython's ``match_class`` raises."""
    cls = cls_var.const()
    name = cls.__name__
    match_self, names = False, []
    if positional:
        found = read_or_missing(tx, cls_var, "__match_args__")
        match_args = () if found is None else found.const()
        if found is None:  # (the flag counts only where the class defines no __match_args__, as for subclasses)
            match_self = bool(cls.__flags__ & _MATCH_SELF)
        elif type(match_args) is not tuple:
            _type_error(f"{name}.__match_args__ must be a tuple (got {type(match_args).__name__})")
        allowed = 1 if match_self else len(match_args)
        if positional > allowed:
            _type_error(f"{name}() accepts {allowed} positional sub-pattern{'' if allowed == 1 else 's'} "
                        f"({positional} given)")  # fmt: skip
        if not match_self:
            names = list(match_args[:positional])
            for attr in names:
                if type(attr) is not str:
                    _type_error(f"__match_args__ elements must be strings (got {type(attr).__name__})")
    names += keywords
    for i, attr in enumerate(names):
        if attr in names[:i]:
            _type_error(f"{name}() got multiple sub-patterns for attribute {attr!r}")
    return match_self, names


@handler("MATCH_CLASS")
def _match_class(tx: Tracer, inst: Inst) -> None:
    keywords = tx.pop()
    cls_var = tx.pop()
    subject = tx.pop()
    if not cls_var.is_const():
        unsupported(f"a class pattern whose class is {cls_var}")
    if not isinstance(cls_var.const(), type):
        _type_error(f"called match pattern must be a {'type' if tx.version < (3, 12) else 'class'}")
    if not BUILTINS[isinstance](tx, [subject, cls_var], {}).truth(tx):
        tx.push(ConstVar(None))
        return
    match_self, names = _class_pattern_names(tx, cls_var, inst.arg, keywords.const())
    found = [subject] if match_self else []
    for name in names:
        value = read_or_missing(tx, subject, name)
        if value is None:  # (an AttributeError: the pattern does not match)
            tx.push(ConstVar(None))
            return
        found.append(value)
    tx.push(TupleVar(found))
