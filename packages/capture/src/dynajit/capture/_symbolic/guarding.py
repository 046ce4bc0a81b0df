"""Turn the guard requests recorded while tracing into a ``dynajit.guards.GuardSet``."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import torch

import dynajit.guards as guards
from dynajit.capture._symbolic.paths import Path

if TYPE_CHECKING:
    from dynajit.capture._frame import FrameContext
    from dynajit.capture._symbolic.output import OutputGraph

__all__ = ["SOURCELESS", "build_guards"]


class _Sourceless(Path):
    """The path of a guard on process-wide state rather than on a value of the frame."""

    def to_source(self) -> Any:
        return None

    def emit(self, cg: Any) -> None:
        raise TypeError("process-wide state is not a value to load")

    def name(self) -> str:
        return "<process>"


SOURCELESS = _Sourceless()

# Guards that take no source: requested with SOURCELESS as the path.
_SOURCELESS_FACTORIES: dict[str, Any] = {
    "global_module_hooks": guards.global_module_hooks,
    "process_state": guards.process_state,
}


def _tensor_fact(source: guards.Source, method: str, value: Any) -> guards.Guard:
    """The answer of ``tensor.method()`` the trace read, for a fact TENSOR_MATCH leaves out (``storage_offset``)."""
    return guards.expression(f"{source.name()}.{method}() == {value!r}", [source], f"the trace read {method}()")


def _view_kind(source: guards.Source, kind: Any) -> guards.Guard:
    """The input is a view that autograd made the way it made the traced one (``kind``, its creation meta: a piece
    of ``split``, a view made under ``no_grad``): the trace gives the views it returns of it that kind, which
    decides whether autograd allows in-place ops on them."""
    name = source.name()
    return guards.expression(
        f"{name}._is_view() and _creation_meta({name}) == _kind",
        [source],
        f"the trace read how autograd made this view ({kind.name})",
        {"_creation_meta": torch._C._autograd._get_creation_meta, "_kind": kind},
    )


_FACTORIES: dict[str, Any] = {
    "tensor_match": guards.tensor_match,
    "layout_match": guards.layout_match,
    "constant_match": guards.constant_match,
    "equals_match": guards.equals_match,
    "type_match": guards.type_match,
    "length_check": guards.length_check,
    "dict_keys": guards.dict_keys,
    "dict_contains": guards.dict_contains,
    # Identity guards hold their object weakly: a cache entry must not keep a module, function or tensor the
    # user dropped alive; the runtime drops the entry when the object dies (``_cache.CacheEntry.watch``).
    "id_match": partial(guards.id_match, weak=True),
    "function_match": partial(guards.function_match, weak=True),
    "nn_module": partial(guards.nn_module, weak=True),
    "hasattr_match": guards.hasattr_match,
    "is_none": guards.is_none,
    "no_module_hooks": guards.no_module_hooks,
    "tensor_fact": _tensor_fact,
    "view_kind": _view_kind,
}


def _cell_relations(output: OutputGraph) -> list[guards.Guard]:
    """Which closure cells of functions guarded by their code are one cell, and which are apart.

    One tracker per real cell means the trace relied on each cell it reached through two paths being one
    object (a write through one closure seen by the other), and on cells it reached as different objects
    staying different. A cell such a function shares with one that is fixed (the frame's own closure, a
    function guarded by identity) is only that cell while the function is that function: its identity is
    guarded instead.
    """
    groups: dict[int, list[tuple[Any, Any]]] = {}
    for cell, path, owner in output.cell_paths:
        groups.setdefault(id(cell), []).append((path, owner))
    found: list[guards.Guard] = []
    apart: list[Any] = []
    for members in groups.values():
        owners = [owner for _, owner in members if owner is not None]
        if owners and any(path is None for path, _ in members):
            for owner in owners:
                owner.const()
            continue
        sources = list(dict.fromkeys(s for path, _ in members if path is not None and (s := path.to_source())))
        if len(sources) >= 2:
            found.append(guards.tensor_aliasing(sources, []))
        if sources:
            apart.append(sources[0])
    if len(apart) >= 2:
        found.append(guards.tensor_aliasing([], apart))
    return found


# Requests that fix the class of the value at their path, and those that fix which object it is.
_IDENTITY_REQUESTS = frozenset({"id_match", "function_match", "nn_module"})
_CLASS_REQUESTS = _IDENTITY_REQUESTS | {"type_match", "length_check", "dict_keys"}


def _object_relations(output: OutputGraph) -> list[guards.Guard]:
    """Which mutable objects the trace tracked as different objects and must stay different.

    A list, dict, deque or object with a ``__dict__`` gets one tracker per trace, so a write made through one
    tracker is not seen through another: an object the trace writes into must stay apart from every other
    object it read (two arguments, an argument and a global, two attributes). Objects whose classes are guarded
    and differ cannot become one, nor can two of guarded identity: each class's objects (with those of unguarded
    class) that include a written one, and one of unguarded identity, get one guard that they are pairwise
    different objects. So do the pairs of objects ``is`` answered for as different (``output.apart``).
    """
    written = {id(tracker) for tracker in output.side_effects.written_objects()}
    fixed_class = {source for kind, path, _ in output.guard_requests if kind in _CLASS_REQUESTS
                   and (source := path.to_source()) is not None}  # fmt: skip
    pinned = {source for kind, path, _ in output.guard_requests if kind in _IDENTITY_REQUESTS
              and (source := path.to_source()) is not None}  # fmt: skip
    by_class: dict[type, list[tuple[Any, bool]]] = {}
    unclassed: list[tuple[Any, bool]] = []
    for value, tracker in output.wrapped.values():
        path = getattr(tracker, "source", None)
        source = path.to_source() if path is not None else None
        if source is not None:
            member = (source, id(tracker) in written)
            (by_class.setdefault(type(value), []) if source in fixed_class else unclassed).append(member)
    groups = [members + unclassed for members in by_class.values()] or [unclassed]
    found = [
        guards.tensor_aliasing([], [source for source, _ in group])
        for group in groups
        if len(group) >= 2 and any(w for _, w in group) and not all(source in pinned for source, _ in group)
    ]
    for first, second in output.apart:
        a, b = first.to_source(), second.to_source()
        if a is not None and b is not None and a != b:
            found.append(guards.tensor_aliasing([], [a, b]))
    return found


def build_guards(output: OutputGraph | None, ctx: FrameContext) -> guards.GuardSet:
    """Every guard the trace relied on, plus the global torch state and the backend the entry belongs to."""
    from dynajit.capture._runtime import current_backend

    cell_guards = _cell_relations(output) if output is not None else []  # may guard identities: first
    result = guards.GuardSet()
    for guard in cell_guards:
        result.add(guard)
    result.add(guards.global_state(output.autocast_dtype_devices if output is not None else ()))
    result.add(guards.backend_match(current_backend, ctx.backend))
    if output is None:
        return result
    for kind, path, args in output.guard_requests:
        if path is SOURCELESS:
            result.add(_SOURCELESS_FACTORIES[kind](*args))
            continue
        source = path.to_source()
        if source is not None:
            result.add(_FACTORIES[kind](source, *args))
    for first, second in dict.fromkeys(output.aliases):  # a shared object is met again at every read (t5: 10x)
        a, b = first.to_source(), second.to_source()
        if a is not None and b is not None:
            result.add(guards.tensor_aliasing([a, b], []))
    # One graph input per tensor object: the graph is only right while those objects stay distinct.
    distinct = [
        source
        for path, value, _ in output.inputs
        if isinstance(value, torch.Tensor) and (source := path.to_source()) is not None
    ]
    if len(distinct) >= 2:
        result.add(guards.tensor_aliasing([], distinct))
    for guard in _object_relations(output):
        result.add(guard)
    # A graph writing into an input or a module's buffer read the other inputs and module tensors as unchanged by
    # the write: they must stay in other memory (a buffer passed in as an argument too is one graph input).
    tensors = [
        (source, output.wrote_into(value), is_input)
        for is_input, group in ((True, output.inputs), (False, output.module_tensors))
        for path, value, _ in group
        if isinstance(value, torch.Tensor) and (source := path.to_source()) is not None
    ]
    written = [source for source, wrote, _ in tensors if wrote]
    if written and len(tensors) >= 2 and any(is_input for _, _, is_input in tensors):
        result.add(guards.storage_apart(written, [source for source, wrote, _ in tensors if not wrote]))
    for guard in output.shapes.guards():
        result.add(guard)
    return result
