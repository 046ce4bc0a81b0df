"""``contextvars.ContextVar`` reads and writes in traced code, as side effects on a tracked variable.

A ContextVar reached from the frame (identity-guarded) gets one state per trace:
its value is unknown until read (the real value then, guarded through a source
that calls ``var.get``), or the tracker last written. ``set`` and ``reset`` do
not touch the real context while tracing: they update that state (so later
``get`` calls see them) and are replayed, in order, on the real ContextVar after
the graph runs, so the context ends as eager leaves it. A token made by a traced
``set`` is the real token the replay makes (kept in a temporary of the
transformed code); a token from the frame is the real one, guarded to belong to
the variable.

Reading an object from the real variable and then writing the variable in the
same trace is a graph break: the object is rebuilt after the graph through
``var.get()``, which the replayed writes would change.
"""

from __future__ import annotations

import contextvars
import functools
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.paths import Attr, Path
from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar, is_literal
from dynajit.capture._symbolic.variables.functions import MethodOf
from dynajit.capture._symbolic.variables.objects import ObjectVar
from dynajit.guards import Source

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["ContextVarVar", "TokenVar", "wrap_context_var_object"]

_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<unset>"})()
# What a ContextVar holds while nothing set it (its state only: ``get`` then gives a default or raises).
_NO_VALUE: Any = object()
# The value the trace has not read yet: the real one at the frame's entry.
_ENTRY: Any = object()


def wrap_context_var_object(output: OutputGraph, value: Any, path: Path | None) -> VT | None:
    """The tracker of a ContextVar, one of its bound methods, or a Token; None for any other value."""
    if type(value) is contextvars.ContextVar:
        output.guard("id_match", path, value)
        return ContextVarVar(value, path)
    if type(value) is contextvars.Token:
        output.guard("type_match", path, value)
        return TokenVar(value.var, _ENTRY, None, real=value, source=path)
    if isinstance(value, types.BuiltinMethodType) and type(value.__self__) is contextvars.ContextVar:
        if path is None or value.__name__ not in ContextVarVar.METHODS:
            return None
        # A bound method is a new object at every read: guard what it is bound to and its name.
        output.guard("type_match", path, value)
        output.guard("equals_match", Attr(path, "__name__"), value.__name__)
        output.guard("id_match", Attr(path, "__self__"), value.__self__)
        return MethodOf(ContextVarVar(value.__self__, Attr(path, "__self__")), value.__name__)
    return None


@dataclass(frozen=True, slots=True)
class ContextVarValueSource(Source):
    """The value a ContextVar holds in the current context, or a sentinel when it holds none: ``V.get()``."""

    var_source: Source

    @property
    def base(self) -> Source:
        return self.var_source

    def name(self) -> str:
        return f"{self.var_source.name()}.get()"

    def path(self) -> str:
        return f"{self.var_source.path()}.get()"

    def access(self, ctx: Any, base: str | None) -> str:
        return f"{base}.get({ctx.bind(_UNSET)})"


@dataclass(frozen=True)
class ContextVarValue(Path):
    """The current value of the ContextVar at ``var`` (the sentinel when it has none)."""

    var: Path

    def to_source(self) -> Any:
        base = self.var.to_source()
        return None if base is None else ContextVarValueSource(base)

    def emit(self, cg: CodeGen) -> None:
        def argument() -> int:
            self.var.emit(cg)
            return 1

        cg.call_helper(_current_value, argument)

    def name(self) -> str:
        return f"{self.var.name()}.get()"


def _current_value(var: contextvars.ContextVar[Any]) -> Any:
    return var.get(_UNSET)


def _var_default(var: contextvars.ContextVar[Any]) -> Any:
    """The default ``var`` was made with (``_NO_VALUE`` when none); it cannot change, so it is a fact of ``var``."""
    probe = contextvars.Context()  # a context where nothing set it
    try:
        return probe.run(var.get)
    except LookupError:
        return _NO_VALUE


class _State:
    """What one trace knows of one ContextVar: its current value and the writes to replay."""

    def __init__(self, var_vt: ContextVarVar) -> None:
        self.var_vt = var_vt
        self.current: Any = _ENTRY  # _ENTRY, _NO_VALUE, or the tracker of the value
        self.read_object = False  # an object read from the real variable is rebuilt through var.get()
        self.writes: list[tuple[str, VT, TokenVar]] = []

    def values(self) -> list[VT]:
        return [value for kind, value, _ in self.writes if kind == "set"]

    def replay(self, cg: CodeGen) -> None:
        for kind, value, token in self.writes:
            if kind == "set":
                # The token is kept in a temporary for whoever holds it afterwards (a reset, a resumed frame).
                cg.build_cached(token, functools.partial(cg.call_helper, _set, self._arguments(cg, value)))
            else:
                cg.call_helper(_reset, self._arguments(cg, token))
            cg.emit("POP_TOP")

    def _arguments(self, cg: CodeGen, value: VT) -> Callable[[], int]:
        def emit() -> int:
            self.var_vt.reconstruct(cg)
            value.reconstruct(cg)
            return 2

        return emit


def _set(var: contextvars.ContextVar[Any], value: Any) -> contextvars.Token[Any]:
    return var.set(value)


def _reset(var: contextvars.ContextVar[Any], token: contextvars.Token[Any]) -> None:
    var.reset(token)


class ContextVarVar(ObjectVar):
    """A ContextVar reached from the frame (guarded by identity)."""

    METHODS = ("get", "set", "reset")

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name in self.METHODS:
            return MethodOf(self, name)
        if name == "name":
            return ConstVar(self.value.name)
        unsupported(f"attribute {name!r} of a ContextVar")

    def _state(self, tx: Tracer) -> _State:
        states: dict[int, _State] = tx.output.context_vars
        state = states.get(id(self.value))
        if state is None:
            state = states[id(self.value)] = _State(self)
        return state

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs:
            raises_in_python(f"ContextVar.{name}() takes no keyword arguments (TypeError)")
        state = self._state(tx)
        if name == "get":
            if len(args) > 1:
                raises_in_python(f"ContextVar.get() takes at most 1 argument, {len(args)} given (TypeError)")
            return self._get(tx, state, args[0] if args else None)
        if len(args) != 1:
            raises_in_python(f"ContextVar.{name}() takes exactly one argument, {len(args)} given (TypeError)")
        if state.read_object:
            unsupported("writing a ContextVar after reading an object from it in the same graph")
        if not state.writes:
            tx.output.side_effects.record_custom(id(self.value), state)
        if name == "set":
            token = TokenVar(self.value, state.current, state)
            state.writes.append(("set", args[0], token))
            state.current = args[0]
            return token
        used = args[0]
        if not isinstance(used, TokenVar):
            raises_in_python(f"ContextVar.reset() expects a Token, got {used} (TypeError)")
        used.check_reset(tx, self.value, state)
        state.writes.append(("reset", used, used))
        state.current = used.old_value(tx)
        return ConstVar(None)

    def _get(self, tx: Tracer, state: _State, default: VT | None) -> VT:
        if state.current is _ENTRY:
            path = ContextVarValue(self.source) if self.source is not None else None
            real = self.value.get(_UNSET)
            if real is _UNSET:
                tx.output.guard("id_match", path, _UNSET)
                state.current = _NO_VALUE
            else:
                state.current = tx.wrap(real, path)
                state.read_object = not isinstance(state.current, ConstVar)
        if state.current is not _NO_VALUE:
            return state.current  # type: ignore[no-any-return]
        if default is not None:
            return default
        made_with = _var_default(self.value)
        if made_with is _NO_VALUE:
            raises_in_python(f"ContextVar {self.value.name!r} has no value (LookupError)")
        if not is_literal(made_with):
            unsupported("the default of a ContextVar that is not a constant")
        return ConstVar(made_with)

    def __repr__(self) -> str:
        return f"ContextVarVar({self.value.name})"


class TokenVar(VT):
    """A ``contextvars.Token``: made by a traced ``set`` (``state`` is its variable's trace state), or read."""

    def __init__(
        self, var: Any, old: Any, state: _State | None, *, real: Any = None, source: Path | None = None
    ) -> None:
        self.var = var
        self._old = old
        self.state = state
        self.real = real
        self.source = source
        self.used = False

    def python_type(self) -> type:
        return contextvars.Token

    def check_reset(self, tx: Tracer, var: Any, state: _State) -> None:
        """Refuse, as ``ContextVar.reset`` does, a token of another variable or one already used."""
        if self.real is not None:
            tx.output.guard("id_match", Attr(self.source, "var") if self.source else None, self.real.var)
        if self.var is not var:
            raises_in_python("ContextVar.reset(): the token was created by a different ContextVar (ValueError)")
        if self.used:
            raises_in_python("ContextVar.reset(): the token has already been used once (RuntimeError)")
        self.used = True

    def old_value(self, tx: Tracer) -> Any:
        """The variable's value before the ``set`` that made this token (a tracker, _NO_VALUE or _ENTRY)."""
        if self.real is None:
            return self._old
        old = self.real.old_value
        path = Attr(self.source, "old_value") if self.source is not None else None
        if old is contextvars.Token.MISSING:
            tx.output.guard("id_match", path, old)
            return _NO_VALUE
        return tx.wrap(old, path)

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name == "var":
            return tx.wrap(self.var, Attr(self.source, "var") if self.source is not None else None)
        unsupported(f"attribute {name!r} of a ContextVar token")

    @property
    def made_by_replay(self) -> bool:
        """A token of a traced ``set()`` exists only once the effects are replayed: rebuild it after them."""
        return self.real is None

    def reconstruct(self, cg: CodeGen) -> None:
        if self.real is not None:
            super().reconstruct(cg)
            return

        def unreplayed() -> None:
            raise AssertionError("a token made while tracing is rebuilt before its set() was replayed")

        cg.build_cached(self, unreplayed)

    def __repr__(self) -> str:
        return f"TokenVar({self.var.name})"
