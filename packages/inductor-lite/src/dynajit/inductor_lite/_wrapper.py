"""The generated Python wrapper: allocate buffers, call kernels and extern ops, return the outputs.

Everything known at compile time (sizes, strides, dtypes, kernel handles, op objects) is bound
into the wrapper's namespace, so a call does only allocations, ``data_ptr()`` reads and calls.
Every name is deleted after its last use; a dead kernel buffer serves the next kernel output of its layout
or is deleted before the next allocation, so reuse never raises the peak above freeing at last use. A
pointwise kernel whose input dies at it, read at the index it writes, writes into that input (as eager's
in-place ``relu_`` after a convolution does), so its output needs no memory of its own.

In a dynamic graph the wrapper first binds each shape symbol from an input's size (or a scalar
input), optionally checks the inputs' other symbolic sizes against them, and computes buffer
sizes and strides and the kernels' size arguments from the symbols at each call.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sympy
import torch
from torch.utils._python_dispatch import _disable_current_modes

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._graph import ExternArg, LoweredGraph, OutputRef
from dynajit.inductor_lite._ir import ComputedBuffer, ExternBuffer, InputBuffer, contiguous_strides
from dynajit.inductor_lite._scheduler import Kernel

__all__ = ["WrapperBuilder", "restride"]

log = logging.getLogger("dynajit.inductor_lite")
aten = torch.ops.aten


def _aliases(item: ExternBuffer) -> bool:
    schema = getattr(item.target, "_schema", None)
    if schema is None:
        return item.target is not None
    return any(r.alias_info is not None for r in schema.returns)


def _fresh_results(item: ExternBuffer) -> bool:
    """Whether an aten call returns only new tensors: it writes none of its arguments and returns no view of one."""
    schema = getattr(item.target, "_schema", None)
    return schema is not None and not schema.is_mutable and not _aliases(item)


def shape_error(expected: tuple, actual: tuple) -> None:
    raise RuntimeError(
        f"inductor-lite: input sizes {actual} do not satisfy the compiled graph's shape relations {expected}"
    )


def other_layout(fallback: Callable[[list[Any]], Any], args: list[Any]) -> Any:
    """Run the graph's aten ops for inputs whose layout the kernels were not generated for."""
    log.info("inductor-lite: inputs outside the compiled graph's shape relations; calling its aten ops")
    return fallback(args)


def restride(t: torch.Tensor | None, stride: tuple[int, ...]) -> torch.Tensor | None:
    """``t`` with the strides the kernels were compiled for (a copy only if aten chose others).

    ``None`` stays ``None``: an op may leave an output undefined at run time that its fake
    implementation described as a tensor (a fused RNN's workspace when no gradient is needed).
    """
    if t is None or t.stride() == stride or t.numel() <= 1:
        return t
    if all(n == 1 or a == b for n, a, b in zip(t.shape, t.stride(), stride)):
        # Only the strides of size-1 dims differ, which address nothing: the same view (of an input, say,
        # which AOT autograd rebuilds from the offset returned here), not a copy.
        return t.as_strided(t.shape, stride, t.storage_offset())
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


# Ops whose CPU kernel always returns a new contiguous tensor: their result needs no stride check at every call
# (a transformer step makes dozens of matrix products).
_CONTIGUOUS_ON_CPU = frozenset({aten.mm.default, aten.addmm.default, aten.bmm.default})


def _contiguous_by_aten(item: ExternBuffer) -> bool:
    """Whether ``item`` is a CPU op's result that aten lays out with exactly the strides compiled for it."""
    return (
        item.target in _CONTIGUOUS_ON_CPU
        and item.device.type == "cpu"
        and all(isinstance(v, int) for v in (*item.size, *item.stride))
        and tuple(item.stride) == tuple(contiguous_strides(item.size))
    )


_BINDING_NAMESPACES = (torch._C._VariableFunctions, torch._C._nn)


@functools.cache
def python_binding(op: Any) -> Any:
    """torch's generated Python function for an aten ``default`` overload (``torch.mm`` for ``aten.mm.default``),
    else ``op`` itself.

    Calling an ``OpOverload`` parses its schema in Python at every call (about 2 µs); the generated binding
    parses in C++. It is used only when a call with the default overload's arguments can bind to no other
    overload: every other one requires an argument the default does not take (``out``, ``out_dtype``).
    """
    packet = getattr(op, "overloadpacket", None)
    if packet is None or getattr(op, "_overloadname", None) != "default":
        return op
    taken = {a.name for a in op._schema.arguments}
    for name in packet.overloads():
        schema = getattr(packet, name)._schema
        required = {a.name for a in schema.arguments if not a.has_default_value()}
        if name != "default" and required <= taken:
            return op
    for namespace in _BINDING_NAMESPACES:
        binding = getattr(namespace, packet.__name__, None)
        if binding is not None:
            return binding
    return op


_ENUM_TYPES = frozenset({"ScalarType", "Layout", "MemoryFormat"})


def with_defaults(op: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``op``'s arguments with every one not given set to its schema's default, for its Python binding.

    The bindings do not always share the schema's defaults: ``torch._C._nn.mse_loss(a, b)`` does not reduce,
    where ``aten.mse_loss.default(a, b)`` means ``reduction=Mean`` (every loss's ``Mean`` parses as 0 there).
    """
    args, kwargs = list(args), dict(kwargs)
    for position, argument in enumerate(op._schema.arguments):
        if position < len(args) or argument.name in kwargs or not argument.has_default_value():
            continue
        if str(argument.real_type).removeprefix("Optional[").rstrip("]") in _ENUM_TYPES:
            # A dtype, layout or memory format default is the enum's number in the schema, which the bindings
            # refuse (``randperm(n, dtype=4)``); theirs is the same default. Later ones are then passed by name.
            continue
        if argument.kwarg_only or len(args) < position:  # (positions before it passed by name: so is it)
            kwargs[argument.name] = argument.default_value
        else:
            args.append(argument.default_value)
    return args, kwargs


# Out-of-place aten ops that copy ``self`` and write into the copy, with the in-place method that writes ``self``
# itself (a gradient's rows added into zeros: an embedding's backward; a loss's scatter): called on a kernel's
# buffer that dies at the call, the copy and its allocation are saved. ``_unsafe_index_put`` gets the checked
# method: its indices are valid, so the check only costs the loop over them.
_IN_PLACE = {
    aten.index_put.default: torch.Tensor.index_put_,
    aten._unsafe_index_put.default: torch.Tensor.index_put_,
    aten.scatter.value: torch.Tensor.scatter_,
    aten.scatter.src: torch.Tensor.scatter_,
    aten.scatter_add.default: torch.Tensor.scatter_add_,
    aten.index_add.default: torch.Tensor.index_add_,
}


def _tensor_buffers(value: Any) -> Iterator[str]:
    """The buffers the extern arguments in ``value`` (an argument, or a list or tuple of them) read."""
    if isinstance(value, ExternArg):
        yield value.buffer
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensor_buffers(item)


def _overwritable(
    kernel: Kernel, pos: int, last_use: dict[str, int], kept: set[str], buffers: dict[str, Any], shapes: dict[str, Any]
) -> str | None:
    """A buffer ``kernel`` writes its one output into: one the scheduler found it may overwrite (read only at
    the index it stores to, of its layout) that dies at it and whose storage nothing else holds (an input,
    an output, a view's base, an aten result that may alias another tensor)."""
    if not kernel.overwritable:
        return None
    shape = shapes[kernel.stored_buffers()[0].name]  # the tensor it writes through is the one it reads
    for name in kernel.overwritable:
        buf = buffers[name]
        if last_use.get(name) != pos or name in kept or shapes.get(name) != shape:
            continue
        if isinstance(buf, ComputedBuffer) or (buf.tuple_index is None and not _aliases(buf)):
            return name
    return None


def _allocation_views(graph: LoweredGraph, items: list[Any], outputs: set[str]) -> dict[str, tuple]:
    """Kernel buffers to allocate in another dense shape: every aten call reading the buffer reads all of it,
    in order, through one other shape (an ``mm`` reading a (2, 8, 32) buffer as (16, 32)). Kernels address a
    buffer through its pointer, so only the aten calls see the shape, and they then take the buffer as it is
    rather than a view made at every call. Graph outputs keep their own shape."""
    wanted: dict[str, set[tuple]] = {}
    for item in items:
        if isinstance(item, ExternBuffer):
            for arg in _tensor_args([*item.args, *item.kwargs.values()]):
                wanted.setdefault(arg.buffer, set()).add((arg.size, arg.stride, arg.offset))
    views = {}
    for name, used in wanted.items():
        buf = graph.all_buffers.get(name)
        if not isinstance(buf, ComputedBuffer) or name in outputs or len(used) != 1:
            continue
        size, stride, offset = next(iter(used))
        static = all(isinstance(v, int) for v in (*size, *stride, *buf.size, *buf.stride))
        if (
            not static
            or offset != 0
            or (size, stride) == (buf.size, buf.stride)
            or math.prod(size) != math.prod(buf.size)
        ):
            continue
        if stride == contiguous_strides(size) and buf.stride == contiguous_strides(buf.size):
            views[name] = (size, stride)
    return views


def _tensor_args(args: list[Any]) -> Iterator[ExternArg]:
    for arg in args:
        if isinstance(arg, ExternArg):
            yield arg
        elif isinstance(arg, (list, tuple)):
            yield from _tensor_args(list(arg))


class _Pool:
    """Dead kernel buffers, each handed to a later kernel output of the same layout or freed.

    A dead buffer is kept only until the next allocation: the next kernel may take it for an output
    of its layout, and whatever is still kept is deleted before anything new is allocated (an
    ``empty_strided`` or an aten call). Reuse so never holds memory at a point where freeing at last
    use would not, so the call's peak is never above what freeing every buffer at its last use gives.
    """

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.kept: dict[tuple, list[str]] = {}

    def give(self, layout: tuple, name: str) -> None:
        self.kept.setdefault(layout, []).append(name)

    def take(self, layout: tuple) -> str | None:
        names = self.kept.get(layout)
        return names.pop() if names else None

    def release(self) -> None:
        """Delete every kept buffer (before an allocation)."""
        names = sorted(n for kept in self.kept.values() for n in kept)
        if names:
            self.lines.append(f"    del {', '.join(names)}")
        self.kept.clear()


class WrapperBuilder:
    """Writes the ``call(args)`` function for one lowered, scheduled graph."""

    def __init__(
        self,
        graph: LoweredGraph,
        items: list[Kernel | ExternBuffer],
        check_inputs: bool = False,
        fallback: Callable[[list[Any]], Any] | None = None,
    ) -> None:
        self.graph = graph
        self.items = items
        self.check_inputs = check_inputs
        self.fallback = fallback
        self.needed: set[sympy.Symbol] = set()
        self.allocated: dict[str, tuple] = {}  # kernel buffers allocated in their aten readers' shape
        self.in_place = 0  # out-of-place aten calls made as their in-place methods on a dying buffer
        self.allocators: dict[tuple[torch.dtype, torch.device], str] = {}
        self.namespace: dict[str, Any] = {
            "torch": torch,
            "as_strided": torch.as_strided,
            "restride": restride,
            "below_autograd": torch._C._AutoDispatchBelowADInplaceOrView,
            "device": torch.device,
            "inf": math.inf,
            "nan": math.nan,
        }
        self.lines: list[str] = []
        # Lines that make only new tensors or none (allocations, kernel calls, aten calls whose results are new):
        # they run below autograd's dispatch layers.
        self.below_autograd: set[int] = set()

    def _allocator(self, dtype: torch.dtype, device: torch.device) -> str:
        """The name of a function allocating a tensor of ``dtype`` on ``device`` from its size and strides: an
        empty tensor's ``new_empty_strided``, which parses two arguments where ``torch.empty_strided`` parses four
        (0.9 us less an allocation, of about 2.3 under grad mode's dispatch; a step allocates dozens)."""
        name = self.allocators.get((dtype, device))
        if name is None:
            # (a real tensor, whatever fake-tensor or inference mode the graph is compiled under)
            with _disable_current_modes(), torch.inference_mode(False):
                template = torch.empty(0, dtype=dtype, device=device)
            name = self.allocators[(dtype, device)] = self.bind(template.new_empty_strided, "new")
        return name

    def bind(self, value: Any, prefix: str) -> str:
        name = f"{prefix}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def size(self, value: Any) -> str:
        self.needed |= _sym.free_symbols([value])
        return _sym.py_text(value)

    def sizes(self, values: tuple[Any, ...]) -> str:
        self.needed |= _sym.free_symbols(values)
        return _sym.tuple_text(values)

    def output_text(self, output: OutputRef) -> str:
        if output.arg is None:
            return self.arg_text(output.constant)
        if not output.replay:
            text = self.arg_text(output.arg)
            return f"{text}.detach()" if output.own and text != output.arg.buffer else text
        text = output.arg.buffer
        for op, args, kwargs in output.replay:
            texts = [text, *(self.arg_text(a) for a in args), *(f"{k}={self.arg_text(v)}" for k, v in kwargs.items())]
            text = f"{self.bind(op, 'op')}({', '.join(texts)})"
        return text

    def arg_text(self, arg: Any) -> str:
        if isinstance(arg, ExternArg):
            if arg.natural or (arg.offset == 0 and self.allocated.get(arg.buffer) == (arg.size, arg.stride)):
                return arg.buffer
            if arg.offset == 0:
                # Views from the tensor's own start: its methods (`t()`, `as_strided` without an offset, which
                # keeps the tensor's) skip the lookups and arithmetic of the general form.
                size, stride = self._layout(arg.buffer)
                if len(size) == 2 and (arg.size, arg.stride) == (size[::-1], stride[::-1]):
                    return f"{arg.buffer}.t()"
                return f"{arg.buffer}.as_strided({self.sizes(arg.size)}, {self.sizes(arg.stride)})"
            offset = self.size(arg.offset)
            if not isinstance(self.graph.all_buffers.get(arg.buffer), ComputedBuffer):
                # as_strided's offset counts from the storage's start, not from the tensor's: an input or an
                # aten result may itself start part-way into its storage.
                offset = f"{arg.buffer}.storage_offset() + {offset}"
            return f"as_strided({arg.buffer}, {self.sizes(arg.size)}, {self.sizes(arg.stride)}, {offset})"
        if isinstance(arg, sympy.Expr):
            return self.size(arg)
        if isinstance(arg, (list, tuple)):
            inner = ", ".join(self.arg_text(a) for a in arg)
            return f"[{inner}]" if isinstance(arg, list) else f"({inner}{',' if len(arg) == 1 else ''})"
        if arg is None or isinstance(arg, (bool, int, str)) or (isinstance(arg, float) and math.isfinite(arg)):
            return repr(arg)
        return self.bind(arg, "c")

    def _layout(self, name: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The size and strides of the tensor bound to ``name`` when the wrapper runs (a kernel buffer may be
        allocated in its aten readers' shape)."""
        buf = self.graph.all_buffers[name]
        return self.allocated.get(name, (tuple(buf.size), tuple(buf.stride)))

    def _bind_symbols(self, names: list[str]) -> set[sympy.Symbol]:
        """Lines binding each shape symbol from the first input size that is exactly it, then checks.

        With ``check_inputs``, every other size and stride of the inputs with symbolic sizes and every
        int input (symbolic, or specialised by a guard while tracing) is compared with what the kernels
        were generated for; a stride matters only where its dim has two or more elements and the tensor
        some. Sizes and ints outside those relations raise (the aten graph assumes them as well: the
        caller's guards keep such inputs away); a layout the kernels were not generated for (the
        caller's guards may accept a view with other strides) runs the graph's aten ops (``fallback``)
        instead of being misread.
        """
        g = self.graph
        bound: set[sympy.Symbol] = set()
        found: list[tuple[str, Any, str | None]] = []  # (actual, expected, unless which it may differ)
        for i, buf in enumerate(g.inputs):
            if buf is None:
                found.append((names[i], g.scalars.get(i), None))
            elif _sym.free_symbols([*buf.size, *buf.stride]):
                found += [(f"{names[i]}.size({d})", s, None) for d, s in enumerate(buf.size)]
                # (a size-1 dim's stride indexes nothing, but one of its own symbol is bound here: a batch of one
                # cut from a longer sequence has one, and a clone's output keeps it)
                found += [
                    (f"{names[i]}.stride({d})", s, f"{names[i]}.size({d}) < 2 or {names[i]}.numel() == 0")
                    for d, s in enumerate(buf.stride)
                    if buf.size[d] != 1 or isinstance(s, sympy.Symbol)
                ]
        checks = []
        for text, value, unless in found:
            if isinstance(value, sympy.Symbol) and value not in bound:
                self.lines.append(f"    {value.name} = {text}")
                bound.add(value)
            elif _sym.is_symbolic(value) or isinstance(value, int):
                checks.append((text, value, unless))
        checks = [c for c in checks if _sym.free_symbols([c[1]]) <= bound]
        if not self.check_inputs:
            return bound
        # Sizes and ints: the aten graph assumes these relations too, so only the caller's guards can
        # send such inputs elsewhere.
        sizes = [(t, v) for t, v, unless in checks if unless is None]
        if sizes:
            actual = ", ".join(t for t, _ in sizes)
            expected = ", ".join(_sym.py_text(v) for _, v in sizes)
            self.namespace["shape_error"] = shape_error
            self.lines.append(f"    if ({actual},) != ({expected},):")
            self.lines.append(f"        shape_error(({expected},), ({actual},))")
        # Strides: any layout is valid for the aten ops, only the kernels' indexing assumed these.
        strides = [f"({t} == {_sym.py_text(v)} or {unless})" for t, v, unless in checks if unless is not None]
        if strides:
            self.lines.append(f"    if not ({' and '.join(strides)}):")
            if self.fallback is not None:
                self.namespace.update(other_layout=other_layout, aten_fallback=self.fallback)
                self.lines.append(f"        return other_layout(aten_fallback, [{', '.join(names)}])")
            else:
                self.namespace["shape_error"] = shape_error
                self.lines.append(f"        shape_error(({', '.join(strides)}), ())")
        return bound

    def build(
        self, kernel_calls: dict[str, tuple[Callable[..., Any], list[str], bool, list[str]]]
    ) -> tuple[Callable[..., Any], str]:
        """``kernel_calls`` maps a kernel name to (callable, parameter buffer names, whether it takes pointers,
        shape-symbol arguments)."""
        g = self.graph
        names = [b.name if b is not None else f"scalar{i}" for i, b in enumerate(g.inputs)]
        self.lines.append("def call(args):")
        if names:
            self.lines.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = args")
        self.lines.append("    args.clear()")
        bound = self._bind_symbols(names)
        for name, value in g.constants.items():
            self.namespace[name] = value
        last_use = self._last_uses()
        outputs = {o.arg.buffer for o in g.outputs if o.arg is not None}
        # Storage an extern result may alias (a view op called through aten) is never handed to another buffer;
        # its name may go, the view keeps the storage alive.
        viewed = {
            name for item in self.items if isinstance(item, ExternBuffer) and _aliases(item) for name in item.reads
        }
        self.allocated = _allocation_views(g, self.items, outputs)
        shapes = {name: self.allocated.get(name, (buf.size, buf.stride)) for name, buf in g.all_buffers.items()}

        def pool_key(buf: Any) -> tuple:  # the tensor as allocated: only one of the same can serve it
            return (*shapes[buf.name], buf.dtype, buf.device)

        pool = _Pool(self.lines)
        for pos, item in enumerate(self.items):
            if isinstance(item, Kernel):
                start = len(self.lines)
                fresh = []
                overwritten = _overwritable(item, pos, last_use, outputs | viewed, g.all_buffers, shapes)
                if overwritten is not None:
                    # Written in place, as an in-place op would: the buffer it reads dies here, at the same index.
                    last_use.pop(overwritten)
                    buf = item.stored_buffers()[0]
                    self.lines.append(f"    {buf.name} = {overwritten}")
                for buf in item.stored_buffers() if overwritten is None else ():
                    reused = pool.take(pool_key(buf))
                    if reused is not None:
                        # The old name goes, or it would hold the storage past the new one's last use.
                        self.lines.append(f"    {buf.name} = {reused}; del {reused}")
                    else:
                        fresh.append(buf)
                if fresh:
                    pool.release()
                for buf in fresh:
                    shape, stride = (self.sizes(v) for v in shapes[buf.name])
                    self.lines.append(f"    {buf.name} = {self._allocator(buf.dtype, buf.device)}({shape}, {stride})")
                fn, params, pointers, symbols = kernel_calls[item.name]
                fname = self.bind(fn, item.name + "_")
                args = ", ".join([*(f"{p}.data_ptr()" if pointers else p for p in params), *symbols])
                self.needed |= {sympy.Symbol(s) for s in symbols}
                self.lines.append(f"    {fname}({args})")
                if overwritten is not None:
                    self.lines.append(f"    del {overwritten}")
                # A kernel writes through pointers into buffers that are new or its own: nothing for autograd.
                self.below_autograd.update(range(start, len(self.lines)))
            else:
                pool.release()  # an aten call allocates its result (and maybe scratch space)
                written = self._writable_self(item, pos, last_use, outputs | viewed)
                if written is None:
                    self._extern(item)
                else:
                    last_use.pop(written)
                    self._extern_in_place(item, written)
            # Each name goes at its last use, as eager drops a value: a kernel's buffer (an ``empty_strided`` of
            # its own) may serve a later kernel, an input or an aten result is deleted (the caller or a view may
            # still hold it; then only the name goes).
            for name in sorted(n for n, last in last_use.items() if last == pos and n not in outputs):
                dead = g.all_buffers.get(name)
                if isinstance(dead, ComputedBuffer) and name not in viewed:
                    pool.give(pool_key(dead), name)
                elif isinstance(dead, (ComputedBuffer, ExternBuffer, InputBuffer)):
                    self.lines.append(f"    del {name}")
        results = [self.output_text(o) for o in g.outputs]
        self.lines.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
        missing = {s.name for s in self.needed} - {s.name for s in bound}
        if missing:
            raise _sym.Unsupported(f"inductor-lite: shape symbols {sorted(missing)} are not sizes of any graph input")
        source = "\n".join(self._below_autograd(self.lines))
        exec(compile(source, "<inductor_lite wrapper>", "exec"), self.namespace)
        return self.namespace["call"], source

    def _extern(self, item: ExternBuffer) -> None:
        if item.tuple_index is not None:
            self.lines.append(
                f"    {item.name} = restride({item.args[0]}[{item.tuple_index}], {self.sizes(item.stride)})"
            )
            return
        linear = self._linear(item)
        if linear is not None:
            x, weight, bias = linear
            texts = [self.arg_text(x), weight, *([self.arg_text(bias)] if bias is not None else [])]
            call = f"{self.bind(torch._C._nn.linear, 'op')}({', '.join(texts)})"
        else:
            binding = python_binding(item.target)
            given_args, given_kwargs = item.args, item.kwargs
            if binding is not item.target:
                given_args, given_kwargs = with_defaults(item.target, item.args, item.kwargs)
            target = self.bind(binding, "op")
            args = ", ".join(self.arg_text(a) for a in given_args)
            kwargs = ", ".join(f"{k}={self.arg_text(v)}" for k, v in given_kwargs.items())
            call = f"{target}({', '.join(x for x in (args, kwargs) if x)})"
        if (item.size or item.stride) and not _contiguous_by_aten(item):
            call = f"restride({call}, {self.sizes(item.stride)})"
        if _fresh_results(item):
            self.below_autograd.add(len(self.lines))
        self.lines.append(f"    {item.name} = {call}")

    def _writable_self(self, item: ExternBuffer, pos: int, last_use: dict[str, int], kept: set[str]) -> str | None:
        """The buffer an out-of-place op of :data:`_IN_PLACE` may write in place: its ``self``, a kernel's buffer
        passed whole that dies at this call, that no other argument reads, laid out as the op's result."""
        if item.target not in _IN_PLACE or item.tuple_index is not None or not item.args:
            return None
        first = item.args[0]
        if not isinstance(first, ExternArg) or self.arg_text(first) != first.buffer:
            return None
        if _IN_PLACE[item.target] is torch.Tensor.index_put_ and any(i is None for i in item.args[1]):
            return None  # (the method takes tensors only: an upsampling's backward leaves dims unindexed)
        name = first.buffer
        if not isinstance(self.graph.all_buffers.get(name), ComputedBuffer):
            return None  # (an input or an aten result: its storage may be the caller's or another tensor's)
        if last_use.get(name) != pos or name in kept:
            return None
        if name in _tensor_buffers((item.args[1:], tuple(item.kwargs.values()))):
            return None
        return name if self._layout(name) == (tuple(item.size), tuple(item.stride)) else None

    def _extern_in_place(self, item: ExternBuffer, written: str) -> None:
        """``item`` as its in-place method on ``written`` (its ``self``), which becomes ``item``'s tensor."""
        args, kwargs = with_defaults(item.target, item.args, item.kwargs)
        texts = [self.arg_text(a) for a in args[1:]] + [f"{k}={self.arg_text(v)}" for k, v in kwargs.items()]
        self.in_place += 1
        method = self.bind(_IN_PLACE[item.target], "op")
        self.below_autograd.update((len(self.lines), len(self.lines) + 1))
        self.lines.append(f"    {item.name} = {method}({', '.join([written, *texts])})")
        self.lines.append(f"    del {written}")

    def _below_autograd(self, lines: list[str]) -> list[str]:
        """``lines`` with each stretch of lines that make only new tensors (allocations, kernel calls, aten calls
        whose results are new, and the ``del``s between them) inside one ``with below_autograd():``: autograd's
        dispatch layers cost about a microsecond a call even under ``no_grad``, where a training forward runs,
        and record nothing for tensors no input's gradient reaches (an ``empty_strided`` costs half as much
        below them). The views such a stretch makes (an operand seen through ``as_strided``) are read by its
        calls only, so none needs autograd's view tracking; views that may outlive the call (an aten view op,
        the outputs) are made outside."""
        out: list[str] = []
        i = 0
        while i < len(lines):
            if i not in self.below_autograd:
                out.append(lines[i])
                i += 1
                continue
            last = j = i
            while j < len(lines) and (j in self.below_autograd or lines[j].startswith("    del ")):
                last = j if j in self.below_autograd else last
                j += 1
            out.append("    with below_autograd():")
            out.extend("    " + line for line in lines[i : last + 1])
            i = last + 1
        return out

    def _linear(self, item: ExternBuffer) -> tuple[Any, str, Any] | None:
        """The arguments of ``linear(x, w[, bias])`` (``w`` by its buffer's name) for ``mm(x, w.T)`` or
        ``addmm(bias, x, w.T)`` where ``w`` is a 2-D tensor as bound (a weight, a backward's saved transposed
        weight), else None: the call ``nn.Linear`` makes, which takes ``w`` as it is (the same ``mm``/``addmm``
        of ``w.t()`` inside aten) instead of a view of it made in Python at every call."""
        if item.target is aten.mm.default:
            x, weight_t, bias = item.args[0], item.args[1], None
        elif item.target is aten.addmm.default and all(item.kwargs.get(k, 1) == 1 for k in ("beta", "alpha")):
            bias, x, weight_t = item.args[0], item.args[1], item.args[2]
        else:
            return None
        if not isinstance(weight_t, ExternArg) or weight_t.offset != 0 or weight_t.buffer not in self.graph.all_buffers:
            return None
        # linear(x, w) multiplies by w's transpose, whatever w's strides: the weight read is w transposed.
        size, stride = self._layout(weight_t.buffer)
        if len(size) != 2 or (weight_t.size, weight_t.stride) != (size[::-1], stride[::-1]):
            return None
        return x, weight_t.buffer, bias

    def _last_uses(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for pos, item in enumerate(self.items):
            used = item.reads if isinstance(item, ExternBuffer) else item.memory_reads
            produced = [item.name] if isinstance(item, ExternBuffer) else [b.name for b in item.stored_buffers()]
            for name in [*used, *produced]:
                last[name] = pos
        return last
