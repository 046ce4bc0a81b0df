"""A call of a ``functools.lru_cache`` or ``functools.cache`` function as a trace meets it.

Eager runs the function's body once per distinct arguments and serves the cached object afterwards: the body's
effects (an append to a log, a random draw) happen once, and every later call returns that very object (a
tensor kept in the cache and written in place stays written). Tracing the body would repeat its effects and
make a fresh result on every compiled call. So a call with constant arguments is made for real while tracing,
which is either a cache hit or eager's own first call, and its result is read through the path ``fn(*args)``:
guards call the function again (a hit) and compare what it returns, and the compiled code calls it to fetch a
tensor, as eager does.

Anything else is a graph break, and Python makes the call: arguments that are values of the trace, a function
reached by no path a guard can follow, and a call made after the trace changed state it has not written yet (a
pending Python effect, an input written in place, a random draw of the graph): the body, run now, would read
the state as it was before those changes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.paths import Path
from dynajit.guards import Source

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer
    from dynajit.capture._symbolic.variables.base import VT

__all__ = ["CACHED_FUNCTION_TYPE", "CachedCall", "call_cached_function"]

CACHED_FUNCTION_TYPE = type(functools.lru_cache(lambda: None))


@dataclass(frozen=True, slots=True)
class CachedCallSource(Source):
    """What a cached function returns for constant arguments: ``fn(*args, **kwargs)``."""

    fn_source: Source
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]

    @property
    def base(self) -> Source:
        return self.fn_source

    def name(self) -> str:
        return f"{self.fn_source.name()}({_arguments(self.args, self.kwargs)})"

    def path(self) -> str:
        return f"{self.fn_source.path()}({_arguments(self.args, self.kwargs)})"

    def access(self, ctx: Any, base: str | None) -> str:
        return f"{base}(*{ctx.bind(self.args)}, **{ctx.bind(dict(self.kwargs))})"


@dataclass(frozen=True)
class CachedCall(Path):
    """The result of calling the cached function at ``fn`` with constant arguments."""

    fn: Path
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]

    def to_source(self) -> Any:
        base = self.fn.to_source()
        return None if base is None else CachedCallSource(base, self.args, self.kwargs)

    def emit(self, cg: CodeGen) -> None:
        def arguments() -> int:
            self.fn.emit(cg)
            cg.load_global(cg.stash((self.args, dict(self.kwargs))))
            return 2

        cg.call_helper(_call, arguments)

    def name(self) -> str:
        return f"{self.fn.name()}({_arguments(self.args, self.kwargs)})"


def _call(fn: Any, arguments: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
    return fn(*arguments[0], **arguments[1])


def _arguments(args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> str:
    return ", ".join([*map(repr, args), *(f"{key}={value!r}" for key, value in kwargs)])


def _draws_random(node: torch.fx.Node) -> bool:
    from dynajit.capture._symbolic.eager_checks import _aten_name  # (imported here: see call_cached_function)

    name = _aten_name(node.target) if node.op in ("call_function", "call_method") else None
    packet = getattr(torch.ops.aten, name, None) if name else None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    return any(torch.Tag.nondeterministic_seeded in getattr(packet, o).tags for o in packet.overloads())


def _unwritten_change(tx: Tracer) -> str | None:
    """What the trace changed so far that the real objects do not show yet, if anything."""
    output = tx.output
    if output.side_effects:
        return "a Python object or variable it has written"
    if output.input_effects:
        return "a tensor it has written in place"
    if any(_draws_random(node) for node in output.builder.graph.nodes):
        return "random numbers it has drawn"
    return None


def call_cached_function(tx: Tracer, fn_vt: VT, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``fn(*args, **kwargs)`` for a cached function ``fn``: made now, its result read through ``fn(...)``."""
    # (imported here: the object trackers read this module, and the trackers' package imports them all)
    from dynajit.capture._symbolic.variables.base import raises_in_python, unsupported
    from dynajit.capture._symbolic.variables.symbolic import SymIntVar

    fn = fn_vt.value  # type: ignore[attr-defined]
    name = f"{getattr(fn, '__qualname__', type(fn).__name__)}, a functools.lru_cache function,"
    # (a symbolic int is specialised: the cache is keyed by the number)
    if not all(vt.is_const() or isinstance(vt, SymIntVar) for vt in (*args, *kwargs.values())):
        unsupported(f"calling {name} with arguments that are not constants: its cache decides what eager returns")
    if fn_vt.source is None or fn_vt.source.to_source() is None:
        unsupported(f"calling {name} reached by no path a guard can follow: its cache decides what eager returns")
    change = _unwritten_change(tx)
    if change is not None:
        unsupported(f"calling {name} after the trace changed {change}: a call now would read the state before it")
    values = tuple(vt.const() for vt in args)
    kw = tuple((key, vt.const()) for key, vt in kwargs.items())
    tx.output.guard("id_match", fn_vt.source, fn)
    try:
        result = fn(*values, **dict(kw))
    except Exception as exc:  # (a call that raises fills no cache entry: Python makes it again at the break)
        raises_in_python(f"{getattr(fn, '__qualname__', fn)}() raised {type(exc).__name__}: {exc}", exc)
    return tx.wrap(result, CachedCall(fn_vt.source, values, kw))
