"""Turn the guard requests recorded while tracing into a ``dynajit.guards.GuardSet``."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

import dynajit.guards as guards
from dynajit.capture._symbolic.paths import Path
from dynajit.guards import Check, Cost, Guard

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
_SOURCELESS_FACTORIES: dict[str, Any] = {"global_module_hooks": guards.global_module_hooks}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _weak_identity(kind: str, strong: Any) -> Any:
    """An identity guard factory (ID_MATCH, FUNCTION_MATCH, NN_MODULE) that holds its object weakly.

    A cache entry must not keep a module (or function, or tensor) the user dropped alive forever: the check
    compares with a weak reference's referent (a dead referent matches nothing), and the runtime drops the
    entry when the referent dies (``_cache.CacheEntry.watch``). Objects without weak references are held
    as ``strong`` holds them.
    """

    def factory(source: Any, obj: Any) -> Guard:
        try:
            ref = weakref.ref(obj)
        except TypeError:
            return strong(source, obj)
        guard = strong(source, obj)  # validates the arguments the same way; its checks are replaced below
        expected = _short(obj)

        def changed(values: tuple[Any, ...]) -> str:
            return f"{source.label()} changed: expected {expected}, got {_short(values[0])}"

        # `ref() is value is not None`: a dead referent (None) never matches, not even a None value.
        checks: list[Check] = [Check("{ref}() is {0} is not None", (source,), Cost.IDENTITY, changed, {"ref": ref})]
        if kind == "NN_MODULE":
            training = obj.training
            checks.append(
                Check(
                    "{0}.training is {training}",
                    (source,),
                    Cost.CHEAP,
                    lambda values: f"{source.name()}.training: expected {training}, got {values[0].training}",
                    {"training": training},
                )
            )
        return Guard(guard.kind, guard.sources, tuple(checks), guard.detail, guard.key, guard.label)

    return factory


_FACTORIES: dict[str, Any] = {
    "tensor_match": guards.tensor_match,
    "constant_match": guards.constant_match,
    "equals_match": guards.equals_match,
    "type_match": guards.type_match,
    "length_check": guards.length_check,
    "dict_keys": guards.dict_keys,
    "dict_contains": guards.dict_contains,
    "id_match": _weak_identity("ID_MATCH", guards.id_match),
    "function_match": _weak_identity("FUNCTION_MATCH", guards.function_match),
    "nn_module": _weak_identity("NN_MODULE", guards.nn_module),
    "hasattr_match": guards.hasattr_match,
    "no_module_hooks": guards.no_module_hooks,
}


def build_guards(output: OutputGraph | None, ctx: FrameContext) -> guards.GuardSet:
    """Every guard the trace relied on, plus the global torch state and the backend the entry belongs to."""
    from dynajit.capture._runtime import current_backend

    result = guards.GuardSet()
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
    for first, second in output.aliases:
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
    for guard in output.shapes.guards():
        result.add(guard)
    return result
