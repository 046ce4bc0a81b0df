"""The scheduler: group buffers into fused kernels, order their loops, decide what reaches memory.

A kernel iterates *outer* loops (parallel) and, for reductions, *inner* loops over the reduced
elements of one row. Its nodes are *full* (pointwise over outer x inner), *reduce* (one value per
row) or *row* (pointwise over the outer loops only). Nodes run in *steps*: a group of full and
reduce nodes sharing one inner loop, or a row node between loops. A softmax is one kernel:
max in loop 1, exp and sum in loop 2, the division in loop 3.

A buffer is written to memory only when something outside its kernel (or a later loop of the
same kernel) reads it; otherwise it lives in a local variable.

Loop ranges may be symbolic: fusion compares sizes structurally (``_sym.eq``), loop order follows
the strides' size hints, and so does the choice of a row scratch array.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._graph import LoweredGraph
from dynajit.inductor_lite._index import Index, Var, flatten, unflatten
from dynajit.inductor_lite._ir import Buffer, ComputedBuffer, Expr, ExternBuffer

__all__ = ["Kernel", "Placed", "schedule"]


@dataclass
class Placed:
    """A buffer computed in a kernel: its value expression and store index over the kernel's variables."""

    buf: ComputedBuffer
    role: str  # "full" | "reduce" | "row"
    expr: Expr
    store: Index
    rindex_flat: Index = field(default_factory=Index)  # reductions: flat position within the row (for argmax/argmin)
    step: int = 0
    stored: bool = False
    scratch: bool = False  # kept for later loops of its row in a per-thread row array, not in memory
    index: list[Index] | None = None  # a full node's multi-index over the kernel's variables


@dataclass
class Kernel:
    name: str
    outer: list[Var]
    inner: list[Var]
    nodes: list[Placed]
    steps: list[tuple[str, list[Placed]]] = field(default_factory=list)
    memory_reads: set[str] = field(default_factory=set)
    overwritable: list[str] = field(default_factory=list)  # reads the one output may be written into

    @property
    def is_reduction(self) -> bool:
        return any(p.role == "reduce" for p in self.nodes)

    def work_size(self) -> Any:
        """Elements of work: an int, or a sympy expression over the shape symbols."""
        inner = _sym.prod(v.size for v in self.inner) if self.inner else 1
        return _sym.norm(_sym.prod(v.size for v in self.outer) * inner)

    def symbols(self) -> list[str]:
        """Names of the shape symbols the kernel's loops, indices and values use (its size arguments)."""
        sizes: list[object] = [v.size for v in (*self.outer, *self.inner)]
        for p in self.nodes:
            sizes += p.store.sizes() + p.rindex_flat.sizes()
            for e in walk(p.expr):
                if e.op == "load":
                    sizes += e.args[1].sizes()  # (an indirect load's stand-in variable: the size it indexes)
                elif e.op == "index":
                    sizes += e.args[0].sizes()
                elif e.op == "size":
                    sizes.append(e.args[0])
        return sorted(s.name for s in _sym.free_symbols(sizes))

    def stored_buffers(self) -> list[Buffer]:
        return [p.buf for p in self.nodes if p.stored]


def walk(expr: Expr) -> Iterator[Expr]:
    seen: set[int] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(a for a in e.args if isinstance(a, Expr))


def loads(expr: Expr) -> list[tuple[str, Index]]:
    return [(e.args[0], e.args[1]) for e in walk(expr) if e.op == "load"]


def subs_expr(expr: Expr, mapping: dict[str, Index], memo: dict[int, Expr] | None = None) -> Expr:
    memo = {} if memo is None else memo
    hit = memo.get(id(expr))
    if hit is not None:
        return hit
    if expr.op == "load":
        rest = tuple(subs_expr(a, mapping, memo) if isinstance(a, Expr) else a for a in expr.args[2:])  # (indirect)
        out = Expr("load", (expr.args[0], expr.args[1].subs(mapping), *rest), expr.dtype)
    elif expr.op == "index":
        out = Expr("index", (expr.args[0].subs(mapping),), expr.dtype)
    else:
        args = tuple(subs_expr(a, mapping, memo) if isinstance(a, Expr) else a for a in expr.args)
        out = Expr(expr.op, args, expr.dtype)
    memo[id(expr)] = out
    return out


def _nontrivial(size: tuple) -> list:
    return [s for s in size if s != 1]


class _Geometry:
    """Loop ranges of a kernel and how a buffer's multi-index maps onto its loop variables."""

    def __init__(self, outer: list, inner: list, perm: list[int] | None = None, size: tuple = ()) -> None:
        self.outer = [Var(f"x{k}", s) for k, s in enumerate(outer)]
        self.inner = [Var(f"r{k}", s) for k, s in enumerate(inner)]
        self.perm = perm
        self.size = size
        self.flat_outer = flatten([Index.of(v) for v in self.outer], outer)
        self.flat_inner = flatten([Index.of(v) for v in self.inner], inner)
        self.outer_numel = _sym.prod(outer)
        self.inner_numel = _sym.prod(inner)

    @staticmethod
    def for_pointwise(buf: ComputedBuffer) -> _Geometry:
        # Loop over dims from largest to smallest stride so the innermost loop walks the output contiguously.
        dims = sorted(range(len(buf.size)), key=lambda d: -_sym.hint(buf.stride[d]))
        return _Geometry([buf.size[d] for d in dims], [], dims, buf.size)

    @staticmethod
    def for_reduction(buf: ComputedBuffer) -> _Geometry:
        return _Geometry(_nontrivial(buf.size), _nontrivial(buf.reduction_ranges))

    def place(self, buf: ComputedBuffer) -> Placed | None:
        if buf.is_reduction:
            if (
                not _sym.eq(self.inner_numel, _sym.prod(buf.reduction_ranges))
                or not _sym.eq(self.outer_numel, buf.numel())
                or not self.inner
            ):
                return None
            out_index = unflatten(self.flat_outer, buf.size)
            rindex = unflatten(self.flat_inner, buf.reduction_ranges)
            expr = buf.fn(out_index, rindex)
            return Placed(buf, "reduce", expr, buf.store_index(out_index), flatten(rindex, buf.reduction_ranges))
        numel = buf.numel()
        if not self.inner:
            index: list[Index]
            if buf.size == self.size and self.perm is not None:
                index = [Index()] * len(buf.size)
                for var, d in zip(self.outer, self.perm):
                    index[d] = Index.of(var)
            elif _sym.eq(numel, self.outer_numel) and self.perm == sorted(self.perm or []):
                # Loops in row-major order: iteration p computes the p-th element of any row-major shape of as
                # many elements (a (16, 64) product's input and its (2, 8, 64) activation in one kernel).
                index = unflatten(self.flat_outer, buf.size)
            else:
                return None
            return _full(buf, index)
        if _sym.eq(numel, self.outer_numel):
            index = unflatten(self.flat_outer, buf.size)
            return Placed(buf, "row", buf.fn(index), buf.store_index(index))
        if not _sym.eq(numel, self.outer_numel * self.inner_numel):
            return None
        for k in range(len(buf.size) + 1):
            if _sym.eq(_sym.prod(buf.size[:k]), self.outer_numel) and _sym.eq(
                _sym.prod(buf.size[k:]), self.inner_numel
            ):
                index = unflatten(self.flat_outer, buf.size[:k]) + unflatten(self.flat_inner, buf.size[k:])
                return _full(buf, index)
        return None

    def place_as_read(self, buf: ComputedBuffer, placed: list[Placed]) -> Placed | None:
        """``buf``, pointwise over as many elements as the loops, placed where the kernel's other nodes see its
        elements: at the multi-index of a placed full node of its layout, or at the index a placed node reads
        it from (a batch norm's backward reduces over batch and space, the channels in the middle: its
        pointwise inputs follow the reduction's loops, so the reduction and its inputs are one kernel)."""
        if not self.inner or not _sym.eq(buf.numel(), self.outer_numel * self.inner_numel):
            return None
        for p in placed:
            if p.role == "full" and p.index is not None and p.buf.size == buf.size and p.buf.stride == buf.stride:
                return _full(buf, p.index)
        loops = {v.name: v for v in (*self.outer, *self.inner) if v.size != 1}
        for p in placed:
            for name, read in loads(p.expr):
                index = _multi_index(read, buf, loops) if name == buf.name else None
                if index is not None:
                    return _full(buf, index)
        return None


def _full(buf: ComputedBuffer, index: list[Index]) -> Placed:
    """``buf`` computed and stored at each point of ``index``, one of its elements per iteration."""
    return Placed(buf, "full", buf.fn(index), buf.store_index(index), index=index)


def _multi_index(flat: Index, buf: ComputedBuffer, loops: dict[str, Var]) -> list[Index] | None:
    """The multi-index of ``buf`` whose address is ``flat``, when each of the kernel's loops walks one of its
    dims (same size, the dim's stride as coefficient) and every loop is used: then the kernel visits each of
    its elements once."""
    if flat.const != 0 or len(flat.terms) != len(loops):
        return None
    index: list[Index] = [Index()] * len(buf.size)
    free = {d for d, size in enumerate(buf.size) if size != 1}
    for atom, coefficient in flat.terms:
        if not isinstance(atom, Var) or atom.name not in loops:
            return None
        d = next((d for d in free if buf.stride[d] == coefficient and buf.size[d] == atom.size), None)
        if d is None:
            return None
        free.discard(d)
        index[d] = Index.of(atom)
    return None if free else index


def _arrange(placed: list[Placed]) -> list[tuple[str, list[Placed]]] | None:
    """Assign nodes to steps; None when some in-kernel read is not of the element the reader owns."""
    steps: list[tuple[str, list[Placed]]] = []
    by_name = {p.buf.name: p for p in placed}
    for node in placed:
        bound = 0
        for name, index in loads(node.expr):
            dep = by_name.get(name)
            if dep is None or dep is node:
                continue
            if index != dep.store:
                return None
            if dep.role == "full":
                if node.role == "row":
                    return None
                bound = max(bound, dep.step)
            else:
                bound = max(bound, dep.step + 1)
        if node.role == "row":
            node.step = len(steps)
            steps.append(("row", [node]))
            continue
        for s in range(bound, len(steps)):
            if steps[s][0] == "group":
                node.step = s
                steps[s][1].append(node)
                break
        else:
            node.step = len(steps)
            steps.append(("group", [node]))
    return steps


class _KernelBuilder:
    def __init__(self, first: ComputedBuffer) -> None:
        self.bufs = [first]
        self.geometry = _Geometry.for_reduction(first) if first.is_reduction else _Geometry.for_pointwise(first)
        placed = self._place_all(self.geometry, self.bufs)
        assert placed is not None
        self.placed, self.steps = placed

    @staticmethod
    def _place_all(geometry: _Geometry, bufs: list[ComputedBuffer]):
        placed: list[Placed | None] = [geometry.place(buf) for buf in bufs]
        if any(p is None and (buf.is_reduction or not geometry.inner) for p, buf in zip(placed, bufs)):
            return None
        # The pointwise buffers left are placed where the others see them, one a round.
        while any(p is None for p in placed):
            known = [p for p in placed if p is not None]
            k, p = next(
                ((k, p) for k, buf in enumerate(bufs) if placed[k] is None
                 if (p := geometry.place_as_read(buf, known)) is not None),
                (None, None),
            )  # fmt: skip
            if k is None:
                return None
            placed[k] = p
        steps = _arrange(placed)  # type: ignore[arg-type]
        return None if steps is None else (placed, steps)

    def _place_one_more(self, buf: ComputedBuffer):
        """The kernel's buffers as they were placed, and ``buf`` placed in the same loops: directly, or where the
        placed nodes read it. (``_place_all`` of them all again at every join made the work grow with the square
        of the kernel's size.)"""
        geometry = self.geometry
        new = geometry.place(buf)
        if new is None and not (buf.is_reduction or not geometry.inner):
            new = geometry.place_as_read(buf, self.placed)
        if new is None:
            return None
        placed = [*self.placed, new]
        steps = _arrange(placed)  # (numbers each node's step from the ones before it: the placed keep theirs)
        return None if steps is None else (placed, steps)

    def try_add(self, buf: ComputedBuffer) -> bool:
        geometry = self.geometry
        if buf.is_reduction and not geometry.inner:
            geometry = _Geometry.for_reduction(buf)
            result = self._place_all(geometry, [*self.bufs, buf])
        else:
            result = self._place_one_more(buf)
        if result is None:
            return False
        self.bufs.append(buf)
        self.geometry = geometry
        self.placed, self.steps = result
        return True

    def build(self, name: str) -> Kernel:
        return Kernel(name, self.geometry.outer, self.geometry.inner, self.placed, self.steps)


def _merge_loops(kernel: Kernel) -> None:
    """Collapse adjacent loops that every access walks as one contiguous range (fewer, longer loops)."""
    for attr in ("outer", "inner"):
        loops: list[Var] = getattr(kernel, attr)
        k = len(loops) - 2
        while k >= 0:
            a, b = loops[k], loops[k + 1]
            if a.size == 0 or b.size == 0:
                k -= 1
                continue
            merged = Var(a.name, _sym.norm(a.size * b.size))
            mapping = {a.name: Index.of(merged).floordiv(b.size), b.name: Index.of(merged).mod(b.size)}
            exprs = [subs_expr(p.expr, mapping) for p in kernel.nodes]
            stores = [p.store.subs(mapping) for p in kernel.nodes]
            indices = [i for e in exprs for _, i in loads(e)] + stores
            indices += [e.args[0] for x in exprs for e in walk(x) if e.op == "index"]
            if not any(i.has_divmod({merged.name}) for i in indices):
                for p, e, s in zip(kernel.nodes, exprs, stores):
                    p.expr, p.store = e, s
                    p.rindex_flat = p.rindex_flat.subs(mapping)
                loops[k : k + 2] = [merged]
            k -= 1
        # Size-1 loops carry no work.
        setattr(kernel, attr, [v for v in loops if v.size != 1])


def schedule(graph: LoweredGraph) -> list[Kernel | ExternBuffer]:
    """Fuse the graph's ComputedBuffers into kernels, in execution order with the extern calls.

    A buffer joins the latest kernel that can take it; a small one may join an earlier kernel, up to
    ``_LOOK_BACK`` items back, when everything it reads is written by then, so small kernels an aten call
    separates in the graph's order run as one call. It tries first a kernel (however far back) where it would
    be the last reader of something that kernel writes: there that value need never reach memory.
    """
    built: list[_KernelBuilder | ExternBuffer] = []
    written_at: dict[str, int] = {}  # buffer name -> position of the item that writes it
    readers: dict[str, set[str]] | None = None  # buffer name -> the buffers reading it ("" for a graph output)
    reads_of: dict[str, set[str]] = {}  # buffer name -> what its value reads, placed once per buffer

    def reads(buf: ComputedBuffer) -> set[str]:
        if buf.name not in reads_of:
            reads_of[buf.name] = _reads(buf)
        return reads_of[buf.name]

    for buf in graph.buffers:
        if isinstance(buf, ExternBuffer):
            mutable = getattr(getattr(buf.target, "_schema", None), "is_mutable", True)
            at = len(built) if mutable else _hoisted_position(built, buf)
            built.insert(at, buf)
            for name, index in written_at.items():
                if index >= at:
                    written_at[name] = index + 1
            for name in (buf.name, *(buf.reads if mutable else ())):
                written_at[name] = at
            continue
        if not isinstance(buf, ComputedBuffer):
            raise TypeError(f"inductor-lite scheduler: unexpected buffer kind {type(buf).__name__}")
        last = len(built) - 1
        candidates = [last] if last >= 0 else []
        if _small(buf):
            its_reads = reads(buf)
            earliest = max((written_at.get(name, -1) for name in its_reads), default=-1)
            candidates = [*range(last, max(earliest, last - _LOOK_BACK, 0) - 1, -1)]
            if 0 <= earliest and isinstance(built[earliest], _KernelBuilder):
                readers = _readers(graph, reads) if readers is None else readers
                if _last_reader_of_some(built[earliest], buf.name, its_reads, readers):
                    candidates = [earliest, *(i for i in candidates if i != earliest)]
        position = next(
            (i for i in candidates if isinstance(b := built[i], _KernelBuilder) and b.try_add(buf)),
            None,
        )
        if position is None:
            built.append(_KernelBuilder(buf))
            position = len(built) - 1
        written_at[buf.name] = position
    items: list[Kernel | ExternBuffer] = []
    for entry in built:
        if isinstance(entry, _KernelBuilder):
            items.append(entry.build(f"kernel{sum(isinstance(i, Kernel) for i in items)}"))
        else:
            items.append(entry)
    _decide_stores(items, graph)
    for item in items:
        if isinstance(item, Kernel):
            _drop_dead(item)
    items = [item for item in items if not isinstance(item, Kernel) or item.nodes]
    for item in items:
        if isinstance(item, Kernel):
            _merge_loops(item)
            _mark_overwritable(item, graph.all_buffers)
    return items


def _readers(graph: LoweredGraph, reads: Callable[[ComputedBuffer], set[str]]) -> dict[str, set[str]]:
    """Which buffers read each buffer (``reads`` of a computed one); a graph output is read by ``""``."""
    readers: dict[str, set[str]] = {}
    for buf in graph.buffers:
        for name in reads(buf) if isinstance(buf, ComputedBuffer) else getattr(buf, "reads", ()):
            readers.setdefault(name, set()).add(buf.name)
    for output in graph.outputs:
        if output.arg is not None:
            readers.setdefault(output.arg.buffer, set()).add("")
    return readers


def _last_reader_of_some(kernel: _KernelBuilder, name: str, reads: set[str], readers: dict[str, set[str]]) -> bool:
    """Whether buffer ``name`` joining ``kernel`` leaves a value the kernel writes read nowhere else (so it need
    not be stored: a layer norm's statistics, which only the backward's saved ``rstd / n`` reads besides the
    normalisation, stay in registers instead of being kept in memory to the end of the graph)."""
    own = {b.name for b in kernel.bufs}
    return any(readers.get(read, set()) <= own | {name} for read in reads & own)


def _hoisted_position(built: list[Any], extern: ExternBuffer) -> int:
    """Where a small aten call that writes nothing but its result goes: above the kernels just before it that
    write nothing it reads (up to ``_LOOK_BACK``), so the kernel it separated from the next buffers can take them
    (a gated MLP's ``silu(gate)`` and ``silu(gate) * up`` are one kernel call, the ``up`` projection first)."""
    at = len(built)
    if not _small(extern):
        return at
    while at > 0 and len(built) - at < _LOOK_BACK and isinstance(kernel := built[at - 1], _KernelBuilder):
        if extern.reads & {b.name for b in kernel.bufs}:
            break
        at -= 1
    return at


# How many items back a small buffer may join a kernel, and what counts as small (elements): a kernel call costs
# about a microsecond whatever its size, and moving a large value's computation earlier would hold its memory
# longer.
_LOOK_BACK = 8
_SMALL_NUMEL = 16384


def _small(buf: Buffer) -> bool:
    sizes = (*buf.size, *getattr(buf, "reduction_ranges", ()))
    return all(isinstance(s, int) for s in sizes) and math.prod(sizes) <= _SMALL_NUMEL


def _reads(buf: ComputedBuffer) -> set[str]:
    """The buffers ``buf``'s value reads."""
    geometry = _Geometry.for_reduction(buf) if buf.is_reduction else _Geometry.for_pointwise(buf)
    placed = geometry.place(buf)
    return set() if placed is None else {name for name, _ in loads(placed.expr)}


def _drop_dead(kernel: Kernel) -> None:
    """Remove the nodes nothing stores or reads (the indices of ``max(x, dim)`` when only its values are used).

    The C++ compiler would drop them too, but a dead argmax beside a bool max is what gcc 12's AVX-512
    vectoriser miscompiles into a wrong max: generated code carries no dead computation.
    """
    while True:
        read = {name for p in kernel.nodes for name, _ in loads(p.expr)}
        dead = {id(p) for p in kernel.nodes if not p.stored and not p.scratch and p.buf.name not in read}
        if not dead:
            return
        kernel.nodes = [p for p in kernel.nodes if id(p) not in dead]
        steps = [(kind, [p for p in nodes if id(p) not in dead]) for kind, nodes in kernel.steps]
        kernel.steps = [(kind, nodes) for kind, nodes in steps if nodes]
        for step, (_, nodes) in enumerate(kernel.steps):
            for p in nodes:
                p.step = step


def _mark_overwritable(kernel: Kernel, buffers: dict[str, Any]) -> None:
    """The buffers a pointwise kernel's one output may be written into: read only at the index it stores to,
    of its layout. Whether one dies at this kernel (so it may be overwritten) is the wrapper's to decide;
    the generated code gives these pointers no ``__restrict__``."""
    stored = [p for p in kernel.nodes if p.stored]
    if kernel.is_reduction or len(kernel.steps) > 1 or len(stored) != 1 or stored[0].role != "full":
        return
    out = stored[0]
    layout = (out.buf.size, out.buf.stride, out.buf.dtype, out.buf.device)
    for name in sorted(kernel.memory_reads):
        buf = buffers.get(name)
        if (
            not isinstance(buf, ComputedBuffer | ExternBuffer)
            or (buf.size, buf.stride, buf.dtype, buf.device) != layout
        ):
            continue
        if all(index.key() == out.store.key() for p in kernel.nodes for n, index in loads(p.expr) if n == name):
            kernel.overwritable.append(name)


def _inline(expr: Expr, name: str, replacement: Expr, memo: dict[int, Expr] | None = None) -> Expr:
    """``expr`` with loads of buffer ``name`` replaced by ``replacement`` (the value at the same element)."""
    memo = {} if memo is None else memo
    hit = memo.get(id(expr))
    if hit is not None:
        return hit
    if expr.op == "load" and expr.args[0] == name:
        # (never an indirect load of ``name``: its index is not the stored one, so ``name`` is not inlined)
        out = replacement
    elif any(isinstance(a, Expr) for a in expr.args):  # (an indirect load's value reads ``name`` too)
        out = Expr(
            expr.op,
            tuple(_inline(a, name, replacement, memo) if isinstance(a, Expr) else a for a in expr.args),
            expr.dtype,
        )
    else:
        out = expr
    memo[id(expr)] = out
    return out


SCRATCH_LIMIT = 16384
_TRANSCENDENTAL = {
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "tanh",
    "sigmoid",
    "erf",
    "pow",
    "sin",
    "cos",
}


def _expensive(expr: Expr) -> bool:
    """Whether ``expr`` costs more to recompute than to keep: transcendental math, or a read at a position another
    tensor holds (an embedding's rows, gathered from a table that may not stay in cache between passes)."""
    return any(e.op in _TRANSCENDENTAL or (e.op == "load" and len(e.args) > 2) for e in walk(expr))


def _decide_stores(items: list[Kernel | ExternBuffer], graph: LoweredGraph) -> None:
    needed = {o.arg.buffer for o in graph.outputs if o.arg is not None}
    for item in items:
        if isinstance(item, ExternBuffer):
            needed |= item.reads
            continue
        own = {p.buf.name for p in item.nodes}
        needed |= {name for p in item.nodes for name, _ in loads(p.expr) if name not in own}
    for item in items:
        if isinstance(item, ExternBuffer):
            continue
        own_nodes = {p.buf.name: p for p in item.nodes}
        for p in item.nodes:
            # A full node from an earlier loop of this kernel that nothing else needs is recomputed (cheap)
            # or kept in a row-sized scratch array (transcendental math, rows that fit in cache); never stored.
            changed = True
            while changed:
                changed = False
                for name, _ in loads(p.expr):
                    dep = own_nodes.get(name)
                    if dep is None or dep.role != "full" or dep.step >= p.step or name in needed or dep.scratch:
                        continue
                    # A symbolic row's scratch lives on the heap (see the C++ codegen): its hint decides.
                    row = _sym.hint(_sym.prod(v.size for v in item.inner))
                    if _expensive(dep.expr) and item.inner and row <= SCRATCH_LIMIT:
                        dep.scratch = True
                    else:
                        p.expr = _inline(p.expr, name, dep.expr)
                        changed = True
                    break
            for name, _ in loads(p.expr):
                dep = own_nodes.get(name)
                if dep is None:
                    item.memory_reads.add(name)
                elif dep.role == "full" and dep.step < p.step and not dep.scratch:
                    dep.stored = True
                    item.memory_reads.add(name)
        for p in item.nodes:
            p.stored = p.stored or p.buf.name in needed
