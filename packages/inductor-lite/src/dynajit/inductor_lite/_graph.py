"""Graph lowering: walk an aten-level FX graph and build buffers through the lowering table.

The result is a :class:`LoweredGraph`: graph inputs, buffers in a valid execution order
(kernels' ComputedBuffers and ExternBuffers called through aten), and the outputs as strided
views of buffers. Ops without a lowering become extern calls with a log line.

In a dynamic graph (example inputs with symbolic sizes) sizes are sympy expressions (``_sym``);
nodes computing sizes (``sym_size``, SymInt arithmetic) lower to those expressions, which the
wrapper evaluates from the bound shape symbols. A lowering that cannot handle a symbolic size
raises ``Unsupported`` and the node is called through aten instead.
"""

from __future__ import annotations

import itertools
import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph import input_view_chain
from dynajit.inductor_lite import (
    _batch_norm,  # noqa: F401  (registers eval-mode batch norm)
    _lower_indirect,  # noqa: F401  (registers the embedding and gather)
    _lower_masked,  # noqa: F401  (registers concatenation, padding and slice scatters)
    _lower_reduce,  # noqa: F401  (registers the reduction lowerings)
    _sym,
)
from dynajit.inductor_lite._eager_checks import checkable, flat, run_on_ones
from dynajit.inductor_lite._index import Index
from dynajit.inductor_lite._ir import (
    Buffer,
    ComputedBuffer,
    ConstantBuffer,
    Expr,
    ExternBuffer,
    InputBuffer,
    TensorValue,
    const,
    contiguous_strides,
    load,
    op,
)
from dynajit.inductor_lite._lowering import LOWERINGS
from dynajit.inductor_lite._strides import (
    alias_root,
    dense_strides,
    eager_layout,
    is_dynamic,
    overlapping,
    own_layout,
    refake,
    same_storage,
    same_strides,
    storage_of,
    whole_storage,
)

__all__ = [
    "ExternArg",
    "LoweredGraph",
    "OutputRef",
    "example_device",
    "lower_graph",
]

log = logging.getLogger("dynajit.inductor_lite")
aten = torch.ops.aten

# Heavy ops that are always aten calls by design (no log line): BLAS, convolution, indexing, RNG.
EXTERN_BY_DESIGN = {
    aten.mm.default,
    aten.bmm.default,
    aten.addmm.default,
    aten.baddbmm.default,
    aten.convolution.default,
    aten.convolution_backward.default,
    # The fused attention kernel beats its decomposition (matmul, softmax, matmul) on CPU.
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
    aten.embedding.default,
    aten.embedding_dense_backward.default,
    aten.index.Tensor,
    aten.gather.default,
    aten.scatter_add.default,
    aten.native_dropout.default,
    aten.rand.default,
    aten.randn.default,
}

# Aten kernels that read each tensor argument's last dim as contiguous whatever its strides say: eager's
# scaled_dot_product_attention takes the flash kernel only for such inputs, but a graph's layout pass
# (channels-last carried from a convolution into an attention) can hand it others. Such an argument is
# copied into a contiguous one for the call.
_LAST_DIM_CONTIGUOUS = frozenset({
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
})  # fmt: skip


def _last_dim_unit_stride(example: Any) -> bool:
    """True unless ``example`` is a tensor whose last dim is not known to have stride 1 (a symbolic one counts
    as not: code generation adds no guards, and a copy is always right)."""
    if not isinstance(example, torch.Tensor) or example.dim() == 0:
        return True
    stride = example.stride(-1)
    return isinstance(stride, int) and stride == 1


# Realize a lazy value whose expression grew past this many ops, so loaders stay small.
MAX_INLINE_COST = 48
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class ExternArg:
    """A tensor argument of an extern call: a buffer read through a layout."""

    buffer: str
    size: tuple[Any, ...]
    stride: tuple[Any, ...]
    offset: Any
    natural: bool  # the buffer's own layout: pass the buffer itself


@dataclass(frozen=True)
class OutputRef:
    """One graph output: a buffer view, a graph input, or a Python constant.

    ``replay`` is the chain of aten view ops (each with its arguments after the tensor) that makes the output
    from the real input ``arg`` views, when only those ops know its strides. ``own`` says eager's output is no
    view (``linear`` of a 3-d input, an ``_unsafe_view`` of its product): a view the wrapper makes of a buffer
    for it is returned detached, so ``detach_()`` and writes under autograd treat it as eager's.
    """

    arg: ExternArg | None
    constant: Any = None
    replay: tuple[tuple[Any, tuple[Any, ...], dict[str, Any]], ...] = ()
    own: bool = False


@dataclass
class LoweredGraph:
    inputs: list[InputBuffer | None]
    constants: dict[str, torch.Tensor]
    buffers: list[Buffer]
    outputs: list[OutputRef]
    device: torch.device
    all_buffers: dict[str, Buffer] = field(default_factory=dict)
    scalars: dict[int, Any] = field(default_factory=dict)  # position -> int / symbolic size of a scalar input


class GraphLowering:
    """Lowers one FX graph; lowering functions receive it as ``ctx``."""

    def __init__(
        self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], unrenderable: frozenset[str] = frozenset()
    ) -> None:
        self.gm = gm
        self.unrenderable = unrenderable  # aten op names the chosen code generator cannot emit
        self.example_inputs = list(example_inputs)
        self.buffers: dict[str, Buffer] = {}
        self.order: list[Buffer] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self.current_node: Any = None  # the FX node being lowered
        self.device = example_device(example_inputs)
        self.fallbacks: list[str] = []
        self.dynamic = any(is_dynamic(x) for x in self.example_inputs)
        self.scalars: dict[int, Any] = {}
        # Buffer name -> the storage its eager tensor has (inputs, aten results): an output may be a view
        # of a buffer only if eager's output shares that storage. A kernel's buffer is claimed by its first output.
        self.storages: dict[str, Any] = {}
        self.input_vals: dict[str, torch.Tensor] = {}  # each input buffer's placeholder value
        self.written_values: dict[torch.fx.Node, Buffer] = {}  # an input's new value -> that input's buffer

    # ------------------------------------------------------------ helpers for lowerings
    def current_val(self) -> Any:
        return self.current_node.meta["val"]

    def current_val_at(self, k: int) -> Any:
        val = self.current_val()
        return val[k] if isinstance(val, (tuple, list)) else val

    def _new_name(self) -> str:
        return f"buf{len(self.buffers)}"

    def _add(self, buf: Buffer) -> Buffer:
        self.buffers[buf.name] = buf
        self.order.append(buf)
        return buf

    def storage_value(
        self, buf: Buffer, stride: Sequence[Any] | None = None, offset: Any = 0, size: Sequence[Any] | None = None
    ) -> TensorValue:
        stride = tuple(buf.stride if stride is None else stride)
        size = tuple(buf.size if size is None else size)

        def loader(indices: Sequence[Index]) -> Expr:
            addr = Index.of(offset)
            for idx, st in zip(indices, stride):
                addr = addr + idx * st
            return load(buf.name, addr, buf.dtype)

        natural = stride == buf.stride and offset == 0 and size == buf.size
        return TensorValue(size, buf.dtype, loader, buf.device, buffer=buf if natural else None)

    def strided_view(self, value: TensorValue) -> tuple[Buffer, tuple[Any, ...], Any] | None:
        """(buffer, strides, offset) when every element of ``value`` is a plain strided load of one buffer."""
        if value.buffer is not None:
            return value.buffer, value.buffer.stride, 0
        variables = value.fresh_vars("v")
        expr = value.loader([Index.of(v) for v in variables])
        if expr.op != "load" or len(expr.args) > 2 or expr.args[1].has_divmod():
            return None
        name, index = expr.args
        strides = tuple(index.coefficient(v.name) if v.size != 1 else 0 for v in variables)
        return self.buffers[name], strides, index.const

    def realize(self, value: TensorValue, stride: Sequence[Any] | None = None) -> TensorValue:
        if value.buffer is not None and (stride is None or tuple(stride) == value.buffer.stride):
            return value
        stride = tuple(contiguous_strides(value.size) if stride is None else stride)
        buf = ComputedBuffer(self._new_name(), value.dtype, value.size, stride, value.device, fn=value.loader)
        self._add(buf)
        return self.storage_value(buf)

    def reduction(
        self,
        size: tuple[Any, ...],
        red_ranges: tuple[Any, ...],
        rtype: str,
        fn: Callable[..., Expr],
        dtype: torch.dtype,
    ) -> TensorValue:
        if _sym.prod(red_ranges) == 1:  # reducing one element: the element itself
            ones = [Index()] * len(red_ranges)
            if rtype in ("argmax", "argmin"):
                zero = const(0, torch.int64)
                return TensorValue(size, torch.int64, lambda idx: zero, self.device)
            return TensorValue(size, dtype, lambda idx: op("cast", dtype, fn(idx, ones)), self.device, cost=1)
        buf = ComputedBuffer(
            self._new_name(),
            dtype,
            size,
            contiguous_strides(size),
            self.device,
            fn=fn,
            reduction_ranges=red_ranges,
            reduction_type=rtype,
        )
        self._add(buf)
        return self.storage_value(buf)

    def cast_value(self, value: TensorValue, dtype: torch.dtype) -> TensorValue:
        if value.dtype == dtype:
            return value
        return TensorValue(value.size, dtype, lambda idx: op("cast", dtype, value.loader(idx)), value.device, cost=1)

    def extern_arg(self, value: TensorValue, example: Any = None) -> ExternArg:
        """``value`` as an aten call's argument: a view of a buffer when it is one, else a new buffer.

        With the FX argument's ``example`` value, a view laid out otherwise than the example is
        copied into the example's layout, and a value computed here is written in it: an aten op may
        rely on the layout its graph gave it (a fused RNN reads its input as contiguous whatever the
        strides say).
        """
        view = self.strided_view(value)
        if view is not None and isinstance(example, torch.Tensor):
            if not same_strides(view[1], _sym.strides_of(example), value.size):
                view = None
                value = self.realize(value, dense_strides(example))
        if view is None:
            # In eager's layout: the aten op then returns its result in the layout the graph expects (a
            # convolution follows its input's), not one a copy must turn into it.
            value = self.realize(value, dense_strides(example))
            assert value.buffer is not None
            view = (value.buffer, value.buffer.stride, 0)
        buf, stride, offset = view
        natural = stride == buf.stride and offset == 0 and value.size == buf.size
        return ExternArg(buf.name, value.size, stride, offset, natural)

    def fallback(self, reason: str = "") -> Any:
        """Call the current node's op through aten from the wrapper."""
        node = self.current_node
        if node.target not in EXTERN_BY_DESIGN or reason:
            log.info("inductor-lite: %s for %s; calling aten", reason or "no lowering", node.target)
            self.fallbacks.append(str(node.target))

        def convert(a: Any) -> Any:
            example = None
            if isinstance(a, torch.fx.Node):
                example = a.meta.get("val")
                a = self.env[a]
                if node.target in _LAST_DIM_CONTIGUOUS and not _last_dim_unit_stride(example):
                    example = example.contiguous()
            if isinstance(a, TensorValue):
                return self.extern_arg(a, example)
            if isinstance(a, (list, tuple)):
                return type(a)(convert(x) for x in a)
            return a

        args = tuple(convert(a) for a in node.args)
        kwargs = {k: convert(v) for k, v in node.kwargs.items()}
        reads = _arg_buffers((args, kwargs))
        val = node.meta.get("val")  # (none for an op returning nothing: a check, ``_assert_async``)
        if isinstance(val, torch.Tensor):
            buf = ExternBuffer(
                self._new_name(), val.dtype, _sym.shape_of(val), _sym.strides_of(val), val.device,
                target=node.target, args=args, kwargs=kwargs, reads=reads,
            )  # fmt: skip
            self._add(buf)
            self.storages[buf.name] = self._result_storage(val, (node.args, node.kwargs), (args, kwargs))
            return self.storage_value(buf)
        holder = ExternBuffer(
            self._new_name(), torch.float32, (), (), self.device, target=node.target, args=args, kwargs=kwargs,
            reads=reads,
        )  # fmt: skip
        self._add(holder)
        results: list[Any] = []
        for k, item in enumerate(val if isinstance(val, (list, tuple)) else [val]):
            if not isinstance(item, torch.Tensor):
                results.append(None)
                continue
            part = ExternBuffer(
                self._new_name(), item.dtype, _sym.shape_of(item), _sym.strides_of(item), item.device,
                target=None, args=(holder.name,), tuple_index=k, reads={holder.name},
            )  # fmt: skip
            self._add(part)
            self.storages[part.name] = self._result_storage(item, (node.args, node.kwargs), (args, kwargs))
            results.append(self.storage_value(part))
        return tuple(results)

    def _result_storage(self, val: Any, fx_args: Any, extern_args: Any) -> Any:
        """The eager storage an aten call's result is in here, or None when it views a copy of that storage.

        A view op called on a copy (an argument whose loads were not one strided view, written out for the
        call) returns a view of the copy, not of the memory eager's view shares with its base. An argument
        buffer found to hold the result's memory (an intermediate no other buffer claims) is recorded as
        its owner.
        """
        storage = storage_of(val)
        pairs = [(fx_args, extern_args)]
        while pairs and storage is not None:
            fx, ext = pairs.pop()
            if isinstance(fx, (list, tuple)) and isinstance(ext, (list, tuple)):
                pairs.extend(zip(fx, ext))
            elif isinstance(fx, dict) and isinstance(ext, dict):
                pairs.extend((fx[k], ext[k]) for k in fx)
            elif isinstance(ext, ExternArg) and same_storage(storage_of(getattr(fx, "meta", {}).get("val")), storage):
                owner = self.storages.get(ext.buffer)
                if owner is None and any(same_storage(other, storage) for other in self.storages.values()):
                    return None  # a copy of memory another buffer holds
                if owner is not None and owner != storage:
                    return None
                self.storages[ext.buffer] = storage  # the buffer holds that memory: later views of it share it
        return storage

    # ------------------------------------------------------------ the walk
    def run(self) -> LoweredGraph:
        inputs: list[InputBuffer | None] = []
        constants: dict[str, torch.Tensor] = {}
        outputs: list[OutputRef] = []
        position = 0
        relaid: set[torch.fx.Node] = set()  # nodes whose value was given eager's layout, and what depends on them
        for node in self.gm.graph.nodes:
            self.current_node = node
            if node.op == "placeholder":
                example = self.example_inputs[position]
                if isinstance(example, torch.Tensor):
                    buf = InputBuffer(
                        f"arg{position}", example.dtype, _sym.shape_of(example), _sym.strides_of(example),
                        example.device, position=position,
                    )  # fmt: skip
                    self.buffers[buf.name] = buf
                    self.storages[buf.name] = storage_of(node.meta.get("val"))
                    if isinstance(node.meta.get("val"), torch.Tensor):
                        self.input_vals[buf.name] = node.meta["val"]
                    inputs.append(buf)
                    self.env[node] = self.storage_value(buf)
                else:
                    inputs.append(None)
                    self.env[node] = _sym.norm(example) if isinstance(example, torch.SymInt) else example
                    self.scalars[position] = self.env[node]
                position += 1
            elif node.op == "get_attr" and not isinstance(getattr(self.gm, node.target), torch.Tensor):
                # A subgraph of a higher-order op (torch.cond's branches): passed to the op's aten call as it is.
                self.env[node] = getattr(self.gm, node.target)
            elif node.op == "get_attr":
                value = getattr(self.gm, node.target)
                name = f"const{len(constants)}"
                constants[name] = value
                constant = ConstantBuffer(name, value.dtype, tuple(value.shape), tuple(value.stride()), value.device)
                constant.value = value
                self.buffers[name] = constant
                self.storages[name] = None  # returned only as a copy, as eager's constants are fresh
                self.env[node] = self.storage_value(constant)
            elif node.op == "call_function":
                # Faked again first from inputs laid out again (a view then views their new value, not the old
                # one's storage), then laid out as eager's kernel lays it.
                refaked = bool(relaid & set(node.all_input_nodes)) and refake(node)
                if eager_layout(node) or refaked:
                    relaid.add(node)
                self.env[node] = self._lower_call(node)
            elif node.op == "output":
                self._count_output_storages(node.args[0])
                descriptions = node.meta.get("desc") or ()
                outputs = [
                    self._eager_owned(
                        self._output(self.env[a] if isinstance(a, torch.fx.Node) else a, a, saved=_saved(description)),
                        a,
                    )
                    for a, description in itertools.zip_longest(node.args[0], descriptions[: len(node.args[0])])
                ]
            else:
                raise NotImplementedError(f"inductor-lite: FX op {node.op!r} is not supported in an aten graph")
        return LoweredGraph(inputs, constants, self.order, outputs, self.device, self.buffers, self.scalars)

    def _lower_call(self, node: torch.fx.Node) -> Any:
        if node.target is operator.getitem:
            container: Any = self.env[node.args[0]]  # type: ignore[index]
            return container[node.args[1]]
        args = [self._arg(a) for a in node.args]
        kwargs = {k: self._arg(v) for k, v in node.kwargs.items()}
        lower = LOWERINGS.get(node.target)
        val = node.meta.get("val")
        created = len(self.order)
        if self.dynamic and isinstance(val, (torch.SymInt, torch.SymFloat)) and _sym.backed(val):
            return _sym.norm(val)  # a size computation: the wrapper evaluates it from the shape symbols
        tensors = [v for v in flat(args) if isinstance(v, TensorValue)]
        if lower is None or any(t.device.type != self.device.type for t in tensors):
            return self.fallback()
        if any(t.dtype.is_complex for t in tensors) or any(
            isinstance(v, torch.Tensor) and v.dtype.is_complex for v in flat([val])
        ):
            return self.fallback("complex numbers have no generated kernel")
        if any(type(v) is int and not _INT64_MIN <= v <= _INT64_MAX for v in flat([*args, *kwargs.values()])):
            # Generated code holds numbers in int64: eager's kernel reads a larger one as uint64 (or rejects it).
            return self.fallback("an integer argument beyond int64")
        if getattr(node.target, "_opname", None) in self.unrenderable:
            return self.fallback("no kernel rendering on this code generator")
        _eager_check(node)
        if self.dynamic:
            if not _sym.backed(val):
                return self.fallback()
            if node.target not in SYMBOLIC_ARGS and any(_sym.is_symbolic(a) for a in flat([*args, *kwargs.values()])):
                return self.fallback("symbolic scalar argument")
            try:
                result = lower(self, *args, **kwargs)
            except _sym.Unsupported as err:
                return self.fallback(str(err))
        elif _has_symbolic(val):
            return self.fallback()
        else:
            result = lower(self, *args, **kwargs)
        if isinstance(result, TensorValue):
            result = self._maybe_realize(node, result)
            if result.buffer is not None and any(b is result.buffer for b in self.order[created:]):
                # A buffer made for this node's result holds eager's tensor of this node: an output reading it
                # through another node's value (a sum over a size-1 dim is its input's elements) is not it.
                self.storages.setdefault(result.buffer.name, storage_of(val))
        return result

    def _arg(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x) for x in a)
        return a

    def _maybe_realize(self, node: torch.fx.Node, value: TensorValue) -> TensorValue:
        if value.buffer is not None:
            return value
        if value.cost > MAX_INLINE_COST or (value.cost > 0 and len(node.users) > 1):
            return self.realize(value, dense_strides(node.meta["val"]))
        return value

    @staticmethod
    def _eager_owned(ref: OutputRef, node: Any) -> OutputRef:
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if ref.arg is None or ref.replay or not isinstance(val, torch.Tensor) or val._is_view():
            return ref
        return replace(ref, own=True)

    def _output(self, value: Any, node: Any, saved: bool = False) -> OutputRef:
        """A graph output: a view of a buffer when eager's output is one of the same storage, else a new buffer.

        Eager's tensor (the node's value) says which storage the output has and its strides: an output is
        never an alias of an input, a constant or another output that eager computes separately (the caller
        may mutate either), and a new buffer gets eager's strides where they are dense. A value ``saved`` for
        the backward is never a view of an input the graph writes: AOT autograd writes the input after the
        graph, which would bump the saved view's version counter, and the backward would refuse it.
        """
        if not isinstance(value, TensorValue):
            return OutputRef(None, value)
        if not saved and (of_written := self._view_of_written_input(node)) is not None:
            return of_written
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        storage = storage_of(val)
        shared = self._shared_output(node, val, storage)
        if shared is not None:
            return shared
        view = self.strided_view(value)
        if view is not None:
            buf, strides, _ = view
            owner = self.storages.setdefault(buf.name, storage)
            same_layout = not isinstance(val, torch.Tensor) or same_strides(strides, _sym.strides_of(val), value.size)
            if storage is None or owner is None or owner != storage or not same_layout:
                view = None
        view_of_input = self._input_view(val, storage) if view is None else None
        if view_of_input is not None:
            value = view_of_input
        elif view is None:
            dense = dense_strides(val)
            own_strides, base_size = (dense, None) if dense is not None else own_layout(val) or (None, None)
            # A view with symbolic gaps (a slice of a dynamic intermediate), or at a symbolic offset: of its
            # base, as eager's. AOT autograd rebuilds an output aliasing an input it writes at the offset the
            # graph's output has when the view's ops take symbolic sizes (`x.chunk(2)[-1]` of a dynamic `x`).
            offset_set = self.dynamic and isinstance(val, torch.Tensor) and _sym.norm(val.storage_offset()) != 0
            if (own_strides is None or offset_set) and (based := self._shared_output(node, val, storage, alone=True)):
                return based
            # Eager's strides even with gaps (the new value of a strided input the graph writes): a training
            # forward's saved output is read by the backward through the strides its value has. A broadcast
            # (stride 0) is computed once and returned as the view eager's is: AOT autograd rebuilds an output
            # aliasing an input (`x.expand(...)` then `x.mul_(2)`) from the input with the strides returned here.
            fresh = TensorValue(base_size or value.size, value.dtype, value.loader, value.device, cost=value.cost)
            realized = self.realize(fresh, own_strides)
            assert realized.buffer is not None
            self.storages[realized.buffer.name] = storage
            if base_size is not None:
                realized = self.storage_value(realized.buffer, own_strides, 0, value.size)
            value = realized
        arg = _with_eager_strides(self.extern_arg(value), val)
        if (
            arg.natural
            and isinstance(self.buffers.get(arg.buffer), InputBuffer)
            and getattr(node, "op", "") != "placeholder"
        ):
            # An op's result is a new tensor in eager even when it views a whole input (`x.reshape(-1)` after
            # `x.unsqueeze_(0)`): the input itself would change with the input's metadata replayed after the graph.
            arg = replace(arg, natural=False)
        return OutputRef(arg, replay=self._input_view_ops(node, arg))

    def _input_view_ops(self, node: Any, arg: ExternArg) -> tuple[tuple[Any, tuple[Any, ...], dict[str, Any]], ...]:
        """The aten view ops that make ``node`` from the input ``arg`` views, when its strides are not all known.

        A dynamic input's fake gives its size-1 dims the strides its sizes imply; the real input may have others
        (``x[::2]`` of two rows), and a view of it keeps them in eager (``expand_as``), where ``mul_`` compares
        them. Replayed on the real input, eager's own ops give eager's strides.
        """
        buffer = self.buffers.get(arg.buffer)
        if not self.dynamic or not isinstance(buffer, InputBuffer) or 1 not in buffer.size:
            return ()
        found = input_view_chain(node)
        if found is None or getattr(self.env.get(found[0]), "buffer", None) is not buffer:
            return ()
        return self._replayed(found[1])

    def _replayed(self, views: Sequence[torch.fx.Node]) -> tuple[tuple[Any, tuple[Any, ...], dict[str, Any]], ...]:
        """``views`` as aten calls to replay on a real tensor, or () when one takes a tensor computed here."""
        chain = []
        for view in views:
            rest = [self._arg(a) for a in view.args[1:]]
            kwargs = {k: self._arg(v) for k, v in view.kwargs.items()}
            if any(isinstance(v, TensorValue) for v in flat([rest, list(kwargs.values())])):
                return ()
            chain.append((view.target, tuple(rest), kwargs))
        return tuple(chain)

    def _view_of_written_input(self, node: Any) -> OutputRef | None:
        """An output viewing the new value of an input the graph writes (``v = x.view(...)``, then
        ``torch.add(v, 1, out=v)``): the same view of the real input, as eager's.

        AOT autograd copies the new value into the input after the graph, then rebuilds the output from the
        input with the layout returned here. A view of another storage would have its offset read as counted
        from the input's start by one torch release and from its storage's start by another (an aten kernel's
        result, ``slice_scatter``'s, may start part-way into a storage of its own); in the input's storage
        both agree. The view replays eager's view ops on the input when they are known: a dynamic graph's
        value has the fake kernel's strides on size-1 dims, not eager's, which follows the real input's there
        (eager's kernel copies a dense input's strides); rebuilt from them, the view and its input would
        partially overlap for eager's in-place ops (``x.mul_(v)``).
        """
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not self.written_values or not isinstance(val, torch.Tensor):
            return None
        found = input_view_chain(node, self.written_values)
        if found is not None and found[0] in self.written_values and found[1] and (replay := self._replayed(found[1])):
            buffer = self.written_values[found[0]]
            return OutputRef(ExternArg(buffer.name, buffer.size, buffer.stride, 0, natural=True), replay=replay)
        root = alias_root(node, storage_of(val))
        if root is node or root not in self.written_values:
            return None
        view = self._view_as_eagers(self.written_values[root], val, root.meta["val"])
        return OutputRef(replace(_with_eager_strides(self.extern_arg(view), val), natural=False))

    def _view_as_eagers(self, buffer: Buffer, val: torch.Tensor, base: torch.Tensor) -> TensorValue:
        """The view of ``buffer`` (holding the tensor ``base``) that eager's ``val``, a view of ``base``, is: its
        strides and shape, at its offset from ``base``'s."""
        offset = _sym.norm(val.storage_offset()) - _sym.norm(base.storage_offset())
        return self.storage_value(buffer, _sym.strides_of(val), offset, _sym.shape_of(val))

    def _input_view(self, val: Any, storage: Any) -> TensorValue | None:
        """Eager's output as the view of an input it is, when the loads do not say so (a slice of a reshape).

        AOT autograd rebuilds an output that aliases an input from that input with the strides and offset
        of what the graph returns: a new buffer there would make it a view of the input's first elements.
        """
        if storage is None or not isinstance(val, torch.Tensor):
            return None
        for name, base in self.input_vals.items():
            owner = self.storages.get(name)
            if owner is not None and owner == storage:
                return self._view_as_eagers(self.buffers[name], val, base)
        return None

    def _count_output_storages(self, results: Sequence[Any]) -> None:
        self.output_storages: dict[Any, int] = {}
        self.output_bases: dict[torch.fx.Node, Buffer] = {}
        self.output_claims: dict[str, Any] = {}  # buffer name -> the output node returned as the buffer itself
        self.output_nodes = {a for a in results if isinstance(a, torch.fx.Node)}
        # AOT autograd's description of each output: the new value of an input it writes, say.
        descriptions = self.gm.graph.output_node().meta.get("desc") or ()
        placeholders = {
            n.meta["desc"]: n for n in self.gm.graph.find_nodes(op="placeholder") if n.meta.get("desc") is not None
        }
        for a, description in zip(results, descriptions):
            written = placeholders.get(getattr(description, "mutated_input", None))
            if isinstance(a, torch.fx.Node) and written is not None and _new_data_only(a, written):
                self.written_values[a] = self.env[written].buffer
        for a in results:
            storage = storage_of(a.meta.get("val")) if isinstance(a, torch.fx.Node) else None
            if storage is not None:
                self.output_storages[storage] = self.output_storages.get(storage, 0) + 1

    def _shared_output(self, node: Any, val: Any, storage: Any, alone: bool = False) -> OutputRef | None:
        """An output eager returns in the storage of another output, or whose elements share memory (an
        ``expand`` of an intermediate): a view of their common base's buffer.

        Eager's outputs alias each other when one is a view of the other, the same tensor is returned
        twice, or both view one intermediate; the caller sees writes to one in the other. An expanded output
        as a dense buffer would have other strides (``is_contiguous()`` true where eager's is false). The base (the
        first value up the chain of views that shares their storage) gets one buffer in its eager
        layout, and each such output is the view of it eager's strides and storage offset describe. With
        ``alone``, an output that shares its storage with no other is based so too.
        """
        if storage is None or (not alone and self.output_storages.get(storage, 0) < 2 and not overlapping(val)):
            return None
        root = alias_root(node, storage)
        base_val = root.meta.get("val")
        if root.op != "call_function" or not isinstance(base_val, torch.Tensor) or not whole_storage(base_val):
            return None  # a view of an input or a constant, or no node holds the whole storage to base views on
        if isinstance(val, torch.Tensor) and val.dtype != base_val.dtype:
            return None  # its elements are the base's bits read as another type: the aten view (``view.dtype``) is it
        buf = self.output_bases.get(root)
        if buf is None:
            strides = dense_strides(base_val)
            if strides is None and _sym.prod(_sym.shape_of(base_val)) != 0:
                return None
            base = self.realize(self.env[root], strides)
            assert base.buffer is not None
            buf = self.output_bases[root] = base.buffer
            self.storages[buf.name] = storage
        view = self.storage_value(buf, _sym.strides_of(val), _sym.norm(val.storage_offset()), _sym.shape_of(val))
        arg = _with_eager_strides(self.extern_arg(view), val)
        # The base itself, when returned, is the buffer (eager's other outputs view it); else the first output.
        claimant = root if root in self.output_nodes else node
        if arg.natural and self.output_claims.setdefault(buf.name, claimant) is not node:
            arg = replace(arg, natural=False)  # another tensor than eager's first one over the buffer: a view
        return OutputRef(arg)


def _saved(description: Any) -> bool:
    """Whether AOT autograd's description of a forward output says the backward reads it (a saved activation)."""
    return type(description).__name__.startswith("SavedForBackwards")


def _new_data_only(value: torch.fx.Node, placeholder: torch.fx.Node) -> bool:
    """Whether ``value``, the new value of the input ``placeholder``, is new data in the input's layout, not
    a layout change (``x.squeeze_()``, ``x.t_()``: a view of the input, or another shape or order), which AOT
    autograd applies to the input only after the graph."""
    new, old = value.meta.get("val"), placeholder.meta.get("val")
    if (
        not isinstance(new, torch.Tensor)
        or not isinstance(old, torch.Tensor)
        or same_storage(storage_of(new), storage_of(old))
    ):
        return False
    size = _sym.shape_of(new)
    return size == _sym.shape_of(old) and same_strides(_sym.strides_of(new), _sym.strides_of(old), size)


def _eager_check(node: torch.fx.Node) -> None:
    """Run a pointwise or reduction op eagerly on size-1 tensors of its arguments' dtypes and ranks.

    Fake tensors and the decompositions skip some of eager's dtype checks (``bool_tensor - 1``,
    ``argmax`` of bools); a lowered op would compute a value where eager raises.
    """
    if callable(node.target) and checkable(node.target):
        run_on_ones(node.target, node.args, node.kwargs, "val")


def example_device(example_inputs: Sequence[Any]) -> torch.device:
    """The device a graph runs on: its first tensor input's (CPU for a graph without one)."""
    return next((t.device for t in example_inputs if isinstance(t, torch.Tensor)), torch.device("cpu"))


def _with_eager_strides(arg: ExternArg, val: Any) -> ExternArg:
    """``arg`` with eager's strides where they address the same elements (on size-1 dims, say).

    They address nothing there, but they are what the caller sees, and eager's own checks read them (a
    copy between two views of one memory is a partial overlap unless their strides are equal).
    """
    eager_strides = _sym.strides_of(val) if isinstance(val, torch.Tensor) else arg.stride
    if arg.stride != eager_strides and same_strides(arg.stride, eager_strides, arg.size):
        return replace(arg, stride=eager_strides, natural=False)
    return arg


# Lowerings that read symbolic scalar arguments correctly (sizes of views and fills, slice bounds, indices).
SYMBOLIC_ARGS = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
    aten.full.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format, aten.new_zeros.default,
    aten.new_ones.default, aten.new_full.default, aten.new_empty.default, aten.slice.Tensor, aten.select.int,
    aten.split_with_sizes.default, aten.arange.default, aten.arange.start, aten.arange.start_step,
    aten.scalar_tensor.default, aten.mul.Tensor, aten.add.Tensor, aten.sub.Tensor, aten.div.Tensor,
    torch.ops.prims.iota.default, aten.fill.Scalar, aten.full_like.default,
}  # fmt: skip


def _has_symbolic(val: Any) -> bool:
    if isinstance(val, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in val.shape)
    if isinstance(val, (list, tuple)):
        return any(_has_symbolic(v) for v in val)
    return isinstance(val, (torch.SymInt, torch.SymFloat))


def _arg_buffers(tree: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(tree, ExternArg):
        found.add(tree.buffer)
    elif isinstance(tree, (list, tuple)):
        for x in tree:
            found |= _arg_buffers(x)
    elif isinstance(tree, dict):
        for x in tree.values():
            found |= _arg_buffers(x)
    return found


def lower_graph(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], unrenderable: frozenset[str] = frozenset()
) -> tuple[LoweredGraph, list[str]]:
    """Lower ``gm`` (an aten-level graph) and return it with the names of ops that fell back to aten.

    Ops named in ``unrenderable`` (aten op names such as ``"asin"``) are called through aten rather
    than fused, for a code generator that has no rendering of them.
    """
    lowering = GraphLowering(gm, example_inputs, unrenderable)
    lowered = lowering.run()
    return lowered, lowering.fallbacks
