"""Callables: builtins (dispatched through the builtins table), user functions, closures, lambdas, bound methods."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.paths import Attr, as_class_member, class_path
from dynajit.capture._symbolic.variables.base import VT, HeldVar, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer
    from dynajit.capture._symbolic.variables.function_attrs import FunctionState

__all__ = [
    "BoundMethodVar",
    "BuiltinVar",
    "CellVar",
    "MethodOf",
    "NestedFunctionVar",
    "UserFunctionVar",
    "call_dunder",
    "class_member",
    "python_dunder",
    "refuse_descriptor",
]


# typing's introspection functions, evaluated on known arguments (variables/typing_folds.py).
_TYPING_FUNCTIONS = frozenset({typing.get_origin, typing.get_args})


def function_class(path: Any) -> VT:
    """A Python function's ``__class__``: it cannot be reassigned, so it needs no guard of its own."""
    from dynajit.capture._symbolic.variables.classes import ClassVar

    return ClassVar(types.FunctionType, path)


class BuiltinVar(HeldVar):
    """A builtin callable; calls go through the builtins table (or run directly when ``pure`` and all-constant)."""

    def truth(self, tx: Tracer) -> bool:
        return True  # a function or method defines neither __bool__ nor __len__

    def __init__(self, fn: Any, source: Any = None, *, pure: bool = False) -> None:
        super().__init__(fn, source)
        self.pure = pure

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.builtins_table import call_builtin

        if self.pure and _joins(self.value) and len(args) == 1 and not kwargs and not args[0].is_const():
            # "-".join(name.upper() for name in names): the iterable is consumed as Python would, then joined
            items = args[0].unpack(tx)
            if all(item.is_const() for item in items):
                args = [ConstVar(tuple(item.const() for item in items))]
        if self.pure and all(a.is_const() for a in [*args, *kwargs.values()]):
            from dynajit.capture._symbolic.variables.constant import fold

            const_kwargs = {k: v.const() for k, v in kwargs.items()}
            return tx.wrap_const(fold(lambda *a: self.value(*a, **const_kwargs), *[a.const() for a in args]).value)
        return call_builtin(tx, self.value, args, kwargs)

    def reconstruct(self, cg: CodeGen) -> None:
        self.reconstruct_object(cg, self.value)

    def __repr__(self) -> str:
        return f"BuiltinVar({getattr(self.value, '__name__', self.value)})"


def _joins(method: Any) -> bool:
    """Whether ``method`` is ``join`` of a str or bytes constant."""
    return getattr(method, "__name__", None) == "join" and type(getattr(method, "__self__", None)) in (str, bytes)


class UnboundMethodVar(HeldVar):
    """A builtin container's method taken from its class (``list.append``, ``dict.get``; ``copy.copy`` calls
    ``list.copy``): a call with a container of exactly that class is that container's method call."""

    def truth(self, tx: Tracer) -> bool:
        return True

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        owner, name = self.value.__objclass__, self.value.__name__
        if not args or args[0].python_type() is not owner or not hasattr(args[0], "method"):
            unsupported(f"{owner.__name__}.{name} called on other than a {owner.__name__} the trace holds")
        return args[0].method(tx, name, args[1:], kwargs)  # type: ignore[attr-defined]

    def reconstruct(self, cg: CodeGen) -> None:
        self.reconstruct_object(cg, self.value)


class MethodOf(VT):
    """``container.method`` before the call (list.append, dict.items, ...)."""

    def __init__(self, obj: VT, name: str) -> None:
        self.obj = obj
        self.name = name

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return self.obj.method(tx, self.name, args, kwargs)  # type: ignore[attr-defined]

    def children(self) -> list[VT]:
        return [self.obj]

    def reconstruct(self, cg: CodeGen) -> None:
        self.obj.reconstruct(cg)
        cg.load_attr(self.name)


class CellVar(VT):
    """A closure cell: created while tracing (contents tracked) or a real cell reached by ``source``."""

    def __init__(self, contents: VT | None = None, *, real: Any = None, source: Any = None) -> None:
        self.contents = contents
        self.real = real
        self.source = source  # path to the cell's *contents*
        self.written = False

    def get(self, tx: Tracer) -> VT:
        if self.contents is None:
            if self.real is None:
                unsupported("reading a free variable before it is assigned raises NameError")
            try:
                value = self.real.cell_contents
            except ValueError:
                unsupported("reading an empty closure cell raises NameError")
            self.contents = tx.wrap(value, self.source)
        return self.contents

    def set(self, tx: Tracer, value: VT) -> None:
        self.contents = value
        if self.real is not None:
            if self.source is None:
                unsupported("writing a closure cell that cannot be reached from the frame")
            tx.output.side_effects.record_cell_write(self)

    def children(self) -> list[VT]:
        return [self.contents] if self.contents is not None else []


# nn.Module's own call machinery (hooks, then forward), which NNModuleVar.call_impl models.
_MODULE_CALLS = {
    fn
    for fn in (
        torch.nn.Module.__call__,
        getattr(torch.nn.Module, "_wrapped_call_impl", None),
        getattr(torch.nn.Module, "_call_impl", None),
    )
    if fn is not None
}


class UserFunctionVar(HeldVar):
    """A Python function object from the frame's reach: calls are inlined."""

    def truth(self, tx: Tracer) -> bool:
        return True  # a function or method defines neither __bool__ nor __len__

    def __init__(self, fn: types.FunctionType, source: Any = None, identity_unguarded: Any = None) -> None:
        super().__init__(fn, source)
        # The output whose guards state only the function's code (a function made anew on every call): reading
        # its constant (to compare, hash or look it up by identity) guards its identity there first.
        self.identity_unguarded = identity_unguarded
        self.by_code = identity_unguarded is not None  # its cells were recorded with their paths when wrapped

    def const(self) -> Any:
        if self.identity_unguarded is not None:
            self.identity_unguarded.guard("function_match", self.source, self.value)
            self.identity_unguarded = None
        return self.value

    @property
    def code(self) -> types.CodeType:
        return self.value.__code__

    def defaults(self, tx: Tracer) -> tuple[list[VT], dict[str, VT]]:
        from dynajit.capture._symbolic.paths import Attr, Item

        def wrap(value: Any, path: Any) -> VT:
            return tx.wrap(value, path if self.source is not None else None)

        base = self.source
        positional = [
            wrap(v, Item(Attr(base, "__defaults__"), i) if base else None)
            for i, v in enumerate(self.value.__defaults__ or ())
        ]
        keyword = {
            k: wrap(v, Item(Attr(base, "__kwdefaults__"), k) if base else None)
            for k, v in (self.value.__kwdefaults__ or {}).items()
        }
        return positional, keyword

    def closure_cells(self, tx: Tracer) -> list[CellVar]:
        from dynajit.capture._symbolic.paths import Attr, Item

        cells = []
        for i, cell in enumerate(self.value.__closure__ or ()):
            path = Attr(Item(Attr(self.source, "__closure__"), i), "cell_contents") if self.source else None
            cells.append(tx.output.cell_for(cell, path))
            if not self.by_code:  # a cell this function, guarded by identity, always has
                tx.output.cell_paths.append((cell, None, None))
        return cells

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.variables.modules import NNModuleVar

        # (read from ``value``: a function guarded by its code is called, not compared, so its identity is not read)
        handled = tx.marked_call(self.value, args, kwargs)
        if handled is not None:
            return handled
        if self.value in _MODULE_CALLS and args and isinstance(args[0], NNModuleVar):
            # nn.Module.__call__(module, ...) from an overriding __call__: what calling the module does.
            return args[0].call_impl(tx, args[1:], kwargs)
        from dynajit.capture._symbolic.builtins_table import BUILTINS

        rule = BUILTINS.get(self.value)  # a library function traced by its documented meaning (heapq.nlargest)
        if rule is not None:
            return rule(tx, args, kwargs)
        if self.value in _TYPING_FUNCTIONS:
            from dynajit.capture._symbolic.variables.typing_folds import call_typing_function

            folded = call_typing_function(tx, self.value, args, kwargs)
            if folded is not None:
                return folded
        if self.source is not None and not self.by_code and id(self.value) not in tx.output.code_guarded:
            # The code run is the function's __code__, assignable, unlike the identity FUNCTION_MATCH checks (a
            # function made per call has its code guarded already). Every path reaching the function is guarded to
            # reach this very object, so one path's check covers its code (a layer's forward, reached per layer).
            from dynajit.capture._symbolic.paths import Attr

            tx.output.guard("id_match", Attr(self.source, "__code__"), self.value.__code__)
            tx.output.code_guarded.add(id(self.value))
        return tx.inline_call(self, args, kwargs)

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name == "__code__":
            # Assignable, unlike the function's identity that FUNCTION_MATCH checks: guarded on its own.
            path = Attr(self.source, name) if self.source is not None else None
            tx.output.guard("id_match", path, self.value.__code__)
            return ConstVar(self.value.__code__, path)
        if name == "__class__":
            return function_class(Attr(self.source, name) if self.source is not None else None)
        from dynajit.capture._symbolic.variables.function_attrs import read_function_attribute

        return read_function_attribute(tx, self.value, self.source, name)

    def __repr__(self) -> str:
        return f"UserFunctionVar({self.value.__qualname__})"


class PartialVar(VT):
    """``functools.partial(func, *args, **keywords)``: calling it calls ``func`` with the bound arguments first.

    One from the frame is guarded by its exact type, its ``func`` and its ``args`` / ``keywords`` (each
    through its own path); one made while tracing is rebuilt by calling ``functools.partial`` again.
    """

    def truth(self, tx: Tracer) -> bool:
        return True  # a function or method defines neither __bool__ nor __len__

    def __init__(self, func: VT, args: list[VT], keywords: dict[str, VT], source: Any = None) -> None:
        self.func = func
        self.args = args
        self.keywords = keywords
        self.source = source

    def python_type(self) -> type:
        return functools.partial

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return self.func.call(tx, [*self.args, *args], {**self.keywords, **kwargs})

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.containers import DictVar, TupleVar

        if name == "func":
            return self.func
        if name == "args":
            return TupleVar(self.args)
        if name == "keywords":
            return DictVar(self.keywords)
        unsupported(f"attribute {name!r} of a functools.partial")

    def children(self) -> list[VT]:
        return [self.func, *self.args, *self.keywords.values()]

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return

        def load() -> int:
            self.func.reconstruct(cg)
            for arg in self.args:
                arg.reconstruct(cg)
            for value in self.keywords.values():
                value.reconstruct(cg)
            return 1 + len(self.args) + len(self.keywords)

        names = tuple(self.keywords)
        cg.call_helper(functools.partial(_make_partial, len(self.args), names), load)

    def __repr__(self) -> str:
        return f"PartialVar({self.func!r})"


def _make_partial(n_args: int, names: tuple[str, ...], func: Any, *values: Any) -> functools.partial:
    return functools.partial(func, *values[:n_args], **dict(zip(names, values[n_args:])))


class NestedFunctionVar(VT):
    """A function made by MAKE_FUNCTION while tracing (nested def, lambda, comprehension in 3.11)."""

    def truth(self, tx: Tracer) -> bool:
        return True  # a function or method defines neither __bool__ nor __len__

    def __init__(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        global_path: Any,
        defaults: VT | None = None,
        kwdefaults: VT | None = None,
        closure: VT | None = None,
        annotated: bool = False,
    ) -> None:
        self.code = code
        self.f_globals = f_globals
        self.global_path = global_path
        self.defaults_vt = defaults
        self.kwdefaults_vt = kwdefaults
        self.closure_vt = closure
        self.annotated = annotated
        self.state: FunctionState | None = None  # attributes written to it (function_attrs.py), once any are

    def python_type(self) -> type:
        return types.FunctionType

    def defaults(self, tx: Tracer) -> tuple[list[VT], dict[str, VT]]:
        positional = self.defaults_vt.unpack(tx) if self.defaults_vt is not None else []
        keyword: dict[str, VT] = {}
        if self.kwdefaults_vt is not None:
            keyword = dict(self.kwdefaults_vt.items)  # type: ignore[attr-defined]
        return positional, keyword

    def closure_cells(self, tx: Tracer) -> list[CellVar]:
        return self.closure_vt.unpack(tx) if self.closure_vt is not None else []  # type: ignore[return-value]

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return tx.inline_call(self, args, kwargs)

    def _state(self) -> FunctionState:
        if self.state is None:
            from dynajit.capture._symbolic.variables.function_attrs import FunctionState

            cells = tuple(types.CellType() for _ in self.code.co_freevars)
            prototype = types.FunctionType(self.code, self.f_globals, None, None, cells or None)
            self.state = FunctionState(prototype, self.annotated)
        return self.state

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name == "__code__":
            return ConstVar(self.code)
        if name == "__class__":
            return function_class(None)
        found = self._state().read(self, name)
        if found is not None:
            return found
        if name in dir(types.FunctionType):
            unsupported(f"attribute {name!r} of a nested function")
        from dynajit.capture._symbolic.variables.base import attribute_missing

        attribute_missing(tx, None, name, f"'function' object has no attribute {name!r}")

    def setattr(self, tx: Tracer, name: str, value: VT) -> None:
        self._state().write(name, value)

    def children(self) -> list[VT]:
        state = self.state.children() if self.state is not None else []
        return [v for v in (self.defaults_vt, self.kwdefaults_vt) if v is not None] + state

    def reconstruct(self, cg: CodeGen) -> None:
        if self.kwdefaults_vt is not None:
            unsupported("rebuilding a nested function with keyword-only defaults")
        cells = self.closure_vt.unpack(None) if self.closure_vt is not None else []  # type: ignore[arg-type]
        names = [cg.cell_names.get(id(cell)) for cell in cells]
        if None in names:
            unsupported("a closure over cells made while tracing is still alive after the graph")

        def args() -> int:
            cg.load_const(self.code)
            cg.load_global(cg.stash(self.f_globals))
            if self.defaults_vt is not None:
                self.defaults_vt.reconstruct(cg)
            else:
                cg.load_const(None)
            for name in names:
                cg.load_cell(name)  # type: ignore[arg-type]
            cg.build("BUILD_TUPLE", len(names))
            return 4

        state = self.state
        if state is None or not (state.special or state.attrs):
            cg.build_cached(self, lambda: cg.call_helper(_make_function, args))
            return
        from dynajit.capture._symbolic.variables.function_attrs import set_attributes

        def fill(temp: str) -> None:
            def attributes() -> int:
                cg.emit("LOAD_FAST", temp)
                return 1 + state.emit(cg)

            cg.call_helper(set_attributes, attributes)
            cg.emit("POP_TOP")

        # Named before its attributes are rebuilt: ``wrapper.__wrapped__`` may lead back to it.
        cg.build_object(self, lambda: cg.call_helper(_make_function, args), fill)

    def __repr__(self) -> str:
        return f"NestedFunctionVar({self.code.co_qualname})"


def _make_function(
    code: types.CodeType, f_globals: dict[str, Any], defaults: tuple[Any, ...] | None, closure: tuple[Any, ...]
) -> Any:
    return types.FunctionType(code, f_globals, code.co_name, defaults, closure or None)


class BoundMethodVar(VT):
    """``obj.method`` for a user-defined method: calls inline the function with ``obj`` first."""

    def truth(self, tx: Tracer) -> bool:
        return True  # a function or method defines neither __bool__ nor __len__

    def __init__(self, func: VT, obj: VT, source: Any = None) -> None:
        self.func = func
        self.obj = obj
        self.source = source

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return tx.call(self.func, [self.obj, *args], kwargs)

    def children(self) -> list[VT]:
        return [self.obj]

    def __repr__(self) -> str:
        return f"BoundMethodVar({self.func!r}, {self.obj!r})"


def class_member(
    tx: Tracer,
    obj: VT,
    cls: type,
    static: Any,
    member_path: Path | None,
    *,
    class_path: Path | None = None,
    bound_path: Path | None = None,
) -> VT | None:
    """``obj.name`` where ``static`` is what ``cls`` (``obj``'s class, or the class ``super()`` reached) defines.

    A Python function is bound to ``obj`` (inlined when called), a static method is its function, a class
    method is bound to ``cls`` (wrapped with ``class_path``), and a property's Python getter (or a descriptor's
    Python ``__get__``) is inlined now.
    ``member_path`` reaches ``static`` on the class, so replacing it there recompiles; ``bound_path`` reaches
    the bound method from the frame. None for anything else (a plain value, another descriptor): each kind
    of object reads those its own way.
    """
    if isinstance(static, types.FunctionType):
        return BoundMethodVar(tx.wrap(static, member_path), obj, bound_path)
    if isinstance(static, staticmethod):
        return tx.wrap(static.__func__, member_path)  # read through the class, a static method is its function
    if isinstance(static, classmethod):
        func_path = member_path and Attr(member_path, "__func__")  # through the class: a new bound method
        return BoundMethodVar(tx.wrap(static.__func__, func_path), tx.wrap(cls, class_path), bound_path)
    if isinstance(static, property) and isinstance(static.fget, types.FunctionType):
        return tx.wrap(static.fget, member_path and Attr(member_path, "fget")).call(tx, [obj], {})
    if type(static) is functools.cached_property and isinstance(static.func, types.FunctionType) and static.attrname:
        return _cached_property(tx, obj, static, member_path)
    getter = python_dunder(static, "__get__")
    if getter is not None:  # a descriptor written in Python: type(static).__get__(static, obj, cls)
        descriptor = tx.wrap(static, as_class_member(member_path))  # (cls.name would run __get__ again)
        return call_dunder(tx, descriptor, "__get__", [obj, tx.wrap(cls, class_path)])
    return None


def _cached_property(tx: Tracer, obj: VT, static: functools.cached_property, member_path: Path | None) -> VT:
    """``cached_property.__get__`` (found absent from the instance dict): the function's value, stored in the
    instance dict, as Python 3.12 does; 3.11 also holds a lock around it, which guards threads, not the value."""
    store = getattr(obj, "store", None)
    if store is None or not obj.python_type().__dictoffset__:
        # (Python raises TypeError there, before calling the function: so does the frame, run by Python)
        unsupported(f"cached_property {static.attrname!r} of {obj}, which has no instance dict to store it in")
    value = tx.wrap(static.func, member_path and Attr(member_path, "func")).call(tx, [obj], {})
    store(tx, static.attrname, value)
    return value


def python_dunder(value: Any, name: str) -> types.FunctionType | None:
    """``type(value).name`` when it is a Python function (how Python looks special methods up), else None."""
    found = inspect.getattr_static(type(value), name, None)
    return found if isinstance(found, types.FunctionType) else None


def call_dunder(tx: Tracer, obj: VT, name: str, args: list[VT]) -> VT:
    """``type(obj).name(obj, *args)`` for a special method written in Python, reached through the class.

    The function is guarded through ``obj``'s ``__class__`` when ``obj`` has a path, so replacing it recompiles.
    """
    value = getattr(obj, "value", None)
    function = python_dunder(value, name)
    assert function is not None, f"{name} is checked to be a Python function first"
    path = Attr(class_path(obj.source, value), name) if obj.source is not None else None
    return tx.wrap(function, path).call(tx, [obj, *args], {})


def refuse_descriptor(cls: type, name: str, static: Any) -> None:
    """A graph break when ``static``, found on ``cls`` as ``name``, would run code when read from an instance."""
    if hasattr(static, "__get__") and not isinstance(static, (int, float, str, bool, tuple, type)):
        unsupported(f"descriptor {cls.__name__}.{name} is not traced")
