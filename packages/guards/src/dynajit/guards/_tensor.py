"""Tensor guards: TENSOR_MATCH (class, dtype, device, layout, requires_grad, dispatch keys, sizes, strides),
LAYOUT_MATCH (what can change in place under a fixed identity: dtype, device, requires_grad, sizes, strides,
storage offset), TENSOR_ALIASING (which inputs are, or are not, the same tensor) and STORAGE_APART (inputs a graph writes
into share memory with no other input).

Cheapness drives the expressions chosen (measured in ``benchmarks/guards_bench.py``
and noted in the package README): ``type(x) is C``, ``x.dtype is torch.float32``
(dtypes are singletons), ``x.is_cpu`` rather than building a ``torch.device``,
``x.shape == (8,)`` (one tuple comparison covers ndim and every size), and
``x.stride() == (1,)``. Reading the full dispatch key set
(``torch._C._dispatch_keys``) costs several times the rest of the guard, so it
is only checked when the example tensor carries unusual keys; for ordinary
tensors, the keys that can differ between two tensors of the same class, dtype,
device and layout are covered by ``is_inference()``, ``is_neg()``/``is_conj()``
(math views) and, for functorch wrappers, the global-state guard (transforms
active or not).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from ._guard import Check, Cost, Guard, short_repr
from ._kinds import type_check, type_name
from ._sources import Source

__all__ = ["dtype_name", "layout_match", "storage_apart", "tensor_aliasing", "tensor_match"]

_dispatch_keys = torch._C._dispatch_keys


def dtype_name(dtype: torch.dtype) -> str:
    """``float32`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def _reference_keys(example: torch.Tensor) -> Any:
    """The dispatch keys an ordinary tensor like ``example`` (same dtype/device/layout/modes) would have."""
    with torch.inference_mode(example.is_inference()):
        reference = torch.empty(0, dtype=example.dtype, device=example.device, layout=example.layout)
    if example.is_conj():
        reference = reference.conj()
    if example.is_neg():
        reference = torch._neg_view(reference)
    return _dispatch_keys(reference)


def _has_unusual_keys(example: torch.Tensor) -> bool:
    try:
        return _dispatch_keys(example) != _reference_keys(example)
    except Exception:  # a layout or device torch.empty cannot build: compare the full key set
        return True


def _property_check(
    source: Source, what: str, template: str, expected: Any, show: Callable[[Any], str], read: Callable[[Any], Any]
) -> Check:
    """A check that one property of the tensor equals ``expected``; ``read`` gets the property for messages."""
    name = source.name()

    def explain(values: tuple[Any, ...]) -> str:
        return f"{name} {what}: expected {show(expected)}, got {show(read(values[0]))}"

    return Check(template, (source,), Cost.TENSOR, explain, {"expected": expected})


def _device_check(source: Source, device: torch.device) -> Check:
    """The tensor is on ``device`` (``x.is_cpu`` for the CPU: no ``torch.device`` is built)."""
    template = "{0}.is_cpu" if device.type == "cpu" else "{0}.device == {expected}"
    return _property_check(source, "device", template, device, str, lambda t: t.device)


def _requires_grad_check(source: Source, requires_grad: bool) -> Check:
    return _property_check(
        source, "requires_grad", "{0}.requires_grad is {expected}", requires_grad, str, lambda t: t.requires_grad
    )


def _dims_explain(name: str, method: str, expected: Sequence[int], skip: frozenset[int]) -> Callable[[tuple], str]:
    def explain(values: tuple[Any, ...]) -> str:
        got = tuple(getattr(values[0], method)())
        if len(got) != len(expected):
            return f"{name} ndim: expected {len(expected)}, got {len(got)}"
        for dim, (want, have) in enumerate(zip(expected, got)):
            if dim not in skip and want != have:
                return f"{name} {method}()[{dim}]: expected {want}, got {have}"
        return f"{name} {method}(): expected {tuple(expected)}, got {got}"

    return explain


def _dims_checks(source: Source, method: str, expected: tuple[int, ...], dynamic: frozenset[int]) -> list[Check]:
    """Sizes or strides equal ``expected`` except on dynamic dims (the ndim check precedes it when any are dynamic);
    no check when every dim is dynamic."""
    explain = _dims_explain(source.name(), method, expected, dynamic)
    if not dynamic:
        reader = "{0}.shape" if method == "size" else "{0}.stride()"
        return [Check(f"{reader} == {{expected}}", (source,), Cost.TENSOR, explain, {"expected": expected})]
    static = [dim for dim in range(len(expected)) if dim not in dynamic]
    if not static:
        return []
    template = " and ".join(f"{{0}}.{method}({dim}) == {expected[dim]}" for dim in static)
    return [Check(template, (source,), Cost.TENSOR, explain)]


def tensor_match(source: Source, example: torch.Tensor, dynamic_dims: Iterable[int] = ()) -> Guard:
    """TENSOR_MATCH: the value is a tensor like ``example``.

    Checks the Python class, dtype, device, layout, requires_grad, dispatch keys
    (inference tensors, conjugate/negative views, and the full key set when
    ``example`` has unusual keys), ndim, sizes and strides. Sizes and strides of
    the dimensions in ``dynamic_dims`` are not checked (a contiguous example
    with dynamic dims requires a contiguous value instead of fixed strides);
    relations between dynamic sizes belong in
    :func:`~dynajit.guards.expression` guards.

    ``example`` must be the real value the frame saw (not a fake tensor).
    """
    if not isinstance(source, Source):
        raise TypeError(f"tensor_match() needs a Source as its first argument, got {source!r}")
    if not isinstance(example, torch.Tensor):
        raise TypeError(f"tensor_match() needs a tensor example for {source.name()}, got {type_name(type(example))}")
    if any(cls.__name__ == "FakeTensor" and cls.__module__.startswith("torch.") for cls in type(example).__mro__):
        raise TypeError(
            f"tensor_match() got a FakeTensor for {source.name()}: guards check the real inputs, "
            "so pass the frame's real argument value"
        )
    ndim = example.dim()
    dynamic = frozenset(_normalize_dim(dim, ndim, source) for dim in dynamic_dims)
    name = source.name()
    cls, dtype, device, layout = type(example), example.dtype, example.device, example.layout

    checks = [
        type_check(source, cls),
        _property_check(source, "dtype", "{0}.dtype is {expected}", dtype, dtype_name, lambda t: t.dtype),
        _device_check(source, device),
        _property_check(source, "layout", "{0}.layout is {expected}", layout, str, lambda t: t.layout),
        _requires_grad_check(source, example.requires_grad),
        _property_check(
            source,
            "inference tensor",
            "{0}.is_inference() is {expected}",
            example.is_inference(),
            str,
            lambda t: t.is_inference(),
        ),
    ]
    if dtype.is_floating_point or dtype.is_complex:
        checks.append(
            _property_check(
                source, "negative bit", "{0}.is_neg() is {expected}", example.is_neg(), str, lambda t: t.is_neg()
            )
        )
    if dtype.is_complex:
        checks.append(
            _property_check(
                source, "conjugate bit", "{0}.is_conj() is {expected}", example.is_conj(), str, lambda t: t.is_conj()
            )
        )
    if _has_unusual_keys(example):
        keys = _dispatch_keys(example)
        checks.append(
            Check(
                "{dispatch_keys}({0}) == {keys}",
                (source,),
                Cost.TENSOR,
                lambda values: f"{name} dispatch keys: expected {keys}, got {_dispatch_keys(values[0])}",
                {"dispatch_keys": _dispatch_keys, "keys": keys},
            )
        )
    sizes = tuple(example.shape)
    if dynamic:
        checks.append(_property_check(source, "ndim", "{0}.dim() == {expected}", ndim, str, lambda t: t.dim()))
    checks.extend(_dims_checks(source, "size", sizes, dynamic))
    strides: tuple[int, ...] | None = None
    if layout == torch.strided:
        strides = tuple(example.stride())
        if dynamic and example.is_contiguous():
            # Contiguous strides follow from the sizes, dynamic ones included: one check covers them all
            # (a per-dim check would pin strides that depend on a dynamic size, or skip ones that matter).
            contiguous = _property_check(
                source, "contiguous", "{0}.is_contiguous() is {expected}", True, str, lambda t: t.is_contiguous()
            )
            checks.append(contiguous)
        else:
            checks.extend(_dims_checks(source, "stride", strides, dynamic))
    detail = (
        f"{type_name(cls)} {dtype_name(dtype)} {device} requires_grad={example.requires_grad}"
        f" size={list(sizes)} stride={list(strides) if strides is not None else layout}"
        + (f" dynamic_dims={sorted(dynamic)}" if dynamic else "")
    )
    bits = (example.requires_grad, example.is_inference(), example.is_neg(), example.is_conj())
    key = (
        "TENSOR",
        source,
        cls,
        dtype,
        str(device),
        str(layout),
        bits,
        str(_dispatch_keys(example)),
        sizes,
        strides,
        dynamic,
    )
    return Guard("TENSOR_MATCH", (source,), tuple(checks), detail, key)


def layout_match(source: Source, example: torch.Tensor) -> Guard:
    """LAYOUT_MATCH: a tensor whose identity another guard fixes still has ``example``'s dtype, device,
    requires_grad, sizes, strides and storage offset.

    A module's parameter or buffer keeps its identity while ``param.data = ...``, ``module.half()`` or
    ``requires_grad_()`` change these in place, and a backend's kernels, compiled for the old ones, would read
    the new memory as the old. Its class, layout and dispatch keys cannot change without its identity.
    """
    if not isinstance(source, Source):
        raise TypeError(f"layout_match() needs a Source as its first argument, got {source!r}")
    if not isinstance(example, torch.Tensor) or example.layout != torch.strided:
        raise TypeError(f"layout_match() needs a strided tensor example for {source.name()}, got {short_repr(example)}")
    device = example.device
    checks = [
        _property_check(source, "dtype", "{0}.dtype is {expected}", example.dtype, dtype_name, lambda t: t.dtype),
        _device_check(source, device),
        _requires_grad_check(source, example.requires_grad),
        *_dims_checks(source, "size", tuple(example.shape), frozenset()),
        *_dims_checks(source, "stride", tuple(example.stride()), frozenset()),
        _property_check(
            source,
            "storage offset",
            "{0}.storage_offset() == {expected}",
            example.storage_offset(),
            str,
            lambda t: t.storage_offset(),
        ),
    ]
    detail = (
        f"{dtype_name(example.dtype)} {device} requires_grad={example.requires_grad} size={list(example.shape)}"
        f" stride={list(example.stride())} offset={example.storage_offset()}"
    )
    key = ("LAYOUT", source, example.dtype, str(device), example.requires_grad, tuple(example.shape),
           tuple(example.stride()), example.storage_offset())  # fmt: skip
    return Guard("LAYOUT_MATCH", (source,), tuple(checks), detail, key)


def _normalize_dim(dim: int, ndim: int, source: Source) -> int:
    if not isinstance(dim, int) or not -ndim <= dim < ndim:
        raise ValueError(f"dynamic dim {dim!r} is out of range for {source.name()}, which has {ndim} dimensions")
    return dim % ndim


def tensor_aliasing(sources_same: Sequence[Source], sources_distinct: Sequence[Source]) -> Guard:
    """TENSOR_ALIASING: every source in ``sources_same`` is one and the same object, and the sources in
    ``sources_distinct`` are pairwise different objects.

    Use one guard per group of aliased inputs; pass one representative of each
    group in ``sources_distinct``. Either sequence may be empty.
    """
    same, distinct = tuple(sources_same), tuple(sources_distinct)
    for source in same + distinct:
        if not isinstance(source, Source):
            raise TypeError(f"tensor_aliasing() takes sequences of Sources, got {source!r}")
    if len(same) < 2 and len(distinct) < 2:
        raise ValueError("tensor_aliasing() needs two or more sources in sources_same or in sources_distinct")
    checks = [_same_check(same[0], other) for other in same[1:]]
    if len(distinct) >= 2:
        checks.append(_distinct_check(distinct))
    parts = []
    if len(same) >= 2:
        parts.append(" is ".join(source.name() for source in same))
    if len(distinct) >= 2:
        parts.append("distinct: " + ", ".join(source.name() for source in distinct))
    subject = ", ".join(source.label() for source in dict.fromkeys(same + distinct))
    return Guard(
        "TENSOR_ALIASING", same + distinct, tuple(checks), "; ".join(parts), ("ALIAS", same, distinct), subject
    )


def _same_check(first: Source, other: Source) -> Check:
    def explain(values: tuple[Any, ...]) -> str:
        return f"{other.name()} must be the same object as {first.name()}, got a different one"

    return Check("{0} is {1}", (first, other), Cost.RELATION, explain)


def _distinct_check(sources: tuple[Source, ...]) -> Check:
    def explain(values: tuple[Any, ...]) -> str:
        for i in range(len(values)):
            for j in range(i + 1, len(values)):
                if values[i] is values[j]:
                    what = "tensors" if isinstance(values[i], torch.Tensor) else "objects"
                    return f"{sources[i].name()} and {sources[j].name()} must be different {what}, got the same one"
        return "inputs " + ", ".join(s.name() for s in sources) + " must be different objects"

    count = len(sources)
    if count <= 3:
        template = " and ".join(f"{{{i}}} is not {{{j}}}" for i in range(count) for j in range(i + 1, count))
    else:
        ids = ", ".join(f"{{id}}({{{i}}})" for i in range(count))
        template = f"len({{{{{ids}}}}}) == {count}"
    return Check(template, sources, Cost.RELATION, explain, {"id": id} if count > 3 else {})


def storage_apart(written: Sequence[Source], others: Sequence[Source]) -> Guard:
    """STORAGE_APART: no tensor in ``written`` shares its storage with another tensor of ``written`` or ``others``.

    A graph that writes into an input reads every other input as unchanged by that write; it is only
    right while they are in other memory (two views of one tensor passed across a graph break are not).
    """
    written, others = tuple(written), tuple(others)
    for source in written + others:
        if not isinstance(source, Source):
            raise TypeError(f"storage_apart() takes sequences of Sources, got {source!r}")
    if not written or len(written) + len(others) < 2:
        raise ValueError("storage_apart() needs a written source and another source")
    sources = written + others

    def explain(values: tuple[Any, ...]) -> str:
        keys = [_storage_key(v) for v in values]
        for i in range(len(written)):
            for j, key in enumerate(keys):
                if j != i and key == keys[i]:
                    return f"{sources[i].name()} shares memory with {sources[j].name()}, and the graph writes into it"
        return "inputs the graph writes into must share memory with no other input"

    fields = ", ".join(f"{{{i}}}" for i in range(len(sources)))
    check = Check(f"{{apart}}({len(written)}, {fields})", sources, Cost.RELATION, explain, {"apart": _apart})
    detail = "written apart from the rest: " + ", ".join(source.name() for source in sources)
    subject = ", ".join(source.label() for source in sources)
    return Guard("STORAGE_APART", sources, (check,), detail, ("STORAGE_APART", written, others), subject)


def _storage_key(value: Any) -> Any:
    return value.untyped_storage()._cdata if isinstance(value, torch.Tensor) else id(value)


def _apart(count: int, *tensors: Any) -> bool:
    keys = [_storage_key(t) for t in tensors]
    counts = collections.Counter(keys)
    return all(counts[key] == 1 for key in keys[:count])
