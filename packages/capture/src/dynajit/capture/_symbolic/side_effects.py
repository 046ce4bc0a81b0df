"""Side effects recorded while tracing and replayed, in order, after the graph runs.

Nothing is applied while tracing: a mutated container or object keeps its new
state in its tracker, and the transformed code writes the final state back to
the real object once (list contents, dict contents, attributes, globals, closure
cells), in the order the effects were first made.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.variables import VT

__all__ = ["SideEffects", "store_attr"]


@dataclass
class _Effect:
    kind: str  # "contents" | "attr" | "global" | "cell" | "custom"
    target: Any  # the tracker (contents, cell), (object tracker, name) for attr, name for global
    value: Any = None
    plain: bool = False  # an attribute write replayed with object.__setattr__

    def values(self) -> list[VT]:
        if self.kind == "contents":
            return [self.target]
        if self.kind == "cell":
            return [self.target.contents]
        if self.kind == "custom":
            return self.target.values()  # type: ignore[no-any-return]
        return [self.value]


class SideEffects:
    """The ordered effects of one traced frame."""

    def __init__(self) -> None:
        self._effects: dict[Any, _Effect] = {}
        self._attrs: dict[tuple[int, str], VT] = {}
        self._globals: dict[str, VT] = {}
        self.writes = 0  # every effect recorded, a repeated one too (a subgraph must record none)

    def __bool__(self) -> bool:
        return bool(self._effects)

    def record_mutation(self, container: VT) -> None:
        self.writes += 1
        self._effects.setdefault(("contents", id(container)), _Effect("contents", container))

    def record_attr_write(self, obj: VT, name: str, value: VT, *, plain: bool = False) -> None:
        """``obj.name = value``, replayed with ``STORE_ATTR`` or, when ``plain``, with ``object.__setattr__``
        (the write a class's own ``__setattr__``, traced already, made)."""
        self.writes += 1
        key = ("attr", id(obj.value), name)  # type: ignore[attr-defined]
        effect = self._effects.setdefault(key, _Effect("attr", (obj, name)))
        effect.value = value
        effect.plain = plain
        self._attrs[(id(obj.value), name)] = value  # type: ignore[attr-defined]

    def has_pending_attrs(self, obj: Any) -> bool:
        return any(key == id(obj) for key, _ in self._attrs)

    def pending_attr(self, obj: Any, name: str) -> VT | None:
        return self._attrs.get((id(obj), name))

    def record_global_write(self, name: str, value: VT) -> None:
        self.writes += 1
        effect = self._effects.setdefault(("global", name), _Effect("global", name))
        effect.value = value
        self._globals[name] = value

    def pending_global(self, name: str) -> VT | None:
        return self._globals.get(name)

    def record_cell_write(self, cell: VT) -> None:
        self.writes += 1
        self._effects.setdefault(("cell", id(cell)), _Effect("cell", cell))

    def record_custom(self, key: Any, effect: Any) -> None:
        """An effect kept by another tracker (a ContextVar's writes): ``effect`` has values(), and
        replay(cg) or prepare(cg, saved): load its operands now (``saved(emit)`` names a temporary) and return
        what applies it."""
        self.writes += 1
        self._effects.setdefault(("custom", key), _Effect("custom", effect))

    def describe(self) -> list[str]:
        """What each effect writes, as the program names it (``st.items``'s contents, ``cfg.n``, global ``N``)."""

        def named(vt: Any) -> str:
            source = getattr(vt, "source", None)
            return source.name() if source is not None else f"a {type(getattr(vt, 'value', vt)).__name__}"

        described = {
            "contents": lambda e: f"the contents of {named(e.target)}",
            "attr": lambda e: f"{named(e.target[0])}.{e.target[1]}",
            "global": lambda e: f"the global {e.target}",
            "cell": lambda e: f"a closure variable ({named(e.target)})",
            "custom": lambda e: f"{type(e.target).__name__}",
        }
        return [described[effect.kind](effect) for effect in self._effects.values()]

    def written_objects(self) -> list[VT]:
        """The trackers of the frame's objects whose contents or attributes the effects write."""
        writes = [effect for effect in self._effects.values() if effect.kind in ("contents", "attr")]
        return [effect.target if effect.kind == "contents" else effect.target[0] for effect in writes]

    def values(self) -> list[VT]:
        """The trackers whose state the replay writes (they may need graph outputs)."""
        return [v for effect in self._effects.values() for v in effect.values()]

    def replay(self, cg: CodeGen) -> None:
        """Emit the bytecode that applies every effect to the real objects.

        Every object and value an effect needs is loaded into a temporary before the first effect is
        applied: paths are the state at the frame's entry, and an earlier effect may rewrite one
        (``kwargs["cache"] = kwargs.pop("past")`` then an attribute write on that cache object).
        """
        from dynajit.capture._symbolic.variables import DictVar, ListVar
        from dynajit.capture._symbolic.variables.collections_ import DequeVar

        def saved(emit: Callable[[], None]) -> str:
            emit()
            name = cg.new_temp()
            cg.emit("STORE_FAST", name)
            return name

        def load(*names: str) -> int:
            for name in names:
                cg.emit("LOAD_FAST", name)
            return len(names)

        appliers: list[Callable[[], None]] = []
        for effect in self._effects.values():
            if effect.kind == "contents":
                container = effect.target
                assert container.source is not None  # only containers from the frame are recorded
                if isinstance(container, DequeVar):  # no slice assignment: cleared and extended, keeping maxlen
                    items = saved(functools.partial(_build_list, cg, container))
                    real = saved(functools.partial(container.source.emit, cg))
                    appliers.append(functools.partial(_call_and_pop, cg, _replace_deque, load, real, items))
                elif isinstance(container, ListVar):
                    items = saved(functools.partial(_build_list, cg, container))
                    real = saved(functools.partial(container.source.emit, cg))
                    appliers.append(functools.partial(_store_list, cg, items, real))
                elif isinstance(container, DictVar):
                    items = saved(functools.partial(_build_dict, cg, container))
                    real = saved(functools.partial(container.source.emit, cg))
                    appliers.append(functools.partial(_call_and_pop, cg, _replace_dict, load, real, items))
            elif effect.kind == "attr":
                obj, name = effect.target
                value = saved(functools.partial(effect.value.reconstruct, cg))
                real = saved(functools.partial(obj.source.emit, cg))
                if effect.plain:
                    appliers.append(functools.partial(_plain_setattr, cg, value, real, name))
                else:
                    appliers.append(functools.partial(store_attr, cg, value, real, name))
            elif effect.kind == "custom":
                # An effect that can load its operands first does so (``prepare``); the rest rebuild theirs as
                # they apply (a ContextVar and its value, which no effect rewrites).
                prepare = getattr(effect.target, "prepare", None)
                appliers.append(prepare(cg, saved) if prepare else functools.partial(effect.target.replay, cg))
            elif effect.kind == "global":
                value = saved(functools.partial(effect.value.reconstruct, cg))
                appliers.append(functools.partial(_store_global, cg, value, effect.target))
            else:
                cell = effect.target
                value = saved(functools.partial(cell.contents.reconstruct, cg))
                appliers.append(functools.partial(_store_cell, cg, value, cell.source))
        for apply in appliers:
            apply()


def _build_list(cg: CodeGen, container: Any) -> None:
    for item in container.items:
        item.reconstruct(cg)
    cg.build("BUILD_LIST", len(container.items))


def _store_list(cg: CodeGen, items: str, real: str) -> None:
    # real[:] = [items]: one write, keeping the list's identity.
    cg.emit("LOAD_FAST", items)
    cg.emit("LOAD_FAST", real)
    cg.load_const(None)
    cg.load_const(None)
    cg.build("BUILD_SLICE", 2)
    cg.emit("STORE_SUBSCR")


def _build_dict(cg: CodeGen, container: Any) -> None:
    for key, value in container.items.items():
        cg.load_const_any(key)
        value.reconstruct(cg)
    cg.build("BUILD_MAP", len(container.items))


def _call_and_pop(cg: CodeGen, fn: Callable[..., Any], load: Callable[..., int], *names: str) -> None:
    cg.call_helper(fn, functools.partial(load, *names))
    cg.emit("POP_TOP")


def store_attr(cg: CodeGen, value: str, real: str, name: str) -> None:
    """``real.name = value``, both already in temporaries."""
    cg.emit("LOAD_FAST", value)
    cg.emit("LOAD_FAST", real)
    cg.emit("STORE_ATTR", name)


def _store_global(cg: CodeGen, value: str, name: str) -> None:
    cg.emit("LOAD_FAST", value)
    cg.emit("STORE_GLOBAL", name)


def _store_cell(cg: CodeGen, value: str, path: Any) -> None:
    cg.emit("LOAD_FAST", value)
    cg.store_path(path)


def _plain_setattr(cg: CodeGen, value: str, real: str, name: str) -> None:
    """``object.__setattr__(real, name, value)``: the write a class's own ``__setattr__`` made."""

    def emit_args() -> int:
        cg.emit("LOAD_FAST", real)
        cg.load_const(name)
        cg.emit("LOAD_FAST", value)
        return 3

    cg.call_helper(object.__setattr__, emit_args)
    cg.emit("POP_TOP")


def _replace_deque(real: collections.deque[Any], new: list[Any]) -> None:
    real.clear()
    real.extend(new)


def _replace_dict(real: dict[Any, Any], new: dict[Any, Any]) -> None:
    real.clear()
    real.update(new)
