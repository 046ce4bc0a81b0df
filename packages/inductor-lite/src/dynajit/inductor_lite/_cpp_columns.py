"""Column-block reductions: a reduction along a strided dimension written a block of contiguous output columns at a
time, so each row's loads are vector loads instead of one strided gather per output element."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dynajit.inductor_lite._cpp_text import REDUCE, Scope, compute_ctype, initial_value, size_text
from dynajit.inductor_lite._scheduler import Kernel, Placed, loads

if TYPE_CHECKING:
    from dynajit.inductor_lite._ir import Expr

__all__ = ["COLUMN_BLOCK", "COLUMN_RUN", "ColumnReductions", "column_block", "is_column_reduction"]


class ColumnReductions:
    """The column-block part of the C++ kernel writer (``_codegen_cpp``'s, which provides the methods declared here)."""

    kernel: Kernel
    column: str  # the column variable (its block, lane and count are named after it)

    # the writer's own methods, which these steps call
    emit: Callable[[int, str], None]
    value: Callable[[Expr, Scope, int], str]
    store: Callable[[Placed, str, int], None]
    _body: Callable[..., None]

    def _column_reduction(self, depth: int, parallel: bool, threads: str) -> None:
        """Reduce along a strided dimension a block of contiguous columns at a time (see is_column_reduction).

        Each row of the reduced dimension adds a contiguous run of the block's elements into as many
        accumulators, so loads are vector loads instead of one strided gather per output element, and every
        column is still summed in row order. The kernel's steps run in their order over the block: a group
        passes over its rows (reducing, or computing each element from earlier results, as a batch norm's
        output does from its statistics), a row step computes one value per column (a mean's division). What
        a later step reads of an earlier one is kept per column of the block.
        """
        k = self.kernel
        *outer, x = k.outer
        (r,) = k.inner
        xs, rs = size_text(x.size), size_text(r.size)
        block = column_block(x.size)
        if parallel:
            self.emit(depth, f"#pragma omp parallel for collapse({len(outer) + 1}) schedule(dynamic, 1){threads}")
        for var in outer:
            self.emit(depth, f"for (int64_t {var.name} = 0; {var.name} < {size_text(var.size)}; {var.name}++) {{")
            depth += 1
        self.column = x.name
        b, n, lane = f"{x.name}_b", f"{x.name}_n", f"{x.name}_l"
        self.emit(depth, f"for (int64_t {b} = 0; {b} < {xs}; {b} += {block}) {{")
        depth += 1
        self.emit(depth, f"const int64_t {n} = dj_imin({xs} - {b}, {block});")
        known = Scope()  # each earlier result as its column's element of a per-block array
        for kind, nodes in k.steps:
            if kind == "row":
                (p,) = nodes
                kept = f"row_{p.buf.name}_l"
                self.emit(depth, f"{compute_ctype(p.expr.dtype)} {kept}[{block}];")
                self._column_loop(depth)
                value = self.value(p.expr, Scope(known), depth + 1)
                if p.stored:
                    self.store(p, value, depth + 1)
                self.emit(depth + 1, f"{kept}[{lane}] = {value};")
                self.emit(depth, "}")
                known.locals[p.buf.name] = f"{kept}[{lane}]"
                continue
            reductions = [p for p in nodes if p.role == "reduce"]
            if not reductions:
                self.emit(depth, f"for (int64_t {r.name} = 0; {r.name} < {rs}; {r.name}++) {{")
                self._column_loop(depth + 1)
                self._body(nodes, Scope(known), depth + 2, {}, lane=lane)
                self.emit(depth + 1, "}")
                self.emit(depth, "}")
                continue
            self._column_group(nodes, reductions, known, depth, block)
        while depth > 1:
            depth -= 1
            self.emit(depth, "}")

    def _column_group(
        self, nodes: list[Placed], reductions: list[Placed], known: Scope, depth: int, block: int
    ) -> None:
        """One group's reductions over a block of columns, its rows combined in runs of COLUMN_RUN before
        joining the total (max/min/prod alike); each total, then stored if it is, is known to later steps."""
        (r,) = self.kernel.inner
        lane = f"{self.column}_l"
        accs = {p.buf.name: f"acc_{p.buf.name}" for p in reductions}
        parts = {p.buf.name: f"part_{p.buf.name}" for p in reductions}

        def start(names: dict[str, str], depth: int) -> None:
            for p in reductions:
                init = initial_value(p)
                acc, ctype = names[p.buf.name], compute_ctype(p.expr.dtype)
                # A float sum accumulates in double (it is memory-bound here): eager's rounding or better.
                ctype = "double" if ctype == "float" and p.buf.reduction_type == "sum" else ctype
                self.emit(depth, f"{ctype} {acc}_l[{block}];")
                self.emit(depth, f"for (int64_t {lane} = 0; {lane} < {block}; {lane}++) {acc}_l[{lane}] = {init};")

        start(accs, depth)
        rb, rs = f"{r.name}_b", size_text(r.size)
        self.emit(depth, f"for (int64_t {rb} = 0; {rb} < {rs}; {rb} += {COLUMN_RUN}) {{")
        start(parts, depth + 1)
        self.emit(depth + 1, f"const int64_t {r.name}_e = dj_imin({rs}, {rb} + {COLUMN_RUN});")
        self.emit(depth + 1, f"for (int64_t {r.name} = {rb}; {r.name} < {r.name}_e; {r.name}++) {{")
        self._column_loop(depth + 2)
        self._body(nodes, Scope(known), depth + 3, parts, lane=lane)
        self.emit(depth + 2, "}")
        self.emit(depth + 1, "}")
        self._column_loop(depth + 1)
        for p in reductions:
            total, part = f"{accs[p.buf.name]}_l[{lane}]", f"{parts[p.buf.name]}_l[{lane}]"
            combine = REDUCE[p.buf.reduction_type][1].format(a=total, v=part, T=compute_ctype(p.expr.dtype))
            self.emit(depth + 2, f"{total} = {combine};")
        self.emit(depth + 1, "}")
        self.emit(depth, "}")
        for p in reductions:
            known.locals[p.buf.name] = f"{accs[p.buf.name]}_l[{lane}]"
        if any(p.stored for p in reductions):
            self._column_loop(depth)
            for p in reductions:
                if p.stored:
                    self.store(p, known.locals[p.buf.name], depth + 1)
            self.emit(depth, "}")

    def _column_loop(self, depth: int) -> None:
        x = self.column
        self.emit(depth, "#pragma omp simd")
        self.emit(depth, f"for (int64_t {x}_l = 0; {x}_l < {x}_n; {x}_l++) {{")
        self.emit(depth + 1, f"const int64_t {x} = {x}_b + {x}_l;")


COLUMN_BLOCK = 128
COLUMN_RUN = 64


def column_block(columns: Any) -> int:
    """Columns reduced together: COLUMN_BLOCK, or fewer where that leaves four blocks for the threads to share
    (a multiple of 8, whole cache lines of doubles). No sum depends on it: each column's is in row order."""
    if not isinstance(columns, int) or columns >= 4 * COLUMN_BLOCK:
        return COLUMN_BLOCK
    return max(16, ((columns + 3) // 4 + 7) // 8 * 8)


def is_column_reduction(k: Kernel) -> bool:
    """Reductions along a strided dimension whose output columns are contiguous in every input.

    A group of reductions first; then any groups (with reductions, or computing each element from earlier
    results: a batch norm's output or input gradient) and steps computed per output element (a mean's division).

    Written row by row it would gather one element per cache line (a bias gradient, ``x.sum(0)``, a
    channels-last batch norm's gradients); column blocks read memory in order instead.
    """
    if len(k.inner) != 1 or not k.outer or not k.steps or k.steps[0][0] != "group":
        return False
    nodes = [p for _, step in k.steps for p in step]
    if any(p.scratch for p in nodes) or any(p.role == "reduce" and p.buf.reduction_type not in REDUCE for p in nodes):
        return False
    x, r = k.outer[-1].name, k.inner[0].name
    strided = False
    for p in nodes:
        for _, index in loads(p.expr):
            if r not in index.variables():
                continue
            if index.has_divmod({x, r}) or index.coefficient(x) != 1 or index.coefficient(r) == 1:
                return False
            strided = True
    return strided
