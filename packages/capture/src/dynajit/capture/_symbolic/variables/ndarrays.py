"""NumPy ndarrays while tracing: an ndarray is the graph tensor holding its data, plus what NumPy says of it.

An :class:`NdarrayVar` wraps a :class:`TensorVar` (the data in the graph). Its
metadata (shape, dtype, strides, ...) is read from the tensor's example value
in NumPy's terms; its operators, methods and computed attributes become
``torch._numpy`` nodes (``numpy_calls``). ``scalar`` says that eager NumPy
holds the value as a NumPy scalar (``np.float64``), not a 0-d array: reductions,
ufuncs and indexing down to 0-d give scalars, views and copies keep arrays.
After the graph, the bytecode turns the tensor back into that ndarray or
scalar with ``Tensor.numpy()`` (sharing memory, as eager's would).

An ndarray argument is a graph input made by ``torch.from_numpy`` (so writes
through the graph reach the caller's array), guarded by its type, dtype,
shape, strides and writeability.
"""

from __future__ import annotations

import inspect
import operator
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import torch

from dynajit.capture._symbolic import numpy_calls, numpy_oracle
from dynajit.capture._symbolic.paths import Attr, Path
from dynajit.capture._symbolic.variables.base import VT, HeldVar, attribute_missing, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.classes import ClassVar
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.tensor import TensorVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "NdarrayVar",
    "NumpyFunctionVar",
    "ndarray_getitem",
    "ndarray_operator",
    "ndarray_setitem",
    "tensor_numpy",
    "torch_call_on_ndarrays",
    "wrap_numpy_value",
]

# NumPy functions and ndarray methods whose 0-d result is still a 0-d array (views, copies, constructors);
# every other operation NumPy hands back as a NumPy scalar when its result is 0-d.
_ARRAY_KEEPING_FUNCTIONS = frozenset(
    {
        "array",
        "asarray",
        "asanyarray",
        "ascontiguousarray",
        "copy",
        "reshape",
        "transpose",
        "squeeze",
        "where",
        "real",
        "imag",
        "tensordot",
        "broadcast_to",
        "zeros",
        "ones",
        "empty",
        "full",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "moveaxis",
        "swapaxes",
    }
)
_ARRAY_KEEPING_METHODS = frozenset({"copy", "reshape", "view", "astype", "transpose", "squeeze", "swapaxes", "conj"})

# Metadata answered from the example value (guarded by the input's guards, or fixed by the graph's ops).
_META_ATTRS = frozenset({"shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides"})
# Attributes the graph computes.
_GRAPH_ATTRS = frozenset({"T", "real", "imag", "mT"})

# Calls that read the data into Python, or leave the graph's world: a graph break naming them.
_BREAKING_METHODS = {
    "item": "ndarray.item() reads the array's data into a Python number",
    "tolist": "ndarray.tolist() reads the array's data into Python lists",
    "tobytes": "ndarray.tobytes() reads the array's data",
    "fill": "ndarray.fill() is not traced",
    "resize": "ndarray.resize() changes the array in place",
    "sort": "ndarray.sort() sorts in place",
    "put": "ndarray.put() writes the array in place",
    "itemset": "ndarray.itemset() writes the array in place",
    "partition": "ndarray.partition() reorders the array in place",
    "byteswap": "ndarray.byteswap() is not traced",
    "setflags": "ndarray.setflags() changes the array's flags",
    "__array__": "ndarray.__array__ is not traced",
}
_BREAKING_FUNCTIONS = {
    "allclose": "np.allclose returns a Python bool computed from the data",
    "array_equal": "np.array_equal returns a Python bool computed from the data",
    "array_equiv": "np.array_equiv returns a Python bool computed from the data",
    "save": "np.save does I/O",
    "load": "np.load does I/O",
    "savetxt": "np.savetxt does I/O",
    "loadtxt": "np.loadtxt does I/O",
    "printoptions": "np.printoptions changes global state",
    "set_printoptions": "np.set_printoptions changes global state",
    "seterr": "np.seterr changes global state",
    "copyto": "np.copyto writes its first argument in place",
    "put": "np.put writes its first argument in place",
    "place": "np.place writes its first argument in place",
    "putmask": "np.putmask writes its first argument in place",
    "put_along_axis": "np.put_along_axis writes its first argument in place",
    "fill_diagonal": "np.fill_diagonal writes its first argument in place",
}


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a tensor dtype (a graph break for one NumPy lacks, bfloat16)."""
    for np_dtype, torch_dtype in numpy_calls.NUMPY_DTYPES.items():
        if torch_dtype == dtype:
            return np_dtype
    unsupported(f"NumPy has no dtype for {dtype}")


class NdarrayVar(VT):
    """An ndarray (or NumPy scalar, when ``scalar``): the tensor holding its data in the graph."""

    def __init__(self, tensor: TensorVar, scalar: bool = False, source: Path | None = None) -> None:
        self.tensor = tensor
        self.scalar = scalar and tensor.example.dim() == 0
        self.source = source

    @property
    def example(self) -> torch.Tensor:
        return self.tensor.example

    def python_type(self) -> type:
        return numpy_dtype(self.example.dtype).type if self.scalar else np.ndarray

    def truth(self, tx: Tracer) -> bool:
        unsupported("the truth value of an ndarray depends on its data (data-dependent control flow)")

    def unpack(self, tx: Tracer) -> list[VT]:
        if self.example.dim() == 0:
            raises_in_python("iteration over a 0-d array", TypeError("iteration over a 0-d array"))
        return [ndarray_getitem(tx, self, ConstVar(i)) for i in range(int(self.example.shape[0]))]

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name in _META_ATTRS:
            return self._metadata(tx, name)
        if name in _GRAPH_ATTRS:
            if name == "mT":
                attribute_missing(tx, None, name, "'numpy.ndarray' object has no attribute 'mT'")
            return _call(tx, numpy_calls.numpy_attr(name), [self], {}, True, _reader(name), f"ndarray.{name}")
        if not hasattr(np.ndarray, name):
            attribute_missing(tx, None, name, f"'numpy.ndarray' object has no attribute {name!r}")
        if name.startswith("__") or not callable(inspect.getattr_static(np.ndarray, name)):
            unsupported(f"ndarray.{name} is not traced")  # flags, base, flat, ctypes, data, dunder methods
        return NdarrayMethodVar(self, name)

    def _metadata(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.containers import TupleVar

        example = self.example
        dtype = numpy_dtype(example.dtype)
        if name in ("ndim", "dtype", "itemsize"):
            return ConstVar(example.dim() if name == "ndim" else dtype if name == "dtype" else dtype.itemsize)
        if any(isinstance(s, torch.SymInt) for s in (*example.shape, *example.stride())):
            if name == "shape":  # symbolic sizes, as the tensor's (a tuple, as NumPy's)
                return TupleVar(list(self.tensor.symbolic_sizes(tx, [], {}).unpack(tx)))
            unsupported(f"ndarray.{name} of an array with symbolic sizes")
        values = {
            "shape": tuple(int(s) for s in example.shape),
            "ndim": example.dim(),
            "size": int(example.numel()),
            "dtype": dtype,
            "itemsize": dtype.itemsize,
            "nbytes": int(example.numel()) * dtype.itemsize,
            "strides": tuple(int(s) * dtype.itemsize for s in example.stride()),
        }
        return tx.wrap_const(values[name])

    def children(self) -> list[VT]:
        return [self.tensor]

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)  # the caller's own array: the graph wrote through its memory
            return

        def build() -> None:
            def args() -> int:
                cg.load_tensor(self.tensor)
                cg.load_const(self.scalar)
                return 2

            cg.call_helper(numpy_calls.to_ndarray, args)

        cg.build_cached(self, build)

    def __repr__(self) -> str:
        kind = "NumpyScalarVar" if self.scalar else "NdarrayVar"
        return f"{kind}({self.tensor.node.name})"


class NdarrayMethodVar(VT):
    """``array.method`` before the call."""

    def __init__(self, array: NdarrayVar, name: str) -> None:
        self.array = array
        self.name = name

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if self.name in _BREAKING_METHODS:
            unsupported(_BREAKING_METHODS[self.name])
        if "out" in kwargs:
            unsupported(f"ndarray.{self.name}(out=...) is not traced")
        if any(_holds_tensor(a) for a in [*args, *kwargs.values()]):
            unsupported(f"ndarray.{self.name} called with a torch.Tensor (NumPy runs it through Tensor.__array__)")
        if self.array.scalar and self.name in ("reshape", "astype", "copy", "view"):
            # A NumPy scalar's methods give a scalar back for 0-d results.
            keeps = self.name == "reshape"
        else:
            keeps = self.name in _ARRAY_KEEPING_METHODS
        target = numpy_calls.numpy_method(self.name)
        reference = _method_caller(self.name)
        return _call(tx, target, [self.array, *args], kwargs, keeps, reference, f"ndarray.{self.name}")

    def children(self) -> list[VT]:
        return [self.array]

    def reconstruct(self, cg: CodeGen) -> None:
        self.array.reconstruct(cg)
        cg.load_attr(self.name)

    def __repr__(self) -> str:
        return f"NdarrayMethodVar({self.array!r}.{self.name})"


class NumpyFunctionVar(HeldVar):
    """A NumPy function or ufunc (``np.sin``, ``np.linalg.norm``): calls become ``torch._numpy`` nodes."""

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        fn = self.value
        name = getattr(fn, "__name__", repr(fn))
        module = getattr(fn, "__module__", "") or ""
        qualname = f"{module.removeprefix('numpy').lstrip('.')}.{name}".lstrip(".")
        if module.startswith("numpy.random"):
            # NumPy draws from its own global generator; the graph would draw from torch's, another stream.
            unsupported(f"np.{qualname} draws from NumPy's random state, which the graph cannot reproduce")
        if name in _BREAKING_FUNCTIONS:
            unsupported(_BREAKING_FUNCTIONS[name])
        if name in ("asarray", "array") and args and isinstance(args[0], TensorVar):
            # The tensor's data as an ndarray, through Tensor.__array__ (which is Tensor.numpy()).
            args = [tensor_numpy(tx, args[0], [], {}), *args[1:]]
        if any(_holds_tensor(a) for a in [*args, *kwargs.values()]):
            # NumPy converts it through __array__, or calls its methods (np.sum), and a ufunc hands back a
            # tensor through __array_wrap__: eager's result depends on torch's NumPy protocol methods.
            unsupported(f"np.{qualname} called with a torch.Tensor (NumPy runs it through Tensor.__array__)")
        if "out" in kwargs:
            return _call_with_out(tx, self, qualname, args, kwargs)
        counterpart = numpy_calls.tnp_counterpart(fn)
        if counterpart is None:
            unsupported(f"np.{qualname} has no torch._numpy counterpart")
        target = numpy_calls.numpy_function(counterpart, qualname)
        return _call(tx, target, args, kwargs, name in _ARRAY_KEEPING_FUNCTIONS, fn, f"np.{qualname}")

    def getattr(self, tx: Tracer, name: str) -> VT:
        source = Attr(self.source, name) if self.source is not None else None
        if not hasattr(self.value, name):
            attribute_missing(tx, self.source, name, f"{self.value!r} has no attribute {name!r}")
        return tx.wrap(getattr(self.value, name), source)

    def reconstruct(self, cg: CodeGen) -> None:
        self.reconstruct_object(cg, self.value)

    def __repr__(self) -> str:
        return f"NumpyFunctionVar({getattr(self.value, '__name__', self.value)})"


class NumpyTypeVar(ClassVar):
    """A NumPy scalar type (``np.float32``): a dtype argument, or called to make a scalar or cast an array."""

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if len(args) == 1 and not kwargs and isinstance(args[0], NdarrayVar):
            cast = NdarrayMethodVar(args[0], "astype").call(tx, [self], {})
            assert isinstance(cast, NdarrayVar)
            return NdarrayVar(cast.tensor, scalar=True)  # a 0-d array becomes a scalar of the type
        if all(a.is_const() and not isinstance(a.const(), np.ndarray) for a in [*args, *kwargs.values()]):
            return ConstVar(self.value(*[a.const() for a in args], **{k: v.const() for k, v in kwargs.items()}))
        unsupported(f"calling np.{self.value.__name__} on {args}")


def _holds_tensor(vt: VT) -> bool:
    from dynajit.capture._symbolic.variables.containers import ListVar, TupleVar

    if isinstance(vt, (TupleVar, ListVar)):
        return any(_holds_tensor(item) for item in vt.items)
    return isinstance(vt, TensorVar)


def _call_with_out(tx: Tracer, fn: NumpyFunctionVar, qualname: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``np.<ufunc>(..., out=array)``: the result computed, then written into ``out`` (returned, as NumPy does)."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    if isinstance(out, NdarrayVar) and not isinstance(fn.value, np.ufunc):
        unsupported(f"np.{qualname}(out=...) is only traced for ufuncs")
    if not isinstance(out, NdarrayVar) or out.scalar:
        unsupported(f"np.{qualname}(out=...) with an out that is not a traced ndarray")
    result = fn.call(tx, args, kwargs)
    if not isinstance(result, NdarrayVar):
        unsupported(f"np.{qualname}(out=...) whose result is not one array")
    if tuple(result.example.shape) != tuple(out.example.shape):
        unsupported(f"np.{qualname}(out=...) broadcasting its result into out")
    result_dtype, out_dtype = numpy_dtype(result.example.dtype), numpy_dtype(out.example.dtype)
    if not np.can_cast(result_dtype, out_dtype, casting="same_kind"):
        raises_in_python(f"np.{qualname}: cannot cast the {result_dtype} result to an out of dtype {out_dtype}")
    _write_into(tx, out, result)
    return out


def _write_into(tx: Tracer, target: NdarrayVar, value: VT) -> None:
    """``target[...] = value`` in the graph; ``target`` stands for the written tensor from here on."""
    written = _record(tx, numpy_calls.numpy_operator(operator.setitem), [target, ConstVar(Ellipsis), value], {})
    assert isinstance(written, TensorVar)
    target.tensor = written


def _numpy_const(value: Any) -> Any:
    """A constant argument as torch._numpy accepts it (NumPy dtypes and scalar types become dtype names)."""
    if isinstance(value, tuple):
        return tuple(_numpy_const(v) for v in value)
    if isinstance(value, list):
        return [_numpy_const(v) for v in value]
    return numpy_calls.as_tnp_dtype(value)


def _proxy(tx: Tracer, vt: VT) -> Any:
    from dynajit.capture._symbolic.variables.containers import ListVar, TupleVar

    if isinstance(vt, NdarrayVar):
        return vt.tensor.node
    if isinstance(vt, (TupleVar, ListVar)) and any(isinstance(i, NdarrayVar) for i in vt.items):
        return vt.kind(_proxy(tx, i) for i in vt.items)
    if isinstance(vt, (TupleVar, ListVar, TensorVar)) or not vt.is_const():
        return tx.output.to_proxy(vt)
    if isinstance(vt.const(), np.generic):
        # A NumPy scalar keeps its dtype in NumPy's promotion (a Python number does not): a typed 0-d tensor.
        return _scalar_tensor(tx, vt.const()).node
    value = _numpy_const(vt.const())
    if isinstance(value, (np.ndarray, np.dtype)):
        unsupported(f"passing {value!r} to a NumPy call")
    return tx.output.to_proxy(ConstVar(value))


def _scalar_tensor(tx: Tracer, value: np.generic) -> TensorVar:
    if value.dtype not in numpy_calls.NUMPY_DTYPES:
        unsupported(f"a NumPy scalar of type {type(value).__name__}")
    dtype = numpy_calls.NUMPY_DTYPES[value.dtype]
    made = tx.output.call_function(torch.scalar_tensor, [ConstVar(value.item())], {"dtype": ConstVar(dtype)})
    assert isinstance(made, TensorVar)
    return made


def _record(tx: Tracer, target: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
    proxies = tuple(_proxy(tx, a) for a in args)
    kw = {k: _proxy(tx, v) for k, v in kwargs.items()}
    return tx.output.record_node(target, proxies, kw)


def _call(
    tx: Tracer,
    target: Any,
    args: list[VT],
    kwargs: dict[str, VT],
    keeps_array: bool,
    reference: Any,
    what: str,
    index: bool = False,
) -> VT:
    """Record ``target`` on the arguments; its tensors come back as the ndarrays or scalars eager NumPy gives.

    ``reference`` is the NumPy callable itself, run on stand-ins (``numpy_oracle``) to learn the type, dtype
    and shape of eager's result; ``keeps_array`` says whether a 0-d result is an array when that is unknown.
    """
    try:
        expected = numpy_oracle.reference_result(reference, args, kwargs, index=index)
    except numpy_oracle.Refused as refusal:
        raises_in_python(f"{what} raises in NumPy for these dtypes and shapes ({refusal})")
    except numpy_oracle.Unchecked as unchecked:
        if what.rpartition(".")[2] in numpy_oracle.KNOWN_DIVERGENT:
            unsupported(f"{what}: torch._numpy's result cannot be checked against NumPy's ({unchecked})")
        return _as_numpy(_record(tx, target, args, kwargs), scalar=not keeps_array)
    return _conform(tx, _record(tx, target, args, kwargs), expected, what)


def _conform(tx: Tracer, vt: VT, expected: Any, what: str) -> VT:
    """``vt`` (a traced result) as ``expected`` (NumPy's result on stand-ins): the same kind, dtype and shape."""
    from dynajit.capture._symbolic.variables.containers import ListVar, NamedTupleVar, TupleVar

    def differs(got: Any, want: Any) -> NoReturn:
        unsupported(f"{what}: torch._numpy gives {got} where NumPy gives {want}")

    if isinstance(expected, (np.ndarray, np.generic)):
        if not isinstance(vt, TensorVar):
            differs(vt, type(expected).__name__)
        shape = tuple(numpy_oracle.hint(s) for s in vt.example.shape)
        if shape != expected.shape:
            differs(f"shape {shape}", f"shape {expected.shape}")
        array = NdarrayVar(vt, scalar=isinstance(expected, np.generic))
        made, wanted = numpy_dtype(vt.example.dtype), expected.dtype
        if made == wanted:
            return array
        if not _holds(made, wanted):
            differs(f"dtype {made}", f"dtype {wanted}")
        cast = _record(tx, numpy_calls.numpy_method("astype"), [array, ConstVar(wanted.name)], {})
        assert isinstance(cast, TensorVar)
        return NdarrayVar(cast, scalar=array.scalar)
    if isinstance(expected, (tuple, list)):
        if not isinstance(vt, (TupleVar, ListVar)) or len(vt.items) != len(expected):
            differs(vt, f"a {type(expected).__name__} of {len(expected)}")
        items = [_conform(tx, item, want, what) for item, want in zip(vt.items, expected)]
        if type(expected) in (tuple, list):
            return type(vt)(items)
        return NamedTupleVar(items, type(expected))
    if vt.is_const() and type(vt.const()) is type(expected) and vt.const() == expected:
        return vt
    differs(vt, repr(expected))


def _holds(made: np.dtype, wanted: np.dtype) -> bool:
    """True when ``made`` holds every ``wanted`` value exactly: the graph's result can be cast down to it."""
    if wanted.kind == "b":
        return made.kind in "biu"
    if made.kind == wanted.kind:
        return made.itemsize >= wanted.itemsize
    return made.kind in "iu" and wanted.kind in "iu" and np.can_cast(wanted, made, "safe")


def _reader(name: str) -> Any:
    return lambda array: getattr(array, name)


def _method_caller(name: str) -> Any:
    return lambda array, *args, **kwargs: getattr(array, name)(*args, **kwargs)


def _as_numpy(vt: VT, scalar: bool) -> VT:
    from dynajit.capture._symbolic.variables.containers import ListVar, TupleVar

    if isinstance(vt, TensorVar):
        return NdarrayVar(vt, scalar=scalar)
    if isinstance(vt, (TupleVar, ListVar)):
        return type(vt)([_as_numpy(item, scalar) for item in vt.items])
    return vt


def ndarray_operator(tx: Tracer, op: Any, args: list[VT]) -> VT:
    """An operator with an ndarray operand: NumPy's promotion in a node; in-place ones write into the array."""
    if any(isinstance(a, TensorVar) for a in args):
        unsupported(f"operator {getattr(op, '__name__', op)} mixing a torch.Tensor and an ndarray")
    if op in (operator.eq, operator.ne) and not all(isinstance(a, NdarrayVar) or _is_number(a) for a in args):
        unsupported(f"comparing an ndarray with {next(a for a in args if not isinstance(a, NdarrayVar))}")
    target = numpy_calls.numpy_operator(op)
    if numpy_calls.is_inplace_operator(op) and isinstance(args[0], NdarrayVar):
        array = args[0]
        if array.scalar:  # a NumPy scalar is immutable: Python rebinds the name to a new scalar
            from dynajit.capture._symbolic.output import OUT_OF_PLACE

            plain = OUT_OF_PLACE[op]
            return _call(tx, numpy_calls.numpy_operator(plain), args, {}, False, plain, f"operator {plain.__name__}")
        written = _record(tx, target, args, {})
        if not isinstance(written, TensorVar) or written.example.dtype != array.example.dtype:
            unsupported(f"operator {op.__name__} changing the dtype of an ndarray")
        array.tensor = written
        return array
    return _call(tx, target, args, {}, False, op, f"operator {op.__name__}")


def _is_number(vt: VT) -> bool:
    return vt.is_const() and type(vt.const()) in (int, float, bool, complex)


def ndarray_getitem(tx: Tracer, array: NdarrayVar, key: VT) -> VT:
    """``array[key]``: a 0-d result is a NumPy scalar unless the key holds an Ellipsis (or a None)."""
    if _holds_tensor(key):
        unsupported("indexing an ndarray with a torch.Tensor")
    keeps = key.is_const() and _has_ellipsis(key.const())
    target = numpy_calls.numpy_operator(operator.getitem)
    return _call(tx, target, [array, key], {}, keeps, operator.getitem, "ndarray indexing", index=True)


def _has_ellipsis(key: Any) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return any(part is Ellipsis or part is None for part in parts)


def ndarray_setitem(tx: Tracer, array: VT, key: VT, value: VT) -> None:
    """``array[key] = value``, written into the array's tensor in the graph."""
    if not isinstance(array, NdarrayVar) or array.scalar:
        unsupported(f"item assignment on {array}")
    if isinstance(value, TensorVar):
        unsupported("assigning a torch.Tensor into an ndarray")
    written = _record(tx, numpy_calls.numpy_operator(operator.setitem), [array, key, value], {})
    assert isinstance(written, TensorVar)
    array.tensor = written


def tensor_numpy(tx: Tracer, tensor: TensorVar, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``tensor.numpy()``: the same data as an ndarray (eager shares memory, and so does the rebuilt array)."""
    force = bool(kwargs["force"].const()) if "force" in kwargs else bool(args and args[0].const())
    example = tensor.metadata(tx)
    numpy_dtype(example.dtype)
    if not force:
        if example.requires_grad:
            raises_in_python("Tensor.numpy() on a tensor that requires grad (RuntimeError)")
        if example.device.type != "cpu":
            raises_in_python(f"Tensor.numpy() on a {example.device.type} tensor (TypeError)")
        return NdarrayVar(tensor)
    detached = tx.output.call_method("detach", [tensor], {})
    if example.device.type != "cpu":
        detached = tx.output.call_method("cpu", [detached], {})
    assert isinstance(detached, TensorVar)
    return NdarrayVar(detached)


def torch_call_on_ndarrays(tx: Tracer, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT | None:
    """``torch.from_numpy(array)`` and ``torch.as_tensor`` / ``torch.tensor`` of an ndarray; None for other calls."""
    if not any(isinstance(a, NdarrayVar) for a in [*args, *kwargs.values()]):
        return None
    if fn is torch.from_numpy and len(args) == 1 and not kwargs and isinstance(args[0], NdarrayVar):
        if args[0].scalar:
            raises_in_python("torch.from_numpy of a NumPy scalar (TypeError)")
        return args[0].tensor  # shares memory with the array, as eager's does
    if fn in (torch.as_tensor, torch.asarray, torch.tensor) and args and isinstance(args[0], NdarrayVar):
        if set(kwargs) - {"dtype", "device"}:
            unsupported(f"torch.{fn.__name__} of an ndarray with {sorted(kwargs)}")
        source = args[0].tensor
        result = tx.output.call_method("to", [source], kwargs) if kwargs else source
        if fn is torch.tensor and result is source:
            result = tx.output.call_method("clone", [source], {})
        return result
    unsupported(f"torch.{getattr(fn, '__name__', fn)} called with an ndarray")


def wrap_numpy_value(output: OutputGraph, value: Any, path: Path | None) -> VT | None:
    """The tracker of a NumPy value read from the frame (an ndarray, a NumPy function), or None for others."""
    if isinstance(value, np.ndarray):
        return _wrap_ndarray(output, value, path)
    if isinstance(value, np.generic):
        if path is None or type(value) not in {d.type for d in numpy_calls.NUMPY_DTYPES}:
            unsupported(f"a NumPy scalar of type {type(value).__name__}")
        output.guard("type_match", path, value)
        output.guard("equals_match", path, value)
        return ConstVar(value, path)
    if isinstance(value, type) and issubclass(value, np.generic):
        output.guard("id_match", path, value)
        return NumpyTypeVar(value, path)
    if numpy_calls.is_numpy_callable(value):
        output.guard("id_match", path, value)
        return NumpyFunctionVar(value, path)
    return None


def _wrap_ndarray(output: OutputGraph, array: np.ndarray, path: Path | None) -> VT:
    if type(array) is not np.ndarray:
        unsupported(f"an ndarray subclass ({type(array).__name__})")
    if path is None:
        unsupported("an ndarray that cannot be reached from the frame")
    if output.ctx.export:
        unsupported("ndarray inputs are not exported")
    known = output.wrapped.get(id(array))
    if known is not None:
        if known[1].source is not None and known[1].source != path:
            output.aliases.append((known[1].source, path))
        return known[1]
    if array.dtype not in numpy_calls.NUMPY_DTYPES or not array.dtype.isnative:
        unsupported(f"an ndarray of dtype {array.dtype} (torch has no such dtype)")
    if not array.flags.writeable:
        unsupported("a read-only ndarray (torch.from_numpy cannot share its memory)")
    if any(s < 0 or s % array.itemsize for s in array.strides):
        unsupported(f"an ndarray with strides {array.strides} (torch.from_numpy cannot view them)")
    output.guard("type_match", path, array)
    output.guard("equals_match", Attr(path, "dtype"), array.dtype)
    output.guard("equals_match", Attr(path, "shape"), array.shape)
    output.guard("equals_match", Attr(path, "strides"), array.strides)
    output.guard("constant_match", Attr(Attr(path, "flags"), "writeable"), True)
    tensor = torch.from_numpy(array)
    tracker = output.input_tensor(tensor, FromNumpy(path), static=True)
    made = NdarrayVar(tracker, source=path)
    output.wrapped[id(array)] = (array, made)
    return made


class FromNumpy(Path):
    """The graph input made from an ndarray argument: ``torch.from_numpy(<the array>)``.

    Not itself guarded (the array's own guards are); the transformed code computes it before the graph call.
    """

    def __init__(self, array: Path) -> None:
        self.array = array

    def to_source(self) -> Any:
        return None

    def emit(self, cg: CodeGen) -> None:
        cg.push_callable_global(cg.stash(torch.from_numpy))
        self.array.emit(cg)
        cg.call(1)

    def name(self) -> str:
        return f"torch.from_numpy({self.array.name()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FromNumpy) and other.array == self.array

    def __hash__(self) -> int:
        return hash(("from_numpy", self.array))
