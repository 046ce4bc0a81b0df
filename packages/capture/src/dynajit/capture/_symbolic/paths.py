"""Access paths: how the transformed code reaches a value the interpreter read from the frame.

A path is rooted at a local, a global, a free variable of the converted frame,
or a stashed object (installed as a global of the transformed code). It turns
into a ``dynajit.guards`` Source for guarding (:meth:`Path.to_source`) and into
bytecode for reconstruction (:meth:`Path.emit`).
"""

from __future__ import annotations

import builtins
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dynajit.guards import (
    AttrSource,
    ClassMemberSource,
    ClosureSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    PlainAttrSource,
    TypeSource,
)
from dynajit.guards import class_member as _class_member

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen

__all__ = [
    "Attr",
    "ClassOf",
    "Closure",
    "Global",
    "Item",
    "Local",
    "PassedCell",
    "Path",
    "PlainAttr",
    "Stash",
    "builtin_path",
    "builtins_of",
    "class_path",
    "reads_hooked",
]


_UNSET = object()


def _source_once(make: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Make a path's Source once and keep it on the path.

    Guards on a model's parameters convert their long paths again and again (every guard, every alias
    check); a fresh Source each time also threw away the hash each Source computes once.
    """

    def to_source(self: Any) -> Any:
        source = self.__dict__.get("_source", _UNSET)
        if source is _UNSET:
            source = make(self)
            object.__setattr__(self, "_source", source)
        return source

    return to_source


class Path:
    """Base of all access paths."""

    def to_source(self) -> Any:
        """The guards Source for this path, or None when the path cannot be guarded (stashed objects)."""
        raise NotImplementedError

    def emit(self, cg: CodeGen) -> None:
        """Emit bytecode pushing the value."""
        raise NotImplementedError

    def name(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


@dataclass(frozen=True)
class Local(Path):
    local: str

    @_source_once
    def to_source(self) -> Any:
        return LocalSource(self.local)

    def emit(self, cg: CodeGen) -> None:
        cg.load_local(self.local)

    def name(self) -> str:
        return f"L[{self.local!r}]"


@dataclass(frozen=True)
class Global(Path):
    glob: str

    @_source_once
    def to_source(self) -> Any:
        return GlobalSource(self.glob)

    def emit(self, cg: CodeGen) -> None:
        cg.load_global(self.glob)

    def name(self) -> str:
        return f"G[{self.glob!r}]"


@dataclass(frozen=True)
class PassedCell(Path):
    """The contents of a cell a resume function takes as an argument (its frame's cell variable ``var``)."""

    var: str

    @_source_once
    def to_source(self) -> Any:
        return AttrSource(LocalSource(self.var), "cell_contents")  # a guard sees the argument: the cell

    def emit(self, cg: CodeGen) -> None:
        cg.load_deref(self.var)  # the frame holds it as its cell variable

    def name(self) -> str:
        return f"L[{self.var!r}].cell_contents"


@dataclass(frozen=True)
class Closure(Path):
    """The contents of a free variable of the converted frame."""

    var: str

    @_source_once
    def to_source(self) -> Any:
        return ClosureSource(self.var)

    def emit(self, cg: CodeGen) -> None:
        cg.load_deref(self.var)

    def name(self) -> str:
        return f"C[{self.var!r}]"


@dataclass(frozen=True)
class Attr(Path):
    base: Path
    attr: str

    @_source_once
    def to_source(self) -> Any:
        base = self.base.to_source()
        return None if base is None else AttrSource(base, self.attr)

    def emit(self, cg: CodeGen) -> None:
        self.base.emit(cg)
        cg.load_attr(self.attr)

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"


def reads_hooked(cls: type) -> bool:
    """Whether ``cls`` answers attribute reads with a Python ``__getattribute__`` of its own: a read of one of its
    objects (``obj.__class__`` included, which ``isinstance`` makes) runs the user's code."""
    return isinstance(cls.__getattribute__, types.FunctionType)


@dataclass(frozen=True)
class PlainAttr(Attr):
    """``base.attr`` read as ``object.__getattribute__`` reads it, for an object whose class has a Python
    ``__getattribute__``: the trace ran that hook (inlined), so neither its guards nor the transformed code may
    run it again."""

    @_source_once
    def to_source(self) -> Any:
        base = self.base.to_source()
        return None if base is None else PlainAttrSource(base, self.attr)

    def emit(self, cg: CodeGen) -> None:
        cg.push_callable_global(cg.stash(object.__getattribute__))
        self.base.emit(cg)
        cg.load_const(self.attr)
        cg.call(2)


@dataclass(frozen=True)
class ClassOf(Attr):
    """``type(base)``, where ``base.__class__`` would run the class's own Python ``__getattribute__``."""

    attr: str = "__class__"

    @_source_once
    def to_source(self) -> Any:
        base = self.base.to_source()
        return None if base is None else TypeSource(base)

    def emit(self, cg: CodeGen) -> None:
        cg.push_callable_global(cg.stash(type))
        self.base.emit(cg)
        cg.call(1)

    def name(self) -> str:
        return f"type({self.base.name()})"


@dataclass(frozen=True)
class ClassMember(Attr):
    """``base.attr`` as the class ``base`` defines it, no descriptor run: a descriptor written in Python, whose
    ``__get__`` the trace ran (inlined) and neither its guards nor the transformed code may run again."""

    @_source_once
    def to_source(self) -> Any:
        base = self.base.to_source()
        return None if base is None else ClassMemberSource(base, self.attr)

    def emit(self, cg: CodeGen) -> None:
        cg.push_callable_global(cg.stash(_class_member))
        self.base.emit(cg)
        cg.load_const(self.attr)
        cg.call(2)


def as_class_member(path: Path | None) -> Path | None:
    """``path`` (``cls.name``) read as the class defines the member, where it is an attribute read."""
    return ClassMember(path.base, path.attr) if type(path) is Attr else path


def class_path(source: Path | None, value: Any) -> Path | None:
    """The path from ``source`` (which reaches ``value``) to ``value``'s class: ``source.__class__``, or
    ``type(source)`` where that read would run the class's own Python ``__getattribute__``."""
    if source is None:
        return None
    return ClassOf(source) if reads_hooked(type(value)) else Attr(source, "__class__")


@dataclass(frozen=True)
class Item(Path):
    base: Path
    key: Any

    @_source_once
    def to_source(self) -> Any:
        base = self.base.to_source()
        return None if base is None else ItemSource(base, self.key)

    def emit(self, cg: CodeGen) -> None:
        self.base.emit(cg)
        cg.load_const(self.key)
        cg.subscr()

    def name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"


@dataclass(frozen=True, eq=False)
class Stash(Path):
    """An object the transformed code reads from a global of its own (builtins, constants of odd types)."""

    value: Any

    def to_source(self) -> Any:
        return None

    def emit(self, cg: CodeGen) -> None:
        cg.load_global(cg.stash(self.value))

    def name(self) -> str:
        return f"<{type(self.value).__name__}>"


def builtins_of(f_globals: dict[str, Any]) -> dict[str, Any]:
    """The builtins code running with ``f_globals`` sees: its ``__builtins__`` (a dict, or in ``__main__`` the
    module)."""
    table = f_globals.get("__builtins__", builtins)
    return table if isinstance(table, dict) else vars(table)


def builtin_path(namespace: Path, f_globals: dict[str, Any], name: str) -> Path:
    """Builtin ``name`` as code with the globals ``f_globals`` at ``namespace`` reaches it (those globals hold
    ``__builtins__``; the caller guards that they lack ``name`` itself)."""
    found = Item if isinstance(f_globals["__builtins__"], dict) else Attr
    return found(Item(namespace, "__builtins__"), name)
