"""Tensors (an FX node plus its fake example value), their methods, and torch functions that become graph nodes."""

from __future__ import annotations

import functools
import inspect
import operator
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.marks import quiet_attr
from dynajit.capture._symbolic.process_state import (
    PROCESS_STATE_WRAPPERS,
    call_process_state_function,
    is_process_state_call,
)
from dynajit.capture._symbolic.variables.base import (
    VT,
    AttributeMissing,
    HeldVar,
    attribute_missing,
    raises_in_python,
    unsupported,
)
from dynajit.capture._symbolic.variables.constant import ConstVar, holds_symbols

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["TensorMethodVar", "TensorVar", "TorchFunctionVar", "is_graphable_torch_function"]

# Tensor attributes that are static facts of the example value (guarded by TENSOR_MATCH).
_CONSTANT_ATTRS = frozenset(
    {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse", "layout", "is_quantized", "is_meta"}
)
# Properties that say how the real tensor was made (TENSOR_MATCH does not cover them): read and guarded.
_HISTORY_ATTRS = frozenset({"is_leaf", "retains_grad", "output_nr"})
# Methods answering a fact of the tensor object that neither its fake nor TENSOR_MATCH holds faithfully: read from
# the real tensor and guarded by value (see ``TensorVar.object_fact``).
_OBJECT_FACTS = frozenset({"storage_offset", "_is_view", "is_shared", "is_pinned"})
# Tensor attributes computed by the graph.
_GRAPH_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag"})

# Methods answered from the example value, without a node.
_CONSTANT_METHODS: dict[str, Any] = {
    "size": lambda t, *a: t.size(*a),
    "dim": lambda t: t.dim(),
    "ndimension": lambda t: t.dim(),
    "numel": lambda t: t.numel(),
    "nelement": lambda t: t.numel(),
    "is_floating_point": lambda t: t.is_floating_point(),
    "is_complex": lambda t: t.is_complex(),
    "is_contiguous": lambda t, **kw: t.is_contiguous(**kw),
    "element_size": lambda t: t.element_size(),
    "get_device": lambda t: t.get_device(),
    "stride": lambda t, *a: t.stride(*a),
}

# Methods that need the tensor's data (or leave the graph's world): a graph break.
_BREAKING_METHODS = {
    "item": "Tensor.item() reads the tensor's data",
    "tolist": "Tensor.tolist() reads the tensor's data",
    "__bool__": "the truth value of a tensor depends on its data",
    "data_ptr": "Tensor.data_ptr() depends on the real storage",
    "is_set_to": "Tensor.is_set_to() compares real storages, which fake tensors do not share",
    "backward": "Tensor.backward() runs autograd",
    "register_hook": "tensor hooks are not traced",
    "register_post_accumulate_grad_hook": "tensor hooks are not traced",
    "retain_grad": "Tensor.retain_grad() changes what autograd keeps of the tensor",
    "__index__": "using a tensor as an index reads its data",
    "__int__": "int(tensor) reads the tensor's data",
    "__float__": "float(tensor) reads the tensor's data",
}

# The same methods called through the class (``torch.Tensor.retain_grad(t)``).
_BREAKING_TENSOR_FUNCTIONS = {getattr(torch.Tensor, name): reason for name, reason in _BREAKING_METHODS.items()}

# torch functions that must not become graph nodes.
_NOT_IN_GRAPH = {
    torch.manual_seed: "torch.manual_seed changes global state",
    # A backend traces the graph once: the state read would be the trace's, and a state set inside the graph
    # would not reach the random ops after it (the default generator is a global, not a graph input).
    torch.get_rng_state: "torch.get_rng_state reads the global generator's state",
    torch.set_rng_state: "torch.set_rng_state changes global state",
    torch.save: "torch.save does I/O",
    torch.load: "torch.load does I/O",
    # Run on fake tensors, the switch sees tracing's own saved-tensor hook and raises, where eager does not.
    torch._C._autograd._saved_tensors_hooks_disable: "disabling saved-tensor hooks (torch.func's grad and vjp do)",
}

# torch functions answered at trace time.
_CONSTANT_TORCH_FUNCTIONS = {
    torch.is_grad_enabled,
    torch.is_tensor,
    torch.is_floating_point,
    torch.is_complex,
    torch.get_default_dtype,
    torch.numel,
    # Autocast's state while tracing is the state the graph sets at that point (its blocks are entered for real).
    torch.is_autocast_enabled,
    torch.get_autocast_dtype,
    torch.is_autocast_cache_enabled,
}


# Python (not C) functions of these modules compute on tensors and go in the graph as calls.
_PYTHON_GRAPH_MODULES = frozenset({"torch", "torch.functional", "torch.nn.functional", "torch.random", "torch.fft"})


def is_graphable_torch_function(fn: Any) -> bool:
    """True for torch callables that compute on tensors: torch.*, torch.nn.functional.*, Tensor methods.

    Python functions elsewhere in torch (module methods such as ``Conv2d._conv_forward``) are not: they
    are inlined like user code.
    """
    if isinstance(fn, type) or not callable(fn):
        return False
    if fn is torch.cond:  # answered by the interpreter (torch_cond.py), never inlined
        return True
    module = quiet_attr(fn, "__module__") or ""
    qualname = quiet_attr(fn, "__qualname__", "") or ""
    if isinstance(fn, types.FunctionType):
        if fn in PROCESS_STATE_WRAPPERS:
            return False
        if module == "torch._tensor":
            return qualname.startswith("Tensor.")
        return module in _PYTHON_GRAPH_MODULES and "." not in qualname
    if module.startswith("torch") and not module.startswith(("torch.fx", "torch._dynamo", "torch.utils")):
        return True
    owner = quiet_attr(fn, "__self__")
    return (
        qualname.startswith(("TensorBase.", "Tensor."))
        or (isinstance(owner, types.ModuleType) and owner.__name__.startswith("torch"))
        or owner is torch._C._VariableFunctions
    )


class TensorVar(VT):
    """A tensor in the graph: its FX node and the fake tensor that is its example value."""

    module_tensor: torch.Tensor | None = None  # the real tensor, for a module's parameter or buffer

    def __init__(self, node: torch.fx.Node, example: torch.Tensor, source: Any = None, cls: type | None = None) -> None:
        self.node = node
        self._example = example
        self.source = source
        # The class of the real tensor it stands for (an input's, guarded by TENSOR_MATCH; a parameter's, fixed by
        # its identity guard): a subclass the trace follows, a Parameter subclass above all, is not its fake's.
        self.cls = cls

    @property
    def example(self) -> torch.Tensor:
        """The fake tensor of the value. Once ``tensor.data = ...`` gave the tensor another storage in this
        trace, it describes the old one: any later read of the tensor is a graph break, read by Python."""
        if _DATA_REPLACED in self.node.meta:
            unsupported(f"a tensor is used after its Tensor.data was assigned in the same graph ({self.node.name})")
        return self._example

    @example.setter
    def example(self, value: torch.Tensor) -> None:
        self._example = value

    def python_type(self) -> type:
        if self.cls is not None:
            return self.cls
        return torch.nn.Parameter if isinstance(self._example, torch.nn.Parameter) else torch.Tensor

    def truth(self, tx: Tracer) -> bool:
        unsupported("the truth value of a tensor depends on its data (data-dependent control flow)")

    def unpack(self, tx: Tracer) -> list[VT]:
        if self.example.dim() == 0:
            unsupported("iteration over a 0-d tensor")
        return [
            tx.output.call_function(operator.getitem, [self, ConstVar(i)], {}) for i in range(self.example.shape[0])
        ]

    def metadata(self, tx: Tracer) -> torch.Tensor:
        """The example value, for Python code reading the tensor's metadata (shape, dtype, requires_grad, ...).

        A graph input's metadata is guarded by its TENSOR_MATCH already; a module's parameter or buffer is
        guarded by identity only, and its metadata can change in place (``module.double()``,
        ``requires_grad_(False)``, ``.data = ...``), so reading it guards it too.
        """
        if self.module_tensor is not None and self.source is not None:
            tx.output.guard("tensor_match", self.source, self.module_tensor, ())
        return self.example

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name == "shape" and holds_symbols(self.example.shape):
            return self.symbolic_sizes(tx, [], {})
        if name in _CONSTANT_ATTRS:
            return ConstVar(getattr(self.metadata(tx), name))
        if name in _GRAPH_ATTRS:
            return tx.output.call_function(getattr, [self, ConstVar(name)], {})
        if name == "data":
            # A detached alias of the same storage, whose in-place changes autograd does not see (eager's .data).
            return tx.output.call_function(_get_data_attr, [self], {})
        if name == "grad":
            return self.grad_attr(tx)
        if name in ("_version", "grad_fn", "_base", "untyped_storage"):
            unsupported(f"Tensor.{name} is not traced")
        if name == "__class__":  # the class TENSOR_MATCH checks: what type(x) answers
            from dynajit.capture._symbolic.builtins_table import BUILTINS

            return BUILTINS[type](tx, [self], {})
        if name in _HISTORY_ATTRS:
            return self.history_attr(tx, name)
        static = inspect.getattr_static(torch.Tensor, name, None)
        if static is None:
            return self.instance_attr(tx, name)
        if inspect.isroutine(static):
            return TensorMethodVar(self, name)
        # A property (is_nested, is_quantized, ...): a fact of the example value when it is a plain constant.
        value = getattr(self.metadata(tx), name)
        if isinstance(value, (bool, int, float, str, type(None), torch.dtype, torch.device, torch.layout)):
            return ConstVar(value)
        if isinstance(value, torch.Tensor):
            return tx.output.call_function(getattr, [self, ConstVar(name)], {})
        unsupported(f"Tensor.{name} of type {type(value).__name__} is not traced")

    def real(self, tx: Tracer) -> torch.Tensor | None:
        """The real tensor of the frame behind this one (a graph input or a module tensor), else None."""
        if self.module_tensor is not None:
            return self.module_tensor
        # Every tracker of a graph input (one per path reaching it) shares the input's node.
        return next((value for _, value, var in tx.output.inputs if var.node is self.node), None)

    def grad_attr(self, tx: Tracer) -> VT:
        """``tensor.grad``: the value this trace wrote, else the real tensor's, read by its path and guarded.

        A tensor the graph computes was made by this call and has no gradient yet.
        """
        from dynajit.capture._symbolic.paths import Attr

        written = pending_attrs(tx).get((self.node, "grad"))
        if written is not None:
            return written.value
        real = self.real(tx)
        if real is None:
            if self.source is not None:
                unsupported("Tensor.grad of a tensor whose object is not known while tracing")
            return ConstVar(None)
        if self.source is None:
            unsupported("Tensor.grad of a tensor that cannot be reached from the frame")
        return tx.wrap(real.grad, Attr(self.source, "grad"))

    def history_attr(self, tx: Tracer, name: str) -> VT:
        """``is_leaf`` and the like: how the real tensor was made, which TENSOR_MATCH does not cover.

        Read from the real tensor and guarded by value; a tensor the graph computes answers from its
        example value (made by the same operations).
        """
        from dynajit.capture._symbolic.paths import Attr

        real = self.real(tx)
        if real is None:
            if self.source is not None:
                unsupported(f"Tensor.{name} of a tensor whose object is not known while tracing")
            return ConstVar(getattr(self.example, name))
        if self.source is None:
            unsupported(f"Tensor.{name} of a tensor that cannot be reached from the frame")
        return tx.wrap(getattr(real, name), Attr(self.source, name))

    def object_fact(self, tx: Tracer, name: str) -> VT:
        """``x.storage_offset()``, ``x._is_view()``, ``x.is_shared()`` or ``x.is_pinned()``: where the tensor
        object lies in its storage, whether autograd sees it as a view, what memory holds it. A fake with symbolic
        sizes is a dense tensor of its own (offset 0, no view) and TENSOR_MATCH checks neither, so the real tensor
        answers and its answer is guarded. A tensor the graph computes inherits them from its inputs, unguarded:
        there it is a graph break, after which that tensor is an input of the next graph."""
        real = self.real(tx)
        if real is None or self.source is None:
            unsupported(f"Tensor.{name}() of a tensor the graph computes depends on how its inputs lie in memory")
        if tx.output.changed_layout_of(real):
            unsupported(f"Tensor.{name}() of {self.source.name()}, whose layout the graph changed in place")
        value = getattr(real, name)()
        tx.output.guard("tensor_fact", self.source, name, value)
        return ConstVar(value)

    def instance_attr(self, tx: Tracer, name: str) -> VT:
        """A Python attribute of the tensor object itself (``x.tag = ...``), which lives in its ``__dict__``.

        Read from the real tensor of the frame, guarded by its value, or its absence guarded by HASATTR. A
        tensor the graph computes has none: nothing can set one while tracing.
        """
        from dynajit.capture._symbolic.paths import Attr

        written = pending_attrs(tx).get((self.node, name))
        if written is not None:
            return written.value
        real = self.real(tx)
        if real is None:
            if self.source is not None:
                unsupported(f"attribute {name!r} of a tensor whose object is not known while tracing")
            raise AttributeMissing(f"tensor has no attribute {name!r} (AttributeError)")
        if name in real.__dict__:
            if self.source is None:
                unsupported(f"attribute {name!r} of a tensor that cannot be reached from the frame")
            return tx.wrap(real.__dict__[name], Attr(self.source, name))
        if hasattr(real, name):  # a subclass's own attribute
            unsupported(f"attribute {name!r} of a {type(real).__name__} is not traced")
        attribute_missing(tx, self.source, name, f"tensor has no attribute {name!r}")

    def setattr(self, tx: Tracer, name: str, value: VT) -> None:
        """``tensor.grad = ...``, ``tensor.data = ...`` and Python attributes of the tensor object, replayed on
        it after the graph.

        ``tensor.data = other`` gives the tensor ``other``'s storage, sizes and dtype, keeping its autograd
        identity; the graph computes ``other``, the assignment runs on the real objects after it, and a later
        use of the tensor in the same trace is a graph break (see :attr:`example`).
        """
        if name == "data":
            _check_data_value(tx, self, value)
            self.node.meta[_DATA_REPLACED] = True
        elif name == "grad":
            _check_grad_value(tx, self, value)
        elif inspect.getattr_static(torch.Tensor, name, None) is not None or name.startswith("__"):
            unsupported(f"setting Tensor.{name}")
        key = (self.node, name)
        writes = pending_attrs(tx)
        if key in writes:
            writes[key].value = value
            return
        writes[key] = write = _AttrWrite(self, name, value)
        tx.output.side_effects.record_custom(("tensor_attr", self.node, name), write)

    def symbolic_sizes(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        """``size()`` / ``size(d)`` of a tensor with symbolic sizes: graph nodes, reachable again from an input."""
        from dynajit.capture._symbolic.variables.containers import SizeVar, TupleVar
        from dynajit.capture._symbolic.variables.symbolic import SymIntVar

        result = tx.output.call_method("size", [self, *args], kwargs)
        if type(result) is TupleVar:
            result = SizeVar(result.items)
        if self.source is None:
            return result
        if isinstance(result, SymIntVar):
            dim = (args[0] if args else kwargs["dim"]).const()
            result.origin = (self.source, dim % self.example.dim())
        elif isinstance(result, TupleVar):
            for dim, item in enumerate(result.items):
                if isinstance(item, SymIntVar):
                    item.origin = (self.source, dim)
        return result

    def call_method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return self.getattr(tx, name).call(tx, args, kwargs)

    def reconstruct(self, cg: CodeGen) -> None:
        cg.load_tensor(self)

    def __repr__(self) -> str:
        return f"TensorVar({self.node.name})"


def _sizes_spread(args: list[VT]) -> list[VT]:
    """``x.new(size)``'s arguments as graph ops can take them: the legacy constructor reads a ``torch.Size`` as a
    shape and a tuple as data, and a graph op receives a Size as a tuple, so a Size is spread into its sizes."""
    from dynajit.capture._symbolic.variables.containers import SizeVar

    if len(args) == 1 and isinstance(args[0], SizeVar):
        return list(args[0].items)
    if len(args) == 1 and args[0].is_const() and type(args[0].const()) is torch.Size:
        return [ConstVar(size) for size in args[0].const()]
    return args


class TensorMethodVar(VT):
    """``tensor.method`` before the call."""

    def __init__(self, tensor: TensorVar, name: str) -> None:
        self.tensor = tensor
        self.name = name

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if self.name in ("item", "tolist") and not args and not kwargs:
            from dynajit.capture._symbolic.data_dependent import read_item, read_tolist

            return (read_item if self.name == "item" else read_tolist)(tx, self.tensor)
        if self.name in _BREAKING_METHODS:
            unsupported(_BREAKING_METHODS[self.name])
        if self.name == "requires_grad_":
            return requires_grad_(tx, self.tensor, args, kwargs)
        if self.name in _OBJECT_FACTS and not args and not kwargs:
            return self.tensor.object_fact(tx, self.name)
        if self.name == "new":
            args = _sizes_spread(args)
        if self.name == "type" and not args and not kwargs:
            return ConstVar(self.tensor.metadata(tx).type())  # ("torch.HalfTensor": of the guarded dtype and device)
        if self.name == "detach_" and _detach_changes_nothing(tx, self.tensor, args, kwargs):
            return self.tensor
        if self.name == "numpy":
            from dynajit.capture._symbolic.variables.ndarrays import tensor_numpy

            return tensor_numpy(tx, self.tensor, args, kwargs)
        if self.name in _CONSTANT_METHODS:
            const_args = [a.const() for a in args]
            const_kwargs = {k: v.const() for k, v in kwargs.items()}
            try:
                value = _CONSTANT_METHODS[self.name](self.tensor.metadata(tx), *const_args, **const_kwargs)
            except (IndexError, TypeError, ValueError, RuntimeError) as err:
                # The tensor's rank and the arguments are guarded facts: eager raises the same on every call.
                raises_in_python(f"Tensor.{self.name}() raises {type(err).__name__}: {err}", err)
            if not holds_symbols(value):
                return ConstVar(value)
            if self.name == "size":
                return self.tensor.symbolic_sizes(tx, args, kwargs)
            return tx.output.call_method(self.name, [self.tensor, *args], kwargs)
        return tx.output.call_method(self.name, [self.tensor, *args], kwargs)

    def children(self) -> list[VT]:
        return [self.tensor]

    def reconstruct(self, cg: CodeGen) -> None:
        self.tensor.reconstruct(cg)
        cg.load_attr(self.name)

    def __repr__(self) -> str:
        return f"TensorMethodVar({self.tensor.node.name}.{self.name})"


class TorchFunctionVar(HeldVar):
    """A torch callable (torch.*, torch.nn.functional.*, torch.Tensor.*): calls become graph nodes."""

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.torch_checks import TORCH_CHECKS
        from dynajit.capture._symbolic.variables.contexts import CONTEXT_MANAGER_CALLS

        if self.value in TORCH_CHECKS:
            return TORCH_CHECKS[self.value](tx, args, kwargs)
        if self.value is torch.cond:
            from dynajit.capture._symbolic.torch_cond import call_cond

            return call_cond(tx, args, kwargs)
        if self.value in CONTEXT_MANAGER_CALLS:
            return CONTEXT_MANAGER_CALLS[self.value](tx, args, kwargs)
        if self.value in _NOT_IN_GRAPH:
            unsupported(_NOT_IN_GRAPH[self.value])
        if self.value is torch.Tensor.new and args:
            args = [args[0], *_sizes_spread(args[1:])]
        if self.value is torch.Tensor.requires_grad_ and args and isinstance(args[0], TensorVar):
            return requires_grad_(tx, args[0], args[1:], kwargs)
        if self.value in (torch.Tensor.detach_, torch.detach_) and args and isinstance(args[0], TensorVar):
            if _detach_changes_nothing(tx, args[0], args[1:], kwargs):
                return args[0]
        if self.value in _BREAKING_TENSOR_FUNCTIONS:
            unsupported(_BREAKING_TENSOR_FUNCTIONS[self.value])
        from dynajit.capture._symbolic.variables.ndarrays import torch_call_on_ndarrays

        on_arrays = torch_call_on_ndarrays(tx, self.value, args, kwargs)
        if on_arrays is not None:
            return on_arrays
        if self.value in _CONSTANT_TORCH_FUNCTIONS:
            if self.value is torch.get_autocast_dtype:
                _note_autocast_dtype_read(tx, args, kwargs)
            return _call_on_examples(tx, self.value, args, kwargs)
        if is_process_state_call(self.value, args, kwargs):
            return call_process_state_function(tx, self.value, args, kwargs)
        return tx.output.call_function(self.value, args, kwargs)

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.paths import Attr

        source = Attr(self.source, name) if self.source is not None else None
        try:
            value = getattr(self.value, name)
        except AttributeError:  # (`functools.wraps(torch.sin)` reads `__wrapped__`, which a builtin lacks)
            attribute_missing(tx, self.source, name, f"{self.value!r} has no attribute {name!r}")
        return tx.wrap(value, source)

    def reconstruct(self, cg: CodeGen) -> None:
        self.reconstruct_object(cg, self.value)

    def __repr__(self) -> str:
        return f"TorchFunctionVar({getattr(self.value, '__name__', self.value)})"


class _AttrWrite:
    """An attribute written on a tensor while tracing: set on the real tensor (a frame's or the graph's output)."""

    def __init__(self, tensor: TensorVar, name: str, value: VT) -> None:
        self.tensor = tensor
        self.name = name
        self.value = value

    def values(self) -> list[VT]:
        return [self.tensor, self.value]

    def prepare(self, cg: CodeGen, saved: Callable[[Callable[[], None]], str]) -> Callable[[], None]:
        from dynajit.capture._symbolic.side_effects import store_attr

        value = saved(functools.partial(self.value.reconstruct, cg))
        tensor = saved(functools.partial(self.tensor.reconstruct, cg))
        return functools.partial(store_attr, cg, value, tensor, self.name)


# The attribute writes of each trace, by (tensor node, name); one graph node stands for one tensor object.
_PENDING: weakref.WeakKeyDictionary[Any, dict[tuple[torch.fx.Node, str], _AttrWrite]] = weakref.WeakKeyDictionary()


def pending_attrs(tx: Tracer) -> dict[tuple[torch.fx.Node, str], _AttrWrite]:
    """The tensor attribute writes the trace of ``tx`` made so far (read back before the real tensor)."""
    return _PENDING.setdefault(tx.output, {})


_DATA_REPLACED = "dynajit_data_replaced"  # node meta: the tensor's .data was assigned in this trace


def end_data_replacements(output: Any) -> None:
    """The trace of ``output`` ends: its tensors whose ``.data`` it assigned may be described again (the
    assignments are replayed after the graph, before anything reads them)."""
    for node, name in _PENDING.get(output, {}):
        if name == "data":
            node.meta.pop(_DATA_REPLACED, None)


def requires_grad_(tx: Tracer, tensor: TensorVar, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``tensor.requires_grad_(flag)``: the tensor itself when it has the flag already (its example's flag is a
    guarded fact), else a graph break. A graph's backend sees only functional copies of its inputs, so a flag set
    inside it would reach neither the caller's tensor nor the autograd history of what the graph computes from it.
    """
    flag = args[0] if args else kwargs.get("requires_grad", ConstVar(True))
    if not (flag.is_const() and isinstance(flag.const(), bool)):
        unsupported("Tensor.requires_grad_ with a flag that is not a constant bool")
    if flag.const() != tensor.metadata(tx).requires_grad:
        unsupported("Tensor.requires_grad_ changes whether autograd records the tensor")
    return tensor


def _detach_changes_nothing(tx: Tracer, tensor: TensorVar, args: list[VT], kwargs: dict[str, VT]) -> bool:
    """Whether ``tensor.detach_()`` is the tensor itself and records nothing: under inference mode, where autograd's
    kernel (which refuses views) never runs. Of a tensor that requires grad it is a graph break: eager makes that
    very tensor (the caller's, for an input) a leaf that no longer requires grad, a change a graph's functional
    copy never makes. Of a graph input it is a graph break too: eager refuses a view, and an input's fake is one
    only while its sizes are static (a symbolic one is a tensor of its own). Elsewhere the graph records it, its
    fake refusing views as eager does."""
    if tensor.metadata(tx).requires_grad:
        unsupported("Tensor.detach_ makes a tensor that requires grad stop requiring it, in place")
    inference = torch.is_inference_mode_enabled()
    if not inference and tensor.node.op in ("placeholder", "get_attr"):
        unsupported("Tensor.detach_ of a graph input: eager refuses it for a view, which the input's fake may not be")
    return inference and not args and not kwargs


def _check_data_value(tx: Tracer, tensor: TensorVar, value: VT) -> None:
    """What eager checks of ``tensor.data = value``, and what the replay after the graph needs: a strided
    tensor (a floating one when the tensor requires grad), assigned to a tensor autograd cannot have saved."""
    if not isinstance(value, TensorVar):
        unsupported(f"assigning {value} to Tensor.data raises TypeError: Python raises it")
    mine, new = tensor.metadata(tx), value.metadata(tx)
    if mine.layout != torch.strided or new.layout != torch.strided:
        unsupported("Tensor.data of a tensor that is not strided")
    if mine.requires_grad and not (new.dtype.is_floating_point or new.dtype.is_complex):
        unsupported("assigning a tensor of integers to the Tensor.data of a tensor requiring grad raises")
    if mine.requires_grad and any(user.target is not _get_data_attr for user in tensor.node.users):
        # Eager's backward reads a saved leaf's new data after the assignment; the graph saved the old.
        unsupported("assigning Tensor.data of a tensor requiring grad that the graph has already used")


_get_data_attr = torch._C._autograd._get_data_attr  # type: ignore[attr-defined]


def _check_grad_value(tx: Tracer, tensor: TensorVar, value: VT) -> None:
    """Eager's checks on ``tensor.grad = value``: None, or a tensor of the same dtype, device and size."""
    if value.is_const() and value.const() is None:
        return
    if not isinstance(value, TensorVar):
        raises_in_python(f"assigning a {value} to Tensor.grad")
    mine, grad = tensor.metadata(tx), value.metadata(tx)
    if (grad.dtype, grad.device, grad.layout) != (mine.dtype, mine.device, mine.layout) or not _same_sizes(
        grad.shape, mine.shape
    ):
        raises_in_python("the assigned gradient does not match the tensor's dtype, device or size")


def _same_sizes(a: torch.Size, b: torch.Size) -> bool:
    if len(a) != len(b):
        return False
    # Symbolic sizes are compared as eager compares the real ones (the ShapeEnv guards the answer).
    return all(bool(x == y) for x, y in zip(a, b))


def _note_autocast_dtype_read(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> None:
    from dynajit.capture._symbolic.variables.contexts import read_default_autocast_dtype

    device = [*args, *kwargs.values()]
    if len(device) == 1 and device[0].is_const() and isinstance(device[0].const(), str):
        read_default_autocast_dtype(tx, device[0].const())


def _call_on_examples(tx: Tracer, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> ConstVar:
    def value(vt: VT) -> Any:
        return vt.metadata(tx) if isinstance(vt, TensorVar) else vt.const()

    return ConstVar(fn(*[value(a) for a in args], **{k: value(v) for k, v in kwargs.items()}))
