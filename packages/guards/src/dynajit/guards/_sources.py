"""Sources: how a value is reached from a call's arguments, globals and closure cells.

A source is an immutable, hashable description of an access path. It renders
two ways: :meth:`Source.name` is the readable path (``L['self'].linear.weight``)
used in messages, and :meth:`Source.label` is the seed's guard-listing form
(``local 'self.linear.weight'``). The guard compiler asks each source for the
Python expression that reaches its value from its base's value
(:meth:`Source.access`), so every step of a nested path is computed once.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "AccessContext",
    "AttrSource",
    "BufferSource",
    "ClassMemberSource",
    "ClosureSource",
    "DefaultArgSource",
    "GlobalSource",
    "ItemSource",
    "LocalSource",
    "ParamSource",
    "PlainAttrSource",
    "SizeSource",
    "Source",
    "StrideSource",
    "SubmoduleSource",
    "InstanceAttrSource",
    "TypeSource",
    "class_member",
]


def _hashed_once(compute: Callable[[Any], int]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        try:
            return self._hash  # type: ignore[no-any-return]
        except AttributeError:
            value = compute(self)
            object.__setattr__(self, "_hash", value)
            return value

    return __hash__


def _text_once(slot: str, compute: Callable[[Any], str]) -> Callable[[Any], str]:
    def text(self: Any) -> str:
        try:
            return getattr(self, slot)  # type: ignore[no-any-return]
        except AttributeError:
            value = compute(self)
            object.__setattr__(self, slot, value)
            return value

    text.__wrapped__ = compute  # type: ignore[attr-defined]
    return text


class AccessContext(Protocol):
    """What a source needs from the guard compiler to write its access expression."""

    def bind(self, value: Any) -> str:
        """The name under which ``value`` is bound in the generated function's globals."""
        ...

    def argument(self, name: str) -> str:
        """The generated function's parameter holding argument ``name``."""
        ...

    def global_access(self, name: str) -> str:
        """An expression reading global ``name`` (falling back to builtins as Python does)."""
        ...

    def closure_cell(self, name: str) -> str:
        """The bound name of the closure cell for free variable ``name``."""
        ...


def _is_literal(value: Any) -> bool:
    """Whether ``repr(value)`` is a Python literal evaluating back to an equal value of the same type."""
    if value is None or type(value) in (bool, int, str, bytes):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is tuple:
        return all(_is_literal(item) for item in value)
    return False


class Source:
    """Base of all sources. Subclasses are frozen dataclasses, so sources compare and hash by value.

    A source's hash, name and path are computed once: each is built from its base source's, so a
    parameter's path (``L['self']._modules['features']...``) was hashed and spelled out again at every
    lookup and message of every guard on it.
    """

    __slots__ = ("_hash", "_name", "_path")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        computed = cls.__dict__.get("__hash__")
        if computed is not None:  # a slotted dataclass, made again with its generated hash
            cls.__hash__ = _hashed_once(computed)  # type: ignore[method-assign,assignment]
        for method in ("name", "path"):
            own = cls.__dict__.get(method)
            if own is not None and not hasattr(own, "__wrapped__"):  # the slotted copy keeps the wrapped one
                setattr(cls, method, _text_once(f"_{method}", own))

    @property
    def base(self) -> Source | None:
        """The source this one is reached from, or ``None`` for a root (local, global, closure)."""
        return None

    def name(self) -> str:
        """The readable access path, e.g. ``L['self'].linear.weight``."""
        raise NotImplementedError

    def scope(self) -> str:
        """``local``, ``global`` or ``closure``: where the root of this path lives."""
        root = self.root()
        return root.scope()

    def path(self) -> str:
        """The access path relative to its scope, e.g. ``self.linear.weight``."""
        raise NotImplementedError

    def label(self) -> str:
        """The seed's guard-listing form, e.g. ``local 'self.linear.weight'``."""
        return f"{self.scope()} '{self.path()}'"

    def root(self) -> Source:
        """The root source (local, global or closure cell) this path starts from."""
        source: Source = self
        while source.base is not None:
            source = source.base
        return source

    def access(self, ctx: AccessContext, base: str | None) -> str:
        """A Python expression computing this source's value from ``base`` (its base's value)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


@dataclass(frozen=True, slots=True)
class LocalSource(Source):
    """An argument (or local) of the guarded frame: ``L['x']``."""

    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def scope(self) -> str:
        return "local"

    def path(self) -> str:
        return self.local_name

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return ctx.argument(self.local_name)


@dataclass(frozen=True, slots=True)
class GlobalSource(Source):
    """A global of the guarded function's module (or a builtin it falls back to): ``G['torch']``."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def scope(self) -> str:
        return "global"

    def path(self) -> str:
        return self.global_name

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return ctx.global_access(self.global_name)


@dataclass(frozen=True, slots=True)
class ClosureSource(Source):
    """The contents of a closure cell of the guarded function: ``C['scale']``."""

    free_name: str

    def name(self) -> str:
        return f"C[{self.free_name!r}]"

    def scope(self) -> str:
        return "closure"

    def path(self) -> str:
        return self.free_name

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{ctx.closure_cell(self.free_name)}.cell_contents"


def _attr_suffix(attr: str) -> str:
    if attr.isidentifier() and not keyword.iskeyword(attr):
        return f".{attr}"
    return f".{attr!r}"


def _attr_access(base: str, attr: str) -> str:
    if attr.isidentifier() and not keyword.iskeyword(attr):
        return f"{base}.{attr}"
    return f"getattr({base}, {attr!r})"


@dataclass(frozen=True, slots=True)
class _AttributeOf(Source):
    """An attribute of another source's value, however it is read: named ``L['self'].linear``."""

    base_source: Source
    attr: str

    @property
    def base(self) -> Source:
        return self.base_source

    def name(self) -> str:
        return f"{self.base_source.name()}{_attr_suffix(self.attr)}"

    def path(self) -> str:
        return f"{self.base_source.path()}{_attr_suffix(self.attr)}"


@dataclass(frozen=True, slots=True)
class AttrSource(_AttributeOf):
    """An attribute of another source's value: ``L['self'].linear``."""

    def access(self, ctx: AccessContext, base: str | None) -> str:
        assert base is not None
        return _attr_access(base, self.attr)


@dataclass(frozen=True, slots=True)
class PlainAttrSource(_AttributeOf):
    """An attribute read as ``object.__getattribute__`` reads it (the instance dict, then the class), past a
    class's own Python ``__getattribute__``: a guard on ``cfg.flag`` must not run the user's hook at every call.
    Named ``L['cfg'].flag``, read as ``object.__getattribute__(L['cfg'], 'flag')``."""

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{ctx.bind(object.__getattribute__)}({base}, {self.attr!r})"


def class_member(cls: type, name: str) -> Any:
    """``name`` as the first class of ``cls.__mro__`` defining it holds it, with no descriptor run: what a read
    through an instance finds on its class, before binding."""
    for klass in cls.__mro__:
        namespace = klass.__dict__
        if name in namespace:
            return namespace[name]
    raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


@dataclass(frozen=True, slots=True)
class ClassMemberSource(_AttributeOf):
    """A member as its class defines it (``base`` is a class), read from the classes' namespaces: a guard on a
    descriptor written in Python must not run its ``__get__`` at every call. Named ``L['h'].__class__.d``."""

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{ctx.bind(class_member)}({base}, {self.attr!r})"


@dataclass(frozen=True, slots=True)
class ItemSource(Source):
    """An item of another source's value by a constant key or index: ``L['xs'][0]``, ``L['d']['k']``."""

    base_source: Source
    key: Any

    @property
    def base(self) -> Source:
        return self.base_source

    def name(self) -> str:
        return f"{self.base_source.name()}[{self.key!r}]"

    def path(self) -> str:
        return f"{self.base_source.path()}[{self.key!r}]"

    def access(self, ctx: AccessContext, base: str | None) -> str:
        key = repr(self.key) if _is_literal(self.key) else ctx.bind(self.key)
        return f"{base}[{key}]"


@dataclass(frozen=True, slots=True)
class DefaultArgSource(Source):
    """A default argument value of a function reached by ``fn_source``.

    ``key`` is an index into ``__defaults__`` (positional defaults) or a name in
    ``__kwdefaults__`` (keyword-only defaults).
    """

    fn_source: Source
    key: int | str

    @property
    def base(self) -> Source:
        return self.fn_source

    def _suffix(self) -> str:
        if isinstance(self.key, int):
            return f".__defaults__[{self.key}]"
        return f".__kwdefaults__[{self.key!r}]"

    def name(self) -> str:
        return f"{self.fn_source.name()}{self._suffix()}"

    def path(self) -> str:
        return f"{self.fn_source.path()}{self._suffix()}"

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{base}{self._suffix()}"


class _ModuleMemberSource(Source):
    """A parameter, buffer or submodule of an ``nn.Module``, read from the module's own table.

    Reading ``module._parameters['weight']`` skips ``nn.Module.__getattr__`` (a
    Python-level fallback), which keeps guards on module state cheap. The name
    renders as plain attribute access.
    """

    __slots__ = ()
    table: str = ""
    module_source: Source
    member: str

    @property
    def base(self) -> Source:
        return self.module_source

    def name(self) -> str:
        return f"{self.module_source.name()}{_attr_suffix(self.member)}"

    def path(self) -> str:
        return f"{self.module_source.path()}{_attr_suffix(self.member)}"

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{base}.{self.table}[{self.member!r}]"


@dataclass(frozen=True, slots=True)
class ParamSource(_ModuleMemberSource):
    """A parameter registered on a module: ``L['self'].linear.weight``."""

    module_source: Source
    member: str
    table = "_parameters"


@dataclass(frozen=True, slots=True)
class BufferSource(_ModuleMemberSource):
    """A buffer registered on a module: ``L['self'].bn.running_mean``."""

    module_source: Source
    member: str
    table = "_buffers"


@dataclass(frozen=True, slots=True)
class SubmoduleSource(_ModuleMemberSource):
    """A submodule registered on a module: ``L['self'].linear``."""

    module_source: Source
    member: str
    table = "_modules"


@dataclass(frozen=True, slots=True)
class InstanceAttrSource(_ModuleMemberSource):
    """An attribute a module holds in its instance ``__dict__`` (``training``, ``eps``): ``L['self'].norm.eps``."""

    module_source: Source
    member: str
    table = "__dict__"


@dataclass(frozen=True, slots=True)
class TypeSource(Source):
    """The type of another source's value: ``type(L['x'])``."""

    base_source: Source

    @property
    def base(self) -> Source:
        return self.base_source

    def name(self) -> str:
        return f"type({self.base_source.name()})"

    def path(self) -> str:
        return f"type({self.base_source.path()})"

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{ctx.bind(type)}({base})"


@dataclass(frozen=True, slots=True)
class SizeSource(Source):
    """One size of a tensor: ``L['x'].size()[0]`` (read as ``x.size(0)``), for symbolic-shape expressions."""

    tensor_source: Source
    dim: int

    @property
    def base(self) -> Source:
        return self.tensor_source

    def name(self) -> str:
        return f"{self.tensor_source.name()}.size()[{self.dim}]"

    def path(self) -> str:
        return f"{self.tensor_source.path()}.size()[{self.dim}]"

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{base}.size({self.dim})"


@dataclass(frozen=True, slots=True)
class StrideSource(Source):
    """One stride of a tensor: ``L['x'].stride()[0]`` (read as ``x.stride(0)``)."""

    tensor_source: Source
    dim: int

    @property
    def base(self) -> Source:
        return self.tensor_source

    def name(self) -> str:
        return f"{self.tensor_source.name()}.stride()[{self.dim}]"

    def path(self) -> str:
        return f"{self.tensor_source.path()}.stride()[{self.dim}]"

    def access(self, ctx: AccessContext, base: str | None) -> str:
        return f"{base}.stride({self.dim})"
