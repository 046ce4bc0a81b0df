"""Eager's input checks that fake tensors skip, run while tracing so a traced program raises what eager raises.

A meta kernel computes the result's shape and dtype but not every check the real kernel makes: the
dtype dispatch of ``floor`` (``"floor_vml_cpu" not implemented for 'Bool'``), ``argmin``'s refusal
of bool input, ``x // 0`` on integers. Left to the backend, such an op whose result is unused is
dropped as dead code and the compiled program returns where eager raises. So each pointwise op and
reduction is run once for real on tensors of its arguments' dtypes and ranks with every size 1 (a
size 0 stays 0, for the checks of empty reductions), keeping its scalar arguments: those checks hold
for every input the trace's guards admit (a symbolic size that may be 0 is checked emptied too, and guarded where
that raises). What eager raises there stops the trace before the op
(:class:`RaisesInPython`), so Python runs it and raises it itself. The same holds for the few other ops whose
meta kernels skip eager's checks of ranks and dims (``sort``, ``bucketize``). Any other op with a degenerate
operand, 0-d or empty (whose dims, positions and empty reductions the meta kernels do not check:
``empty.median(0)``), runs once on zeros of its operands' own shapes.

Functionalization cannot express a write into a tensor some of whose elements share memory (an
expanded tensor, a column of one): it scatters the written values back through the view as if each
element had its own, and the base gets their sum. Eager refuses most such writes (``add_``: "unsupported
operation: more than one element of the written-to tensor refers to a single memory location") and does
others (``fill_``, ``zero_``, ``masked_fill_``); either way the op is left to Python (a graph break,
:func:`check_write`), which does what eager does.

``x.copy_(x)`` is recorded as any copy: eager's kernel returns at once when the source is the destination,
but autograd has bumped ``x``'s version by then, which a view made in inference mode, or saved for backward,
checks later. On an expanded ``x`` (whose other writes eager refuses, and whose self-copy it does) it is left
to Python with the other writes into shared memory.
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

import torch
import torch.fx
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.utils._python_dispatch import _disable_current_modes

from dynajit.capture._symbolic import view_checks
from dynajit.capture._symbolic.variables import raises_in_python, unsupported
from dynajit.fxgraph import passes_inplace, writes_elements

__all__ = ["check", "check_write", "is_dense", "is_no_op", "shares_elements", "storage_key"]

aten = torch.ops.aten

# Python operators and the aten ops they run.
_OPERATOR_OPS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
    operator.floordiv: "floor_divide", operator.mod: "remainder", operator.pow: "pow",
    operator.and_: "bitwise_and", operator.or_: "bitwise_or", operator.xor: "bitwise_xor",
    operator.lshift: "bitwise_left_shift", operator.rshift: "bitwise_right_shift",
    operator.neg: "neg", operator.invert: "bitwise_not", operator.abs: "abs", operator.matmul: "matmul",
    operator.iadd: "add_", operator.isub: "sub_", operator.imul: "mul_", operator.itruediv: "div_",
    operator.ifloordiv: "floor_divide_", operator.imod: "remainder_", operator.ipow: "pow_",
    operator.iand: "bitwise_and_", operator.ior: "bitwise_or_", operator.ixor: "bitwise_xor_",
}  # fmt: skip

# Ops whose checks depend on the values (``mvlgamma`` needs every element above (p-1)/2): ones could fail
# where the caller's tensors pass.
_VALUE_CHECKED = {"mvlgamma", "mvlgamma_"}
# Pointwise ops aten does not tag so (``x // 0`` on integers raises in eager only; ``complex`` and ``polar`` of a
# float and a double, or into an ``out=`` of another dtype).
_UNTAGGED_POINTWISE = {"floor_divide", "floor_divide_", "true_divide", "true_divide_", "complex", "polar"}
# Products whose dtype checks live in their kernels (``mm`` of bools is not implemented): size-1 stand-ins keep
# their shapes compatible, since every inner dim is 1.
_PRODUCTS = {"mm", "bmm", "matmul", "addmm", "addmv", "mv", "dot", "linear", "baddbmm", "addbmm"}
# Composites (neither tag) whose dtype checks live in their kernels (``softmax`` of bools is not implemented):
# a graph whose result is unused drops them, so eager's error would go missing.
_COMPOSITES = {"softmax", "log_softmax", "logsumexp", "std", "var", "std_mean", "var_mean", "norm", "hardtanh",
               "leaky_relu", "elu", "silu", "hardswish", "hardsigmoid", "mish", "softplus"}  # fmt: skip
# Ops whose meta kernels skip eager's checks of their operands' ranks and dims (``v.sort(1)`` of a vector raises
# IndexError in eager only, as does ``bucketize`` with 2-D boundaries): size-1 stand-ins keep the ranks.
_RANK_CHECKED = {"sort", "argsort", "msort", "bucketize"}
# Ops whose kernels refuse bools that their meta kernels accept (``median`` of bools is not implemented), and of
# those, the ones refusing ints too: checked on stand-ins for such operands only (a size-1 stand-in refuses
# ``topk(5)``), so an unused one still raises as eager's does.
_KERNEL_REFUSES_BOOLS = {"median", "nanmedian", "kthvalue", "topk", "trace", "logcumsumexp"}
_KERNEL_REFUSES_INTS = {"logcumsumexp"}


def _aten_name(target: Any) -> str | None:
    if isinstance(target, str):
        return target
    if target in _OPERATOR_OPS:
        return _OPERATOR_OPS[target]
    module = getattr(target, "__module__", None) or ""
    qualname = getattr(target, "__qualname__", "")
    if module.startswith("torch") or qualname.startswith("TensorBase.") or qualname.startswith("Tensor."):
        return getattr(target, "__name__", None)
    return None


@functools.cache  # (asked for every traced call: the op table does not change)
def _tags(name: str) -> frozenset[Any] | None:
    """The tags of aten op ``name`` (of all its overloads), None when it is not one or must not run twice: a
    private op, one whose checks read values, one drawing random numbers (running it would advance the generator
    the program draws from)."""
    if name in _VALUE_CHECKED or name.startswith("_"):
        return None
    packet = getattr(aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return None
    tags = frozenset(tag for overload in packet.overloads() for tag in getattr(packet, overload).tags)
    return None if torch.Tag.nondeterministic_seeded in tags else tags


def _checked(name: str) -> bool:
    """Whether ``name`` is an aten pointwise op or reduction drawing no random numbers (checks on ones hold)."""
    if name in _VALUE_CHECKED or name.startswith("_"):
        return False
    if name in _UNTAGGED_POINTWISE or name in _PRODUCTS or name in _COMPOSITES or name in _RANK_CHECKED:
        return True
    tags = _tags(name)
    return tags is not None and (torch.Tag.pointwise in tags or torch.Tag.reduction in tags)


_SCALAR_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def _real(value: Any, make: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``value`` with each tensor (an FX node's example value) replaced by ``make(example)`` (by its value when
    its fake holds one) and each symbolic scalar by the value it was traced with (a dtype check does not read it:
    ``bool_tensor.mul_(n)`` raises for every int ``n``); LookupError for a value known only symbolically (its
    checks cannot be run here)."""
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("example_value")
        if value is None:
            raise LookupError
    if isinstance(value, torch.Tensor):
        # a fake computed from constants alone (``torch.div(8, 4)``) knows its value, which may be used as a number
        constant = getattr(value, "constant", None)
        return constant.clone() if isinstance(constant, torch.Tensor) else make(value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = value.node.hint
        if hint is None:
            raise LookupError
        return _SCALAR_TYPES[type(value)](hint)
    if isinstance(value, (list, tuple)):
        return type(value)(_real(x, make) for x in value)
    return value


def _ones_of_size_one(example: torch.Tensor) -> torch.Tensor:
    shape = [0 if isinstance(n, int) and n == 0 else 1 for n in example.shape]
    return torch.ones(shape, dtype=example.dtype, device=example.device)


def _zeros_of_its_shape(example: torch.Tensor) -> torch.Tensor:
    """Zeros of ``example``'s shape, a symbolic size at the value it was traced with: an error eager raises there
    makes the op run in Python, right for every size (one that eager raises only at other sizes goes unchecked,
    as it would with the size unknown)."""
    shape = [_SCALAR_TYPES[type(n)](n.node.hint) if isinstance(n, torch.SymInt) and n.node.hint is not None else n
             for n in example.shape]  # fmt: skip
    if any(not isinstance(n, int) for n in shape) or torch.Size(shape).numel() > _ZEROS_LIMIT:
        raise LookupError
    return torch.zeros(shape, dtype=example.dtype, device=example.device)


def _stand_in(value: Any) -> Any:
    """``value`` with each tensor replaced by real ones of size 1 (size 0 kept)."""
    return _real(value, _ones_of_size_one)


def _int_lists(value: Any) -> list[int] | None:
    """The ints of a (nested) list of ints, None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (list, int)):
        return None
    if isinstance(value, int):
        return [value]
    found = [_int_lists(v) for v in value]
    return None if any(f is None for f in found) else [i for f in found for i in f]  # type: ignore[union-attr]


def _check_index_bounds(args: tuple[Any, ...]) -> None:
    """Raise in Python when a tensor's index holds a constant list with an int out of its dim's bounds, or
    a non-empty index tensor for an empty dim.

    The index tensor reaches the meta kernel as values it does not read, and the op may be dead code:
    eager's IndexError is checked here, against sizes that guards keep. (An index tensor's values are
    known only when the graph runs: out of bounds of a dim that is not empty, an unused index is not
    checked, as no backend keeps dead code.)
    """
    example = example_tensor(args[0]) if len(args) == 2 else None
    if example is None:
        return
    parts = args[1] if isinstance(args[1], tuple) else (args[1],)
    if not any(isinstance(p, (list, torch.fx.Node)) for p in parts):
        return
    if any(not (p is None or p is Ellipsis or isinstance(p, (int, slice, list, torch.fx.Node))) for p in parts):
        return
    consuming = sum(1 for p in parts if p is not None and p is not Ellipsis)
    dim = 0
    for part in parts:
        if part is Ellipsis:
            dim += example.dim() - consuming
            continue
        if part is None:
            continue
        index = example_tensor(part)
        if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
            return  # a mask consumes as many dims as it has
        if isinstance(index, torch.Tensor) and dim < example.dim():
            # Its values are known only when the graph runs, but none is in bounds of an empty dim.
            if index.numel() != 0 and example.shape[dim] == 0:
                raises_in_python(f"index is out of bounds for dimension {dim} with size 0")
        ints = _int_lists(part) if isinstance(part, list) else None
        if ints and dim < example.dim():
            size = example.shape[dim]
            if not (max(ints) < size and min(ints) >= -size):
                raises_in_python(f"index is out of bounds for dimension {dim} with size {size}")
        dim += 1


# Ops reading a source tensor at positions an index tensor holds: with an empty or a 0-d tensor among them, eager's
# checks (an empty source dim for a non-empty index, mismatched sizes, a 0-d source read at more than one
# position) fail whatever the index values are, and the meta kernels make none of them. Other ops' checks of a 0-d
# operand are of its dims (``sort(dim=1)``, ``index_put_`` with an index), and of an empty one its reduced dim
# (``median``, ``mode`` and ``nanmedian`` of an empty dim raise IndexError), which the meta kernels skip too.
_INDEXING = frozenset(
    {"index_select", "gather", "take", "take_along_dim", "embedding", "index_add", "index_copy", "index_fill"}
    | {"scatter", "scatter_add", "scatter_reduce", "index_reduce"}
)
_ZEROS_LIMIT = 1 << 20


def _degenerate(example: torch.Tensor | None) -> bool:
    """Whether ``example`` is 0-d or has an empty dim: the shapes whose checks the meta kernels skip."""
    return example is not None and (example.dim() == 0 or any(isinstance(n, int) and n == 0 for n in example.shape))


def _check_degenerate(target: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise eager's error for an op with a degenerate (0-d or empty) operand, whose checks the meta kernel
    skips and which dead-code elimination could drop (``scalar.index_select(0, torch.tensor([0, 0]))``,
    ``scalar.sort(1)``, ``empty.median(0)``): run it eagerly on zeros of the same shapes. The values cannot
    matter where the operand is empty, and zeros are in bounds wherever anything is, a 0-d source's one position
    included; should another op's check read them, a wrong refusal only leaves the op to Python."""
    examples = [example_tensor(a) for a in (*args, *kwargs.values())]
    if not any(_degenerate(e) for e in examples):
        return
    err = _eager_error(target, args, kwargs, _zeros_of_its_shape)
    if err is not None:
        _raise_eager_error(name, err)


def _raise_eager_error(name: str, err: Exception) -> NoReturn:
    raises_in_python(f"{name} raises in eager for these sizes ({type(err).__name__}: {str(err)[:200]})")


def _eager_error(
    target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], make: Callable[[torch.Tensor], torch.Tensor]
) -> Exception | None:
    """What eager raises calling ``target`` with each tensor of ``args`` replaced by ``make(example)``; None when
    it returns, or when a value is known only symbolically."""
    try:
        real_args = _real(args, make)
        real_kwargs = {k: _real(v, make) for k, v in kwargs.items()}
    except LookupError:
        return None
    try:
        with _disable_current_modes(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            target(*real_args, **real_kwargs)
    except (RuntimeError, ValueError, IndexError) as err:
        return err
    return None


def _check_sizes_that_may_be_zero(
    target: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], make: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    """Run ``target`` on stand-ins with each symbolic size that may be 0 (``s1 - 2`` of ``x[:, 1:-1]``) emptied in
    turn; where eager raises then (``v.median(-1)``, ``v.amax(-1)`` over an empty dim), that size is guarded: at 0
    the op is left to Python, which raises eager's error itself, and elsewhere a later call at 0 recompiles. The
    checks above see such a size at the value it was traced with, and an unused op's graph is valid at others."""
    for value in (*args, *kwargs.values()):
        example = example_tensor(value)
        if example is None:
            continue
        for dim, size in enumerate(example.shape):
            if not isinstance(size, torch.SymInt) or statically_known_true(size != 0):
                continue

            def emptied(tensor: torch.Tensor, example: torch.Tensor = example, dim: int = dim) -> torch.Tensor:
                stand_in = make(tensor)
                if tensor is not example:
                    return stand_in
                return stand_in.new_zeros((*stand_in.shape[:dim], 0, *stand_in.shape[dim + 1 :]))

            err = _eager_error(target, args, kwargs, emptied)
            # (``size == 0`` guards the size: equal to 0 here, other than 0 wherever the op stays traced)
            if err is not None and size == 0:
                _raise_eager_error(name, err)


def check(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], method: bool = False) -> None:
    """Run ``target`` (a method name when ``method``) eagerly on size-1 stand-ins of ``args``; raise in Python if eager does.

    Arguments are graph nodes (their example values stand for them) and constants.
    """
    if target is operator.getitem or target == "__getitem__":
        _check_index_bounds(args)
        return
    name = _aten_name(target)
    if name is None:
        return
    _check_fill_value(name, args, kwargs)
    _check_dim_in_range(name, args, kwargs)
    _check_index_in_range(name, args, kwargs)
    if name in ("view", "view_as") and args:
        view_checks.check_view(name, example_tensor(args[0]), torch.fx.node.map_aggregate(args[1:], example_value))
    indexing, pointwise = name.rstrip("_") in _INDEXING, _checked(name)
    if name in _KERNEL_REFUSES_BOOLS:
        dtypes = [e.dtype for a in (*args, *kwargs.values()) if (e := example_tensor(a)) is not None]
        integer = any(d != torch.bool and not (d.is_floating_point or d.is_complex) for d in dtypes)
        pointwise = torch.bool in dtypes or (name in _KERNEL_REFUSES_INTS and integer)
    if not (indexing or pointwise or _tags(name) is not None):
        return
    if method:
        target = getattr(torch.Tensor, name, None)
        if target is None:
            return
    _check_sizes_that_may_be_zero(target, name, args, kwargs, _ones_of_size_one if pointwise else _zeros_of_its_shape)
    if indexing or not pointwise:
        _check_degenerate(target, name, args, kwargs)
        return
    try:
        real_args, real_kwargs = _stand_in(args), {k: _stand_in(v) for k, v in kwargs.items()}
    except LookupError:
        return
    if not any(isinstance(a, torch.Tensor) for a in (*real_args, *real_kwargs.values())):
        return
    try:
        # Tracing runs under the frame's fake mode: these tensors and this call must be real.
        with _disable_current_modes(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            target(*real_args, **real_kwargs)
    except (RuntimeError, ValueError, TypeError, IndexError, ArithmeticError) as err:
        raises_in_python(f"{name} raises in eager for these dtypes ({type(err).__name__}: {str(err)[:200]})")


# Ops whose fake kernel wraps a negative dim without checking that it is in range (``x.select(-2, 0)`` of a
# 1-d ``x`` gives a 0-d fake where eager raises IndexError): where the dim is, and its keyword.
_UNCHECKED_DIMS = {"select": (1, "dim")}


def _check_dim_in_range(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise eager's IndexError, in Python, for a dim out of range that the op's fake kernel lets through."""
    where = _UNCHECKED_DIMS.get(name)
    if where is None:
        return
    position, keyword = where
    dim = args[position] if len(args) > position else kwargs.get(keyword)
    tensor = example_tensor(args[0] if args else kwargs.get("input", kwargs.get("self")))
    if type(dim) is not int or tensor is None:
        return
    rank = max(tensor.dim(), 1)
    if not -rank <= dim < rank:
        raises_in_python(
            f"{name} raises in eager (IndexError: Dimension out of range (expected to be in range of "
            f"[{-rank}, {rank - 1}], but got {dim}))"
        )


# Ops whose fake kernel takes an index along a dim without checking that it is in range
# (``select_scatter(x, src, 0, 7)`` of 5 rows): where the dim and the index are, and their keywords.
_UNCHECKED_INDICES = {"select_scatter": ((2, "dim"), (3, "index"))}


def _check_index_in_range(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise eager's IndexError, in Python, for an index out of its dim's range that the op's fake kernel lets
    through (the graph computed a result, or dropped the unused op, where eager raises)."""
    where = _UNCHECKED_INDICES.get(name)
    if where is None:
        return
    (dim_at, dim_keyword), (index_at, index_keyword) = where
    dim = args[dim_at] if len(args) > dim_at else kwargs.get(dim_keyword)
    index = args[index_at] if len(args) > index_at else kwargs.get(index_keyword)
    tensor = example_tensor(args[0] if args else kwargs.get("input", kwargs.get("self")))
    if type(dim) is not int or type(index) is not int or tensor is None or not -tensor.dim() <= dim < tensor.dim():
        return
    size = tensor.shape[dim]
    # (a symbolic size is compared as one: the comparison is guarded, so the graph serves only sizes that agree)
    if not (-size <= index and index < size):
        raises_in_python(
            f"{name} raises in eager (IndexError: index {index} out of range for dim {dim} of size {size})"
        )


# Ops filling a tensor with a number: where the number is, and its keyword.
_FILL_VALUES = {
    "fill": (1, "value"), "fill_": (1, "value"), "full_like": (1, "fill_value"), "new_full": (2, "fill_value"),
    "full": (1, "fill_value"), "index_fill": (3, "value"), "index_fill_": (3, "value"), "scalar_tensor": (0, "s"),
    "pad": (3, "value"), "masked_fill": (2, "value"), "masked_fill_": (2, "value"),
}  # fmt: skip
# Those whose kernel checks the number however many elements it fills (a 16-bit float's one element too).
_ALWAYS_CHECKED_FILLS = {"index_fill", "index_fill_", "masked_fill", "masked_fill_"}
# Those whose number is not of a tensor argument's dtype, without a ``dtype``.
_NEW_TENSORS = {"full", "scalar_tensor"}
# The dtype ``torch.full`` gives a number without a ``dtype``.
_NUMBER_DTYPES: dict[type, Callable[[], torch.dtype]] = {
    bool: lambda: torch.bool,
    int: lambda: torch.int64,
    float: torch.get_default_dtype,
}


def _check_fill_value(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise eager's error, in Python, for a fill with a number the filled dtype cannot hold (``fill_(300)`` of
    int8, ``full_like(half_x, 1e5)``): eager's fill kernel converts it checked; the graph's would wrap it.

    Eager's check has exceptions, followed here: a 16-bit float tensor of one element is filled unchecked (as is
    ``scalar_tensor`` of one), and ``pad`` converts its value as a float (-1 does not fit uint8 there).
    """
    if name not in _FILL_VALUES:
        return
    position, keyword = _FILL_VALUES[name]
    value = example_value(args[position] if len(args) > position else kwargs.get(keyword))
    if name == "pad" and (args[2:3] or [kwargs.get("mode", "constant")])[0] != "constant":
        return
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        value = _hint_in_range(
            value, kwargs.get("dtype") or getattr(example_tensor(args[0]) if args else None, "dtype", None)
        )
    if type(value) not in _NUMBER_DTYPES:
        return
    dtype = kwargs.get("dtype")
    example = example_tensor(args[0]) if name not in _NEW_TENSORS and args else None
    if dtype is None:
        if example is not None:
            dtype = example.dtype
        else:
            dtype = torch.get_default_dtype() if name == "scalar_tensor" else _NUMBER_DTYPES[type(value)]()
    if not isinstance(dtype, torch.dtype) or _fits(float(value) if name == "pad" else value, dtype):
        return
    if dtype in (torch.float16, torch.bfloat16) and name not in _ALWAYS_CHECKED_FILLS:
        elements = None if name == "scalar_tensor" else _filled_elements(name, args, kwargs, example)
        if name == "scalar_tensor" or (elements is not None and statically_known_true(elements == 1)):
            return  # filled unchecked
        if elements is None or not statically_known_true(elements != 1):
            unsupported(f"{name} of a value {dtype} cannot hold: eager raises unless it fills one element")
    raises_in_python(f"{name} raises in eager: the value {value!r} does not fit {dtype} (value cannot be converted)")


def _hint_in_range(value: torch.SymInt | torch.SymFloat, dtype: torch.dtype | None) -> Any:
    """None where a symbolic fill value lies in ``dtype``'s range (so guarded: a later value outside it compiles
    again), else the value it was traced with, for the caller to raise eager's error for."""
    if (
        dtype is None
        or dtype in (torch.bool, torch.float64)
        or (dtype == torch.int64 and isinstance(value, torch.SymInt))
    ):
        return None  # (every value a symbol holds fits)
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    inside = (value >= info.min, value <= info.max)
    if all(statically_known_true(bound) for bound in inside):
        return None
    if value.node.hint is None:
        unsupported(f"a fill value read from tensor data may not fit {dtype}: whether eager raises depends on it")
    if all(bool(bound) for bound in inside):  # (each bool() of a symbolic comparison is a guard)
        return None
    return value.node.hint


def _fits(value: Any, dtype: torch.dtype) -> bool:
    try:
        with _disable_current_modes():
            torch.empty((2,), dtype=dtype).fill_(value)  # (two elements: one is filled unchecked)
    except (RuntimeError, OverflowError):  # (an int beyond uint64 does not convert at all)
        return False
    return True


def _filled_elements(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], example: Any) -> Any:
    """How many elements the fill writes (an int or a SymInt), or None where the trace does not know."""
    if name in ("full", "new_full"):
        sizes = args[1 if name == "new_full" else 0] if len(args) > (name == "new_full") else kwargs.get("size")
        sizes = [example_value(s) for s in (sizes if isinstance(sizes, (list, tuple, torch.Size)) else [sizes])]
    elif example is not None:
        sizes = list(example.shape)
        if name == "pad":
            pads = args[1] if len(args) > 1 else kwargs.get("pad", ())
            for k in range(0, len(pads), 2):
                sizes[-1 - k // 2] = sizes[-1 - k // 2] + example_value(pads[k]) + example_value(pads[k + 1])
    else:
        return None
    if not all(isinstance(size, (int, torch.SymInt)) for size in sizes):
        return None
    return functools.reduce(operator.mul, sizes, 1)


def example_value(value: Any) -> Any:
    """An FX node's example value (a SymInt for a size the trace computed), or ``value`` itself."""
    return value.meta.get("example_value") if isinstance(value, torch.fx.Node) else value


def is_no_op(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether eager does nothing for this call: an in-place layout change that leaves the layout as it is
    (``squeeze_`` with no size-1 dim, ``t_`` of a vector)."""
    return _layout_kept(target, args, kwargs)


def _layout_kept(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    # Eager changes only the tensor's grad_fn then. Recorded, such a no-op on an input requiring grad makes AOT
    # autograd drop requires_grad from the graph's outputs (it finds no metadata change, yet the input changed).
    example = example_tensor(args[0]) if args else None
    plain = all(isinstance(a, (int, tuple, list)) for a in (*args[1:], *kwargs.values()))
    if example is None or not plain or metadata_change(target, args) != "view":
        return False
    if torch.is_grad_enabled() and example.requires_grad:
        # Autograd's checks of in-place ops come first and may raise: on a leaf, on a view (a piece of `unbind`,
        # a view made under no_grad). Whether a tensor is a leaf or a view is not guarded: such a call is not
        # dropped, whatever this trace's input was.
        return False
    if example.is_inference() and not torch.is_inference_mode_enabled():
        return False  # so does the refusal of an in-place op on an inference tensor outside inference mode
    if torch.is_inference_mode_enabled() and not example.is_inference():
        return False  # so does the mark eager puts on a view of a normal tensor changed under inference_mode
    probe = example.detach().as_strided(example.shape, example.stride(), example.storage_offset())
    try:
        getattr(torch.Tensor, str(_aten_name(target)))(probe, *args[1:], **kwargs)
    except Exception:  # the call's own checks: left to the recorded call, which raises as eager does
        return False
    return _same_layout(probe, example)


def _writes_data(target: Any, name: str | None) -> bool:
    """Whether ``target`` writes into its first argument's elements (not only its metadata, as ``t_`` does)."""
    return _is_setitem(target) or (name is not None and writes_elements(name))


def _is_setitem(target: Any) -> bool:
    """Whether ``target`` is ``x[key] = value``: the operator, or ``Tensor.__setitem__`` called by name."""
    return target is operator.setitem or _aten_name(target) == "__setitem__"


def is_dense(tensor: torch.Tensor) -> bool:
    """Whether ``tensor``'s elements fill a block of memory without gaps or overlaps (in any dim order)."""
    return bool(is_non_overlapping_and_dense(tensor))


def shares_elements(tensor: torch.Tensor) -> bool:
    """Whether some elements of ``tensor`` share memory (an expanded tensor): a dim of stride 0 and size > 1."""
    return any(stride == 0 and size > 1 for size, stride in zip(tensor.shape, tensor.stride()))


def _overlaps(value: Any) -> bool:
    """Whether some elements of ``value`` (an FX node's example tensor) share memory."""
    example = example_tensor(value)
    return example is not None and shares_elements(example)


def written(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments (FX nodes and constants) whose elements a call of ``target`` writes: ``out=`` and self."""
    given = kwargs.get("out")
    # (each tensor of a tuple ``out=(values, indices)``)
    out = list(given) if isinstance(given, (list, tuple)) else [given] if "out" in kwargs else []
    if args and (_writes_data(target, _aten_name(target)) or passes_inplace(target, args, kwargs)):
        out.append(args[0])
    return out


#: In-place ops that give their tensor other memory (not only another view of the same memory).
_STORAGE_CHANGES = frozenset({"resize_", "resize_as_", "set_"})


def metadata_change(target: Any, args: tuple[Any, ...]) -> str | None:
    """``"view"`` when ``target`` changes its first argument's layout in place (``t_``, ``unsqueeze_``,
    ``as_strided_``), ``"storage"`` when it changes its memory (``resize_``, ``set_``), else None."""
    name = _aten_name(target)
    if not args or name is None or not name.endswith("_") or name.startswith("_") or name == "detach_":
        return None
    packet = getattr(aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return None
    if not any(torch.Tag.inplace_view in getattr(packet, o).tags for o in packet.overloads()):
        return None
    return "storage" if name in _STORAGE_CHANGES else "view"


def resized_outs(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.fx.Node]:
    """The ``out=`` tensors (FX nodes) a call of ``target`` resizes: eager gives an ``out`` of another shape than
    the result's that shape (over the same memory when it fits). The op runs here on fake stand-ins of the outs
    to find them; the outs themselves are left as they are."""
    given = kwargs.get("out")
    outs = list(given) if isinstance(given, (list, tuple)) else [given]
    examples = [example_tensor(out) for out in outs]
    if not all(isinstance(out, torch.fx.Node) for out in outs) or any(e is None for e in examples):
        return []
    if isinstance(target, str):
        target = getattr(torch.Tensor, target, None)
    fake_mode = getattr(examples[0], "fake_mode", None)
    if target is None or fake_mode is None:
        return []
    try:
        with fake_mode, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probes = [torch.empty_strided(e.shape, e.stride(), dtype=e.dtype, device=e.device) for e in examples]
            values = torch.fx.node.map_aggregate(args, example_value)
            others = {k: torch.fx.node.map_aggregate(v, example_value) for k, v in kwargs.items() if k != "out"}
            target(*values, **others, out=type(given)(probes) if isinstance(given, (list, tuple)) else probes[0])
    except Exception:  # the op's own error: the recorded call raises it, as eager does
        return []
    return [out for out, e, p in zip(outs, examples, probes) if not _same_layout(p, e)]


def storage_key(tensor: torch.Tensor) -> int:
    """Which storage ``tensor`` views (the same number for every tensor over it)."""
    return tensor.untyped_storage()._cdata


def example_tensor(value: Any) -> torch.Tensor | None:
    """The fake tensor an FX node holds as its example value, or None for anything else."""
    example = value.meta.get("example_value") if isinstance(value, torch.fx.Node) else None
    return example if isinstance(example, torch.Tensor) else None


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` provably view the same elements in the same order (symbolic sizes included)."""
    pairs = [(a.dim(), b.dim()), (a.storage_offset(), b.storage_offset())]
    if a.dim() == b.dim():
        pairs += [*zip(a.shape, b.shape), *zip(a.stride(), b.stride())]
    return all(statically_known_true(x == y) for x, y in pairs)


def _setitem_region(args: tuple[Any, ...]) -> torch.Tensor | None:
    """The fake view ``x[index]`` a ``x[index] = value`` writes, for a basic index (None for any other)."""
    example = example_tensor(args[0])
    parts = args[1] if isinstance(args[1], tuple) else (args[1],)
    basic = (int, slice, type(None), type(Ellipsis), torch.SymInt)
    if example is None or not all(isinstance(p, basic) for p in parts):
        return None
    if any(isinstance(x, torch.fx.Node) for p in parts if isinstance(p, slice) for x in (p.start, p.stop, p.step)):
        return None
    try:
        with example.fake_mode:  # type: ignore[attr-defined]
            return example[args[1]]
    except Exception:  # an index eager refuses: recording the write raises it, as eager does
        return None


# Ops that read each operand's element i for the written element i alone (besides the pointwise-tagged ones):
# an operand viewing the written memory in the same layout reads each element before its own write, as in eager.
_ELEMENTWISE_WRITES = {"copy_", "copy", "threshold_", "threshold", *_UNTAGGED_POINTWISE}


def _reads_elementwise(name: str | None) -> bool:
    if name is None:
        return False
    tags = _tags(name)
    return name in _ELEMENTWISE_WRITES or (tags is not None and torch.Tag.pointwise in tags)


def _nodes(values: Any) -> list[torch.fx.Node]:
    """The FX nodes among ``values``, in lists and tuples too (``cat``'s tensors, ``index_put_``'s indices)."""
    found: list[torch.fx.Node] = []
    for value in values:
        if isinstance(value, torch.fx.Node):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found += _nodes(value)
    return found


def _reads_written_memory(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the op reads, through an operand, memory it writes: in another layout, or (unless it reads
    element by element) at all.

    ``x.scatter_(0, i, x)``, ``x.index_add_(0, i, x)``, ``torch.cat([x[:1], x[:1]], out=x[:2])``: eager refuses the
    overlap ("some elements of the input tensor and the written-to tensor refer to a single memory location"), or
    reads elements it has already written (``x.masked_scatter_(m, x)``, ``torch.mm(x, x, out=x)``).
    """
    name = _aten_name(target)
    writes_self = bool(args) and (_writes_data(target, name) or passes_inplace(target, args, kwargs))
    targets = [e for w in written(target, args, kwargs) if (e := example_tensor(w)) is not None]
    others = [v for k, v in kwargs.items() if k != "out"]
    operands = _nodes((*(args[1:] if writes_self else args), *others))
    elementwise = _reads_elementwise(name)
    if _is_setitem(target) and len(args) == 3 and targets:
        # ``x[i] += 1`` stores back the view it added into: the write's region, not ``x``, is what it overwrites.
        region = _setitem_region(args)
        operands = [args[2]] if isinstance(args[2], torch.fx.Node) else []
        # (an advanced index's region is not a view: the write is an ``index_put_`` into ``x``, checked against it)
        elementwise = region is not None
        if region is not None:
            targets = [region]
    for example in targets:
        key = storage_key(example)
        for other in operands:
            seen = example_tensor(other)
            if seen is None or storage_key(seen) != key:
                continue
            if not elementwise or (seen is not example and not _same_layout(seen, example)):
                return True
    return False


_EXPANDS = frozenset({"expand", "expand_as", "broadcast_to"})


def _through_expand(node: Any) -> bool:
    """Whether ``node``'s tensor is a view made, at some step, by an expand (even one that repeats nothing)."""
    while isinstance(node, torch.fx.Node) and node.args:
        if _aten_name(node.target) in _EXPANDS:
            return True
        base, example = node.args[0], example_tensor(node)
        if node.target is operator.getitem and isinstance(base, torch.fx.Node) and base.args:
            if isinstance(base.meta.get("example_value"), (list, tuple)):
                base = base.args[0]  # a piece of a split or chunk: the view is of what was split
        seen = example_tensor(base)
        if example is None or seen is None or storage_key(seen) != storage_key(example):
            return False
        node = base
    return False


def check_write(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Leave to Python (a graph break) an in-place op or ``out=`` write that functionalization would get wrong.

    That is a write into a tensor whose elements share memory (an expanded tensor) or through an expand
    view, and a write whose operand views the written memory in another layout (``x.mul_(x[..., :1])``):
    eager reads each element of such an operand before or after its write, in its own loop order, where
    the graph reads them all before.
    """
    name = getattr(target, "__name__", target)
    _check_out_is_not_resized(target, args, kwargs)
    targets = written(target, args, kwargs)
    if any(_overlaps(w) for w in targets):
        unsupported(f"{name} writes into a tensor whose elements share memory (an expanded tensor)")
    if any(_through_expand(w) for w in targets):
        # Functionalization rebuilds the base of an expand view as ``base + (new - base)``: wrong for a base
        # of NaN or inf and for far-apart magnitudes (``1e20 + (1 - 1e20)`` is 0), refused for bools. The
        # write is left to Python, which rebuilds nothing.
        unsupported(f"{name} writes through an expand view, which functionalization does not replay exactly")
    if _reads_written_memory(target, args, kwargs):
        unsupported(
            f"{name} reads memory it writes, through a view in another layout or as an operand it does not read element "
            "by element (eager refuses the overlap, or its result depends on its loop order)"
        )


def _check_out_is_not_resized(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise eager's error, in Python, for a pointwise ``out=`` write into one of its own operands of another
    shape than the result's (``torch.add(v, x, out=v)`` with ``v`` of shape (1, 1) and ``x`` of (1, 2)).

    Eager's kernel treats that write as in-place and refuses to resize the operand; the fake kernel resizes it
    with a warning, and the graph would compute where eager raises.
    """
    out = kwargs.get("out")
    name = _aten_name(target)
    if not isinstance(out, torch.fx.Node) or not any(a is out for a in args) or name is None or not _checked(name):
        return
    shapes = [e.shape for a in (*args, *kwargs.values()) if (e := example_tensor(a)) is not None]
    if not shapes:
        return
    written_shape = example_tensor(out).shape  # type: ignore[union-attr]
    try:
        # (with symbolic sizes, the comparison below guards on them, as eager's answer depends on them)
        result = torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return  # the op raises its own error when recorded
    if len(written_shape) != len(result) or any(w != r for w, r in zip(written_shape, result)):
        message = f"output with shape {list(written_shape)} doesn't match the broadcast shape {list(result)}"
        raises_in_python(f"{name} raises in eager ({message})")
