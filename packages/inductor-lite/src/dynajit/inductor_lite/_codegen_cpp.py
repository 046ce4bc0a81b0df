"""C++/OpenMP code generation: one translation unit per graph, one ``extern "C"`` function per kernel.

Loops are plain counted loops over int64 indices with ``__restrict__`` pointers and no calls in
the innermost loop beyond inlinable math, so g++ vectorises them; reductions over a contiguous
row accumulate into a small array of lanes (independent partial results), which vectorises
without fast-math. The outer loops carry ``#pragma omp parallel for`` when the work pays for it. A kernel of a
dynamic graph takes its shape symbols as trailing ``int64_t`` parameters, used in loop bounds and
index arithmetic; whether it runs threaded, and its chunk size, are decided at run time from them,
and its other heuristic choices (reduction lanes) follow the example sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._cpp_columns import ColumnReductions, is_column_reduction
from dynajit.inductor_lite._cpp_entry import python_entry
from dynajit.inductor_lite._cpp_runtime import OPS, PRELUDE, SMALL_POWERS, math_declarations
from dynajit.inductor_lite._cpp_text import (
    REDUCE,
    ROUND,
    SIMD_COMBINE,
    SIMD_REDUCE,
    Scope,
    compute_ctype,
    extreme,
    index_text,
    initial_value,
    literal,
    size_text,
    storage_ctype,
)
from dynajit.inductor_lite._index import Index, Var, flatten
from dynajit.inductor_lite._ir import Expr, IndexFault
from dynajit.inductor_lite._scheduler import Kernel, Placed, loads, walk

__all__ = ["CppOptions", "PRELUDE", "kernel_source", "storage_ctype", "math_declarations"]


# Values a float sum adds in float before its block's sum joins the row's in double (a multiple of any lanes).
SUM_BLOCK = 256


@dataclass(frozen=True)
class CppOptions:
    parallel_threshold: int = 32768
    num_threads: int = 0  # 0: OpenMP's default
    vector_lanes: int = 0  # 0: OpenMP SIMD reductions; n: n independent accumulator lanes


class _KernelWriter(ColumnReductions):
    def __init__(self, kernel: Kernel, options: CppOptions, dtypes: dict[str, torch.dtype]) -> None:
        self.kernel = kernel
        self.dtypes = dtypes
        self.options = options
        self.lines: list[str] = []
        self.includes = ""
        self.param_types: list[str] = []  # the kernel's pointer parameters' C types, in order
        self.counter = 0
        self.ptr: dict[str, str] = {}
        self.store_index = {p.buf.name: p.store for p in kernel.nodes}
        self.scratch = {p.buf.name: p for p in kernel.nodes if p.scratch}
        self.row_results: set[str] = set()  # variables holding a finished reduction of the current row
        self.guarded = False  # whether some load sits in a block entered only where a condition holds
        self.computed_index = False  # whether some indirect load reads at an index computed, not loaded
        # Where a value the same for the whole row goes while a group's loop is written: (line, depth, scope, names)
        self.hoist: tuple[int, int, Scope, set[str]] | None = None
        # The loop variables of the loop the hoisted values are declared before, and whether it runs at least once
        # (an index is read before it only then: in an empty loop an empty tensor's index is never read).
        self.hoisted_over: set[str] = set()
        self.hoisted_over_runs = False
        self.masked_depth = 0  # how many blocks entered only where a condition holds enclose the code written
        self.column = ""  # a column reduction's column variable (its block, lane and count are named after it)
        self.flat_inner = index_text(flatten([Index.of(v) for v in kernel.inner], [v.size for v in kernel.inner]))
        self.faults: list[tuple[IndexFault, str]] = []  # its indirect loads' errors and sizes, by site (1, 2, ...)

    def tmp(self) -> str:
        self.counter += 1
        return f"t{self.counter}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def value(self, expr: Expr, scope: Scope, depth: int) -> str:
        hit = scope.lookup(expr)
        if hit is not None:
            return hit
        if expr.op == "const":
            return literal(expr.args[0], expr.dtype)
        if expr.op == "masked":
            return self._masked(expr, scope, depth)
        operands: list[str] | None = None  # the variables an op reads: it may be hoisted if they are the row's
        if expr.op == "index":
            text = f"static_cast<int64_t>({index_text(expr.args[0])})"
        elif expr.op == "size":
            text = f"static_cast<{compute_ctype(expr.dtype)}>({size_text(expr.args[0])})"
        elif expr.op == "load":
            name, index = expr.args[:2]
            if len(expr.args) > 2:
                index = self._checked_index(expr, scope, depth)
            local = scope.local(name)
            if local is not None and index == self.store_index.get(name):
                return local
            if name in self.scratch and index == self.store_index.get(name):
                return f"scratch_{name}[{self.flat_inner}]"
            raw = f"{self.ptr[name]}[{index_text(index)}]"
            text = f"dj_bf16_to_float({raw})" if expr.dtype == torch.bfloat16 else raw
        elif expr.op == "cast":
            operands = [self.value(expr.args[0], scope, depth)]
            text = self._cast(operands[0], expr.args[0].dtype, expr.dtype)
        else:
            args = operands = [self.value(a, scope, depth) for a in expr.args]
            template = OPS.get(expr.op)
            if expr.op == "pow" and expr.dtype.is_floating_point:
                exponent = expr.args[1]
                small = exponent.op == "const" and exponent.args[0] in SMALL_POWERS
                # x**2 and x**3 (gelu's tanh form, variances) as products: exact in IEEE, and no libm call.
                template = SMALL_POWERS[exponent.args[0]] if small else "dj_m_pow{F}({0}, {1})"
            if template is None:
                raise NotImplementedError(f"inductor-lite C++ codegen: no rendering for op {expr.op!r}")
            ctype = compute_ctype(expr.args[-1].dtype if expr.op == "where" else expr.dtype)
            text = template.format(*args, T=ctype, F="f" if ctype == "float" else "")
            if expr.dtype in ROUND:  # eager rounds every 16-bit result; so do we
                text = f"{ROUND[expr.dtype]}({text})"
        if operands is not None and self._same_for_the_row(expr, operands):
            return self._hoisted(expr, text)
        name = self.tmp()
        self.emit(depth, f"const {compute_ctype(expr.dtype)} {name} = {text};")
        scope.cse[expr] = name
        return name

    def _checked_index(self, expr: Expr, scope: Scope, depth: int) -> Index:
        """An indirect load's index, its stand-in variable replaced by the value it reads, kept in range (see
        ``dj_in_range``); the value joins its site's least and largest, which the kernel checks after its loops."""
        _, index, slot, value, fault = expr.args
        site_key = (fault, size_text(slot.size))
        if site_key not in self.faults:
            self.faults.append(site_key)
        site = self.faults.index(site_key) + 1
        hoist, mark = self.hoist, len(self.lines)
        # (never out of a block a condition guards: the value may be read only where it holds, a concatenation's)
        outside = (
            hoist is not None
            and self.hoisted_over_runs
            and not self.masked_depth
            and not _uses(value, self.hoisted_over)
            # (and only from memory the kernel reads: a value of its own is computed in the loop, not before it)
            and not {name for name, _ in loads(value)} & self.store_index.keys()
        )
        if outside:
            # The same index for the whole loop (an embedding's row, read along the row): read and checked once
            # before the loop, whose loads then stay contiguous vector loads.
            assert hoist is not None
            self.hoist, scope, depth = None, hoist[2], hoist[1]
        if not loads(value) and not outside:  # (one read before the loop is not the vectoriser's: see _source)
            self.computed_index = True
        read = self.value(value, scope, depth)
        self.emit(depth, f"dj_lo{site} = {read} < dj_lo{site} ? {read} : dj_lo{site};")
        self.emit(depth, f"dj_hi{site} = {read} > dj_hi{site} ? {read} : dj_hi{site};")
        name = self.tmp()
        self.emit(depth, f"const int64_t {name} = dj_in_range({read}, {site_key[1]});")
        if outside:
            assert hoist is not None
            moved = self.lines[mark:]
            del self.lines[mark:]
            self.lines[hoist[0] : hoist[0]] = moved
            self.hoist = (hoist[0] + len(moved), *hoist[1:])
        return index.subs({slot.name: Index.of(Var(name, slot.size))})

    def _same_for_the_row(self, expr: Expr, operands: list[str]) -> bool:
        """Whether ``expr``, inside a group's loop, reads only constants and values of the row (its reductions'
        results and what was computed from them), in floating point or bool, which cannot trap: computed once
        before the loop, it leaves the loop lean enough for g++ to vectorise (a layer norm's statistics beside
        GELU kept it scalar, 7x slower)."""
        if self.hoist is None or any(
            not (a.dtype.is_floating_point or a.dtype == torch.bool) for a in (expr, *expr.args)
        ):
            return False
        names = self.hoist[3]
        return all(a.op == "const" or name in names for a, name in zip(expr.args, operands))

    def _hoisted(self, expr: Expr, text: str) -> str:
        """Declare ``expr`` (rendered as ``text``) before the group's loop, for the whole group to reuse."""
        assert self.hoist is not None
        line, depth, scope, names = self.hoist
        name = self.tmp()
        self.lines.insert(line, "  " * depth + f"const {compute_ctype(expr.dtype)} {name} = {text};")
        self.hoist = (line + 1, depth, scope, names)
        names.add(name)
        scope.cse[expr] = name
        return name

    def _masked(self, expr: Expr, scope: Scope, depth: int) -> str:
        """The value computed in a block entered only where the condition holds (its loads may be invalid
        elsewhere); g++ still vectorises the loop, with masked loads."""
        cond = self.value(expr.args[0], scope, depth)
        name = self.tmp()
        ctype = compute_ctype(expr.dtype)
        self.emit(depth, f"{ctype} {name} = {ctype}(0);")
        self.emit(depth, f"if ({cond}) {{")
        self.guarded = True
        self.masked_depth += 1
        inner = self.value(expr.args[1], Scope(scope), depth + 1)  # its temporaries stay inside the block
        self.masked_depth -= 1
        self.emit(depth + 1, f"{name} = {inner};")
        self.emit(depth, "}")
        scope.cse[expr] = name
        return name

    @staticmethod
    def _cast(text: str, src: torch.dtype, dst: torch.dtype) -> str:
        if dst == torch.bool:
            return f"({text} != 0)"
        ctype = "float" if dst in ROUND else compute_ctype(dst)
        if dst.is_floating_point and not src.is_floating_point and src != torch.bool:
            # g++ (-fno-trapping-math) folds a float's round trip through an integer, (float)(int64_t)x, into
            # trunc(x), which keeps the sign of a zero: -0.2 became -0.0 where the integer is 0, and -1 / it +inf
            # for eager's -inf (an added 0 is folded away first: an integer's float is never -0). A zero integer
            # is converted apart, to +0; any other is at least 1 in size, where trunc is exact.
            text = f"({text} != 0 ? static_cast<{ctype}>({text}) : {ctype}(0))"
        elif src.is_floating_point and dst in (torch.int32, torch.int64):
            text = f"dj_float_to_int<{ctype}>({text})"
        elif src.is_floating_point and dst in (torch.int8, torch.uint8, torch.int16):
            # eager converts to int32 first and keeps the low bits (1000.0 is -24 as int8); a direct cast is
            # undefined out of range, and g++ folded a known 1000.0 to 127
            text = f"static_cast<{ctype}>(dj_float_to_int<int32_t>({text}))"
        else:
            text = f"static_cast<{ctype}>({text})"
        return f"{ROUND[dst]}({text})" if dst in ROUND else text

    def store(self, placed: Placed, value: str, depth: int) -> None:
        dtype = placed.buf.dtype
        target = f"{self.ptr[placed.buf.name]}[{index_text(placed.store)}]"
        if dtype == torch.bfloat16:
            value = f"dj_float_to_bf16({value})"
        elif dtype == torch.float16:
            value = f"static_cast<_Float16>({value})"
        elif dtype == torch.bool:
            value = f"static_cast<bool>({value})"
        self.emit(depth, f"{target} = {value};")

    # ---------------------------------------------------------------- structure
    def write(self) -> str:
        k = self.kernel
        names = _parameter_order(k)
        params = []
        for i, name in enumerate(names):
            self.ptr[name] = f"p{i}"
        written = {b.name for b in k.stored_buffers()}
        buffers = {p.buf.name: p.buf for p in k.nodes}
        self.param_names = names
        for i, name in enumerate(names):
            dtype = self.dtypes[name] if name not in buffers else buffers[name].dtype
            qual = "" if name in written else "const "
            # An output the wrapper may write over an input it reads (at the same index) aliases it.
            restrict = "" if k.overwritable and (name in written or name in k.overwritable) else " __restrict__"
            self.param_types.append(f"{qual}{storage_ctype(dtype)}*")
            params.append(f"{self.param_types[-1]}{restrict} p{i}")
        self.symbols = k.symbols()
        params += [f"const int64_t {name}" for name in self.symbols]
        self.emit(0, f'extern "C" void {k.name}({", ".join(params)}) {{')
        depth = 1
        work = k.work_size()
        # A symbolic amount of work decides at run time (OpenMP's if clause), with chunks computed from it.
        runtime = not isinstance(work, int)
        parallel = bool(k.outer) and (runtime or work >= self.options.parallel_threshold)
        threads = f" num_threads({self.options.num_threads})" if self.options.num_threads else ""
        if runtime:
            threads += f" if({size_text(work)} >= {self.options.parallel_threshold})"
        if is_column_reduction(k):
            self._column_reduction(depth, parallel, threads)
            self.emit(0, "}")
            return self._source()
        row_scope = Scope()
        outer = list(k.outer)
        if not k.inner and outer:
            vector_loop = outer.pop()  # the innermost loop of a pointwise kernel stays serial and vectorised
        else:
            vector_loop = None
        if parallel and (outer or vector_loop is not None):
            # Dynamic chunks: a thread that loses its core to another process does not hold up the others.
            n = len(outer)
            if n == 0:
                assert vector_loop is not None
                size = vector_loop.size
                chunk: Any = max(1024, size // 64 // 64 * 64) if isinstance(size, int) else None
                if chunk is None:
                    chunk = f"dj_imax(1024, {size_text(size)} / 64 / 64 * 64)"
                self.emit(depth, f"#pragma omp parallel for simd schedule(dynamic, {chunk}){threads}")
            else:
                collapse = f" collapse({n})" if n > 1 else ""
                rows = _sym.prod(v.size for v in outer)
                chunk = max(1, rows // 32) if isinstance(rows, int) else f"dj_imax(1, {size_text(rows)} / 32)"
                self.emit(depth, f"#pragma omp parallel for{collapse} schedule(dynamic, {chunk}){threads}")
        for var in outer:
            self.emit(depth, f"for (int64_t {var.name} = 0; {var.name} < {size_text(var.size)}; {var.name}++) {{")
            depth += 1
        if vector_loop is not None:
            if outer:
                # (only an indirect load's index is hoisted out of it: row values are a group's)
                self.hoist, self.hoisted_over = (len(self.lines), depth, row_scope, set()), {vector_loop.name}
                self.hoisted_over_runs = _sym.provably_lt(0, vector_loop.size)
                # The loop's own temporaries in a block of their own: a hoisted index must not reuse one of them
                # (a load of the same element made in the loop is declared there, after the hoisted line).
                row_scope = Scope(row_scope)
            if outer or not parallel:
                # Iterations are independent (each writes its own elements), and the pragma lets calls to the
                # math functions declared `simd` above use their vector versions.
                self.emit(depth, "#pragma omp simd")
            self.emit(
                depth,
                f"for (int64_t {vector_loop.name} = 0; {vector_loop.name} < {size_text(vector_loop.size)}; "
                f"{vector_loop.name}++) {{",
            )
            depth += 1
        inner_numel = _sym.prod(v.size for v in k.inner)
        for name, p in self.scratch.items():
            ctype = compute_ctype(p.expr.dtype)
            if isinstance(inner_numel, int):
                self.emit(depth, f"{ctype} scratch_{name}[{inner_numel}];")
                continue
            # A symbolic row may be long: a per-thread heap buffer, grown on demand, instead of the stack.
            # std::vector<bool> packs bits and has no data(): a bool row is kept as bytes.
            row, element = size_text(inner_numel), "unsigned char" if ctype == "bool" else ctype
            self.emit(depth, f"static thread_local std::vector<{element}> scratch_{name}_v;")
            self.emit(
                depth, f"if (static_cast<int64_t>(scratch_{name}_v.size()) < {row}) scratch_{name}_v.resize({row});"
            )
            self.emit(
                depth,
                f"{ctype}* __restrict__ scratch_{name} = reinterpret_cast<{ctype}*>(scratch_{name}_v.data());",
            )
            self.includes = "#include <vector>\n"
        for kind, nodes in k.steps:
            if kind == "row":
                self._pointwise(nodes[0], row_scope, depth)
            elif k.inner:
                self._group(nodes, row_scope, depth)
            else:
                for p in nodes:
                    self._pointwise(p, row_scope, depth)
        self.hoist = None
        while depth > 1:
            depth -= 1
            self.emit(depth, "}")
        self.emit(0, "}")
        return self._source()

    def _source(self) -> str:
        """The kernel's text. A reduction with a guarded load is built without loop if-conversion: GCC 12's
        vectoriser turned such a read into zeros (a sum of rows read through a slice's scatter); a pointwise loop
        keeps it, since its selects vectorise through it. A reduction reading at an index it computes from its
        loop variables is built without loop vectorisation: GCC 12.2's summed the wrong elements of
        ``gather(x, -1, (arange(8).view(4, 2) * 5 + 3) % 2).sum()`` at -O3 (right at -O2; fuzz a92-1:471). An index
        the same for the whole loop is computed before it (a position embedding's row at ``arange``), so it keeps
        the vectoriser: without it, the embeddings benchmark's lookups and LayerNorm ran 4.5 times slower."""
        disabled = [
            flag
            for flag, applies in (
                ("no-tree-loop-if-convert", self.guarded),
                ("no-tree-loop-vectorize", self.computed_index),
            )
            if applies and self.kernel.is_reduction
        ]
        if disabled:
            attribute = ", ".join(f'"{flag}"' for flag in disabled)
            self.lines[0] = self.lines[0].replace(
                'extern "C" ', f'extern "C" __attribute__((optimize({attribute}))) ', 1
            )
        if self.faults:
            self._check_indices()
        return "\n".join(self.lines)

    def _check_indices(self) -> None:
        """Give each indirect load site its least and largest index, reduced by every loop, and after the loops
        report the first site out of range to the Python entry (through the ``dj_fault`` parameter)."""
        sites = range(1, len(self.faults) + 1)
        clauses = "".join(f" reduction(min:dj_lo{k}) reduction(max:dj_hi{k})" for k in sites)
        lines = [line + clauses if line.lstrip().startswith("#pragma omp") else line for line in self.lines]
        checks = [
            f"  if (dj_lo{k} < 0 || dj_hi{k} >= {size}) {{ *dj_fault = {{{k}, dj_lo{k} < 0 ? dj_lo{k} : dj_hi{k}, {size}}}; return; }}"
            for k, (_, size) in zip(sites, self.faults, strict=True)
        ]
        declarations = [f"  int64_t dj_lo{k} = INT64_MAX, dj_hi{k} = INT64_MIN;" for k in sites]
        signature = lines[0].removesuffix(") {") + ", dj_fault_t* dj_fault) {"
        self.lines = [signature, *declarations, *lines[1:-1], *checks, lines[-1]]

    def _pointwise(self, p: Placed, scope: Scope, depth: int) -> None:
        """A full or row node: compute its value into a local, store it if something reads memory."""
        v = self.value(p.expr, scope, depth)
        scope.locals[p.buf.name] = v
        if p.scratch:
            self.emit(depth, f"scratch_{p.buf.name}[{self.flat_inner}] = {v};")
        if p.stored:
            self.store(p, v, depth)

    def _group(self, nodes: list[Placed], row_scope: Scope, depth: int) -> None:
        k = self.kernel
        reductions = [p for p in nodes if p.role == "reduce"]
        accs = {}
        self.emit(depth, "{")
        self._block_start = len(self.lines)
        depth += 1
        for p in reductions:
            acc = f"acc_{p.buf.name}"
            accs[p.buf.name] = acc
            ctype = compute_ctype(p.expr.dtype)
            if p.buf.reduction_type in ("argmax", "argmin"):
                init = extreme("LOWEST" if p.buf.reduction_type == "argmax" else "HIGHEST", p.expr.dtype)
                self.emit(depth, f"{ctype} {acc}_v = {init}; int64_t {acc} = 0;")
            else:
                self.emit(depth, f"{ctype} {acc} = {initial_value(p)};")
        group_scope = Scope(row_scope)
        row_names = {*self.row_results, *row_scope.cse.values(), *row_scope.locals.values()}
        self.hoist = (len(self.lines), depth, group_scope, row_names)
        self.hoisted_over = {v.name for v in k.inner}
        self.hoisted_over_runs = all(_sym.provably_lt(0, v.size) for v in k.inner)
        lanes = self.options.vector_lanes
        use_lanes = (
            lanes > 0
            and len(k.inner) == 1
            and reductions
            and all(p.buf.reduction_type in REDUCE for p in reductions)
            and _sym.hint(k.inner[0].size) >= 2 * lanes
        )
        var = k.inner
        block = self._sum_block(reductions)
        lo, hi = ("0", size_text(var[0].size)) if len(var) == 1 else ("", "")
        if block:
            # A long float sum adds blocks' sums into a double: a float accumulator per lane took in up to n / lanes
            # values, each addition rounding (4M values summed 80x further from the exact sum than eager's cascade).
            r = var[0]
            for p in reductions:
                self.emit(depth, f"{self._block_ctype(p)} {accs[p.buf.name]}_blocks = {initial_value(p)};")
            self.emit(depth, f"for (int64_t {r.name}_lo = 0; {r.name}_lo < {hi}; {r.name}_lo += {block}) {{")
            depth += 1
            lo, hi = f"{r.name}_lo", f"{r.name}_hi"
            end = size_text(r.size)
            self.emit(depth, f"const int64_t {hi} = {r.name}_lo + {block} < {end} ? {r.name}_lo + {block} : {end};")
            for p in reductions:
                self.emit(depth, f"{accs[p.buf.name]} = {initial_value(p)};")
        if use_lanes:
            r = var[0]
            for p in reductions:
                self.emit(depth, f"{compute_ctype(p.expr.dtype)} {accs[p.buf.name]}_l[{lanes}];")
                self.emit(depth, f"for (int l = 0; l < {lanes}; l++) {accs[p.buf.name]}_l[l] = {accs[p.buf.name]};")
            self.emit(depth, f"const int64_t {r.name}_end = {hi} - ({hi} - {lo}) % {lanes};")
            self.emit(depth, f"for (int64_t {r.name}_b = {lo}; {r.name}_b < {r.name}_end; {r.name}_b += {lanes}) {{")
            self.emit(depth + 1, f"for (int64_t {r.name}_l = 0; {r.name}_l < {lanes}; {r.name}_l++) {{")
            self.emit(depth + 2, f"const int64_t {r.name} = {r.name}_b + {r.name}_l;")
            self._body(nodes, group_scope, depth + 2, accs, lane=f"{r.name}_l")
            self.emit(depth + 1, "}")
            self.emit(depth, "}")
            for p in reductions:
                acc = accs[p.buf.name]
                combine = REDUCE[p.buf.reduction_type][1]
                t = compute_ctype(p.expr.dtype)
                self.emit(
                    depth, f"for (int l = 0; l < {lanes}; l++) {acc} = {combine.format(a=acc, v=acc + '_l[l]', T=t)};"
                )
            self.emit(depth, f"for (int64_t {r.name} = {r.name}_end; {r.name} < {hi}; {r.name}++) {{")
            self._body(nodes, group_scope, depth + 1, accs, lane=None)
            self.emit(depth, "}")
        elif len(k.inner) == 1 and all(p.buf.reduction_type in SIMD_REDUCE for p in reductions):
            # OpenMP SIMD reductions: the one reassociation we allow, and only of the accumulators.
            clauses = []
            for p in reductions:
                acc = accs[p.buf.name]
                clauses.append(f"reduction({SIMD_REDUCE[p.buf.reduction_type]}:{acc})")
                if p.buf.reduction_type in ("max", "min") and p.expr.dtype.is_floating_point:
                    # An int flag or-reduced with `|` vectorises; a bool with `||` keeps the loop scalar (2x slower).
                    self.emit(depth, f"int {acc}_nan = 0;")
                    clauses.append(f"reduction(|:{acc}_nan)")
            r = var[0]
            self.emit(depth, f"#pragma omp simd {' '.join(clauses)}")
            self.emit(depth, f"for (int64_t {r.name} = {lo}; {r.name} < {hi}; {r.name}++) {{")
            self._body(nodes, group_scope, depth + 1, accs, lane=None, simd=True)
            self.emit(depth, "}")
            for p in reductions:
                acc = accs[p.buf.name]
                if p.buf.reduction_type in ("max", "min") and p.expr.dtype.is_floating_point:
                    nan = f"dj_nan<{compute_ctype(p.expr.dtype)}>()"
                    self.emit(depth, f"if ({acc}_nan) {acc} = {nan};")
        else:
            d = depth
            for v in var:
                self.emit(d, f"for (int64_t {v.name} = 0; {v.name} < {size_text(v.size)}; {v.name}++) {{")
                d += 1
            self._body(nodes, group_scope, d, accs, lane=None)
            for _ in var:
                d -= 1
                self.emit(d, "}")
        if block:
            for p in reductions:
                acc, t = accs[p.buf.name], self._block_ctype(p)
                combine = REDUCE[p.buf.reduction_type][1].format(a=f"{acc}_blocks", v=f"({t}){acc}", T=t)
                self.emit(depth, f"{acc}_blocks = {combine};")
            depth -= 1
            self.emit(depth, "}")
            for p in reductions:
                self.emit(depth, f"{accs[p.buf.name]} = ({compute_ctype(p.expr.dtype)}){accs[p.buf.name]}_blocks;")
        self.hoist = None
        finals = []
        for p in reductions:
            acc = accs[p.buf.name]
            final = f"{acc}_final"
            ctype = "int64_t" if p.buf.reduction_type in ("argmax", "argmin") else compute_ctype(p.expr.dtype)
            # Declared outside the block so later steps of the row can read it.
            self.lines.insert(self._block_start - 1, "  " * (depth - 1) + f"{ctype} {final};")
            self.emit(depth, f"{final} = {acc};")
            finals.append((p, final))
        depth -= 1
        self.emit(depth, "}")
        for p, final in finals:
            row_scope.locals[p.buf.name] = final
            self.row_results.add(final)
            if p.stored:
                self.store(p, final, depth)

    def _sum_block(self, reductions: list[Placed]) -> int:
        """The block length of a row whose float sums add blocks' sums in double, or 0 to reduce the row whole:
        rows of one loop with a float sum, whose reductions all combine blockwise, and not known to be short."""
        var = self.kernel.inner
        if len(var) != 1 or not any(self._block_ctype(p) == "double" for p in reductions):
            return 0
        if any(p.buf.reduction_type not in REDUCE for p in reductions):
            return 0
        size = _sym.norm(var[0].size)
        return 0 if isinstance(size, int) and size <= 2 * SUM_BLOCK else SUM_BLOCK

    @staticmethod
    def _block_ctype(p: Placed) -> str:
        """The type the blocks of a reduction combine in: double for a float sum, else its own."""
        floats = (torch.float32, torch.float16, torch.bfloat16)
        return "double" if p.buf.reduction_type == "sum" and p.expr.dtype in floats else compute_ctype(p.expr.dtype)

    def _body(
        self,
        nodes: list[Placed],
        row_scope: Scope,
        depth: int,
        accs: dict[str, str],
        lane: str | None,
        simd: bool = False,
    ) -> None:
        scope = Scope(row_scope)
        for p in nodes:
            if p.role == "full":
                self._pointwise(p, scope, depth)
                continue
            v = self.value(p.expr, scope, depth)
            acc = accs[p.buf.name]
            rtype = p.buf.reduction_type
            t = compute_ctype(p.expr.dtype)
            if rtype in ("argmax", "argmin"):
                cmp = ">" if rtype == "argmax" else "<"
                pos = index_text(p.rindex_flat)
                self.emit(
                    depth,
                    f"if ({v} {cmp} {acc}_v || ({v} != {v} && {acc}_v == {acc}_v)) {{ {acc}_v = {v}; {acc} = {pos}; }}",
                )
                continue
            if simd:
                self.emit(depth, f"{acc} = {SIMD_COMBINE[rtype].format(a=acc, v=v)};")
                if rtype in ("max", "min") and p.expr.dtype.is_floating_point:
                    self.emit(depth, f"{acc}_nan |= ({v} != {v});")
                continue
            target = f"{acc}_l[{lane}]" if lane else acc
            self.emit(depth, f"{target} = {REDUCE[rtype][1].format(a=target, v=v, T=t)};")


def _uses(expr: Expr, names: set[str]) -> bool:
    """Whether ``expr`` reads any of the loop variables ``names`` (in an index it loads at or computes)."""
    for e in walk(expr):
        if (e.op == "load" and e.args[1].variables() & names) or (e.op == "index" and e.args[0].variables() & names):
            return True
    return False


def kernel_source(
    kernel: Kernel, dtypes: dict[str, torch.dtype], options: CppOptions
) -> tuple[str, list[str], list[str]]:
    """The C++ function for ``kernel``, the buffer names of its pointer parameters and its shape symbols, in order."""
    writer = _KernelWriter(kernel, options, dtypes)
    body = writer.write()
    faults = [fault for fault, _ in writer.faults]
    text = body + python_entry(kernel.name, writer.param_types, len(writer.symbols), faults)
    return _numbered_locals(writer.includes + text), writer.param_names, writer.symbols


def _parameter_order(kernel: Kernel) -> list[str]:
    """The buffers ``kernel`` reads from memory or writes, in the order its nodes first name them: the signature of
    a kernel depends on what it computes, not on how its buffers are named (see ``_numbered_locals``)."""
    wanted = kernel.memory_reads | {b.name for b in kernel.stored_buffers()}
    named = [name for p in kernel.nodes for name in [*(n for n, _ in loads(p.expr)), p.buf.name]]
    order = [name for name in dict.fromkeys(named) if name in wanted]
    return order + sorted(wanted.difference(order))


# A buffer's name reaches the C++ only inside the names of the kernel's own locals (``acc_buf12_final``,
# ``scratch_buf3``). Numbered from 0 in each kernel, the kernels of two blocks of one shape are the same text,
# which the build compiles once (a transformer's layers: distilbert's 10 kernels are 7 bodies).
_BUFFER_IN_A_LOCAL = re.compile(r"(?<=_)buf\d+(?!\d)")


def _numbered_locals(text: str) -> str:
    numbers: dict[str, str] = {}
    return _BUFFER_IN_A_LOCAL.sub(lambda m: numbers.setdefault(m.group(), f"v{len(numbers)}"), text)
