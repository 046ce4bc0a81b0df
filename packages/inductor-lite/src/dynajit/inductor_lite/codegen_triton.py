"""Triton code generation from the same scheduled kernels as the C++ path.

A pointwise kernel flattens its loops into one block-strided ``xindex``; a row kernel runs one
program per row and walks the row in ``RBLOCK`` chunks, accumulating each reduction in a vector
that is reduced at the end of the loop. The module is written to the kernel cache as a ``.py``
file (``@triton.jit`` needs source on disk) and imported. For CPU tensors it runs under
``TRITON_INTERPRET=1``; math without a ``triton.language`` primitive then uses small helpers,
since the interpreter has no libdevice.

Kernels of dynamic graphs take their shape symbols as plain (not ``constexpr``) arguments, so one
kernel serves every size; block sizes are chosen from the example sizes and the launch grid is
computed from the symbols at each call.
"""

from __future__ import annotations

import hashlib
import importlib.util
import keyword
import math
import os
import threading
from collections.abc import Callable
from typing import Any

import torch

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._build import cache_dir, stats
from dynajit.inductor_lite._index import Index
from dynajit.inductor_lite._ir import Expr
from dynajit.inductor_lite._scheduler import Kernel, Placed, _inline

__all__ = ["build_kernels"]

_TL_DTYPE = {
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.bool: "tl.int1",
}


def _compute(dtype: torch.dtype) -> str:
    return "tl.float32" if dtype in (torch.float16, torch.bfloat16) else _TL_DTYPE[dtype]


HELPERS = """
import triton
import triton.language as tl


@triton.jit
def dj_max(a, b):
    return tl.where((a != a) | (a > b), a, b)


@triton.jit
def dj_min(a, b):
    return tl.where((a != a) | (a < b), a, b)


@triton.jit
def dj_tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def dj_trunc(x):
    return tl.where(x >= 0, tl.floor(x), tl.ceil(x))


@triton.jit
def dj_round(x):
    r = tl.floor(x + 0.5)
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0
    return tl.where((r - x == 0.5) & odd, r - 1.0, r)


@triton.jit
def dj_pow(a, b):
    b = b + tl.zeros_like(a)  # a constant exponent becomes a block, so the masks below combine elementwise
    mag = tl.exp2(tl.log2(tl.abs(a)) * b)
    odd = (b - 2.0 * tl.floor(b * 0.5)) == 1.0
    neg = (a < 0) & (tl.floor(b) == b)
    res = tl.where(neg & odd, -mag, mag)
    return tl.where(a == 0, tl.where(b == 0, 1.0, tl.where(b < 0, float("inf"), 0.0)), tl.where((a < 0) & (tl.floor(b) != b), float("nan"), res))


@triton.jit
def dj_ifloordiv(a, b):
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def dj_iremainder(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def dj_fremainder(a, b):
    r = a % b  # fmod for floats, as eager's remainder starts
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def dj_ffloordiv(a, b):
    # eager's floor division from the exact fmod (floor(a / b) rounds 1 // 0.1 to 10, inf // 2.5 to inf)
    mod = a % b
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    floored = tl.floor(div)
    floored = tl.where(div - floored > 0.5, floored + 1.0, floored)
    q = a / b
    zero = tl.where((q < 0) | ((q == 0) & (1.0 / q < 0)), -0.0, 0.0)
    return tl.where(b == 0, q, tl.where(div == 0, zero, floored))


@triton.jit
def dj_lshift(a, b):
    # eager's shift by a count past the width (or a negative one) shifts everything out; Triton's is undefined
    return tl.where((b < 0) | (b >= a.dtype.primitive_bitwidth), 0, a << b)


@triton.jit
def dj_rshift(a, b):
    width = a.dtype.primitive_bitwidth - a.dtype.is_int_signed()
    return tl.where((b < 0) | (b >= width), tl.where(a < 0, -1, 0), a >> b)


@triton.jit
def dj_sign(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)  # 0 for NaN, as eager's sign
"""

_OPS: dict[str, str] = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "truediv": "({0} / {1})",
    "neg": "(-{0})", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "exp2": "tl.exp2({0})", "expm1": "(tl.exp({0}) - 1.0)",
    "log": "tl.log({0})", "log2": "tl.log2({0})", "log10": "(tl.log({0}) * 0.4342944819032518)",
    "log1p": "tl.log(1.0 + {0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})", "sin": "tl.sin({0})",
    "cos": "tl.cos({0})", "tan": "(tl.sin({0}) / tl.cos({0}))", "sinh": "((tl.exp({0}) - tl.exp(-{0})) * 0.5)",
    "cosh": "((tl.exp({0}) + tl.exp(-{0})) * 0.5)", "tanh": "dj_tanh({0})", "sigmoid": "tl.sigmoid({0})",
    "erf": "tl.erf({0})", "gelu": "({0} * 0.5 * (1.0 + tl.erf({0} * 0.7071067811865476)))", "erfc": "(1.0 - tl.erf({0}))", "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
    "trunc": "dj_trunc({0})", "round": "dj_round({0})", "frac": "({0} - dj_trunc({0}))", "sign": "dj_sign({0})",
    "reciprocal": "(1.0 / {0})", "relu": "tl.where({0} < 0, 0, {0})", "maximum": "dj_max({0}, {1})",
    "minimum": "dj_min({0}, {1})", "clamp_min": "tl.where(({0} < {1}) | ({1} != {1}), {1}, {0})",
    "clamp_max": "tl.where(({0} > {1}) | ({1} != {1}), {1}, {0})", "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})",
    "le": "({0} <= {1})", "gt": "({0} > {1})", "ge": "({0} >= {1})", "logical_and": "(({0} != 0) & ({1} != 0))",
    "logical_or": "(({0} != 0) | ({1} != 0))", "logical_xor": "(({0} != 0) ^ ({1} != 0))", "logical_not": "({0} == 0)",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})", "lshift": "dj_lshift({0}, {1})",
    "rshift": "dj_rshift({0}, {1})", "isnan": "({0} != {0})", "isinf": "(tl.abs({0}) == float('inf'))",
    "signbit": "(({0} < 0) | ((1.0 / {0}) < 0))", "where": "tl.where({0}, {1}, {2})",
    "asinh": "tl.log({0} + tl.sqrt({0} * {0} + 1.0))", "acosh": "tl.log({0} + tl.sqrt({0} * {0} - 1.0))",
    "atanh": "(0.5 * tl.log((1.0 + {0}) / (1.0 - {0})))", "hypot": "tl.sqrt({0} * {0} + {1} * {1})",
}  # fmt: skip
# Ops rendered through libdevice on GPUs (no triton.language primitive or formula here); on CPU
# tensors the lowering calls them through aten instead, since the interpreter has no libdevice.
LIBDEVICE_ONLY = frozenset({"asin", "acos", "atan", "atan2", "lgamma", "copysign"})
_FLOAT_OR_INT = {
    "pow": ("dj_pow({0}, {1})", None),
    "floordiv": ("dj_ffloordiv({0}, {1})", "dj_ifloordiv({0}, {1})"),
    "truncdiv": ("dj_trunc({0} / {1})", "({0} // {1})"),
    "remainder": ("dj_fremainder({0}, {1})", "dj_iremainder({0}, {1})"),
    "fmod": ("({0} - dj_trunc({0} / {1}) * {1})", "({0} % {1})"),
    "bitwise_not": (None, "(~{0})"),
}
_REDUCE = {
    "sum": ("0", "{a} + {v}", "tl.sum({a}, 0)"),
    "prod": ("1", "{a} * {v}", "tl.reduce({a}, 0, dj_mul)"),
    "max": ("LOWEST", "dj_max({a}, {v})", "tl.reduce({a}, 0, dj_max)"),
    "min": ("HIGHEST", "dj_min({a}, {v})", "tl.reduce({a}, 0, dj_min)"),
    "any": ("0", "{a} | ({v} != 0)", "tl.max({a}.to(tl.int32), 0) != 0"),
    "all": ("1", "{a} & ({v} != 0)", "tl.min({a}.to(tl.int32), 0) != 0"),
}
HELPERS += """

@triton.jit
def dj_mul(a, b):
    return a * b
"""


def _index_text(index: Index) -> str:
    return index.source("//", _sym.kernel_py_text)


_size = _sym.kernel_py_text


def _is_literal(text: str) -> bool:
    """Whether generated ``text`` is a Python literal (``0.0``, ``True``) rather than a block variable."""
    return not text.isidentifier() or keyword.iskeyword(text)


def _literal(value: Any, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "True" if value else "False"
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return f'float("{"-" if value < 0 else ""}inf")'
        return repr(value)
    return repr((int(value) + 2**63) % 2**64 - 2**63)  # (a Python int past 64 bits wraps, as in eager)


class _TritonKernel:
    def __init__(self, kernel: Kernel, dtypes: dict[str, torch.dtype], block: int) -> None:
        self.kernel = kernel
        self.dtypes = dtypes
        self.block = block
        self.lines: list[str] = []
        self.counter = 0
        self.store_index = {p.buf.name: p.store for p in kernel.nodes}
        # Row scratch arrays are a C++ device: here later loops recompute those values instead.
        for dep in [p for p in kernel.nodes if p.scratch]:
            for p in kernel.nodes:
                p.expr = _inline(p.expr, dep.buf.name, dep.expr)
        self.params = sorted(kernel.memory_reads | {b.name for b in kernel.stored_buffers()})
        self.ptr = {name: f"p{i}" for i, name in enumerate(self.params)}
        self.mask = "xmask"
        self.conditions: list[str] = []  # of the masked values being computed
        vector_loops = kernel.inner if kernel.inner else kernel.outer
        self.vector_vars = {v.name for v in vector_loops}

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def value(self, expr: Expr, cse: dict, locals_: dict, depth: int) -> str:
        if expr in cse:
            return cse[expr]
        if expr.op == "const":
            return _literal(expr.args[0], expr.dtype)
        if expr.op == "masked":
            cond = self.value(expr.args[0], cse, locals_, depth)
            self.conditions.append(cond)
            # Loads under the condition are masked by it; their values are not reused outside it.
            inner = self.value(expr.args[1], dict(cse), locals_, depth)
            self.conditions.pop()
            text = f"tl.where({cond}, {inner}, 0)"
        elif expr.op == "index":
            text = f"({_index_text(expr.args[0])})"
        elif expr.op == "size":
            text = f"tl.full([], {_size(expr.args[0])}, {_compute(expr.dtype)})"
        elif expr.op == "load":
            if len(expr.args) > 2:  # (never made for Triton: its graphs call aten for _lower_indirect.INDIRECT)
                raise NotImplementedError("inductor-lite Triton codegen: no indirect loads")
            name, index = expr.args
            if name in locals_ and index == self.store_index.get(name):
                return locals_[name]
            address = self.address(name, index)
            mask = " & ".join(f"({m})" for m in [self.mask, *self.conditions] if m != "True")
            text = f"tl.load({address}, mask={mask}, other=0)" if mask else f"tl.load({address})"
            if expr.dtype in (torch.float16, torch.bfloat16):
                text += ".to(tl.float32)"
        elif expr.op == "cast":
            inner = self.value(expr.args[0], cse, locals_, depth)
            if _is_literal(inner):
                inner = f"tl.full([], {inner}, {_compute(expr.args[0].dtype)})"
            text = f"({inner} != 0)" if expr.dtype == torch.bool else f"({inner}).to({_compute(expr.dtype)})"
            if expr.dtype in (torch.float16, torch.bfloat16):
                text = f"({inner}).to({_TL_DTYPE[expr.dtype]}).to(tl.float32)"
        else:
            args = [self.value(a, cse, locals_, depth) for a in expr.args]
            template = _OPS.get(expr.op)
            if expr.op in _FLOAT_OR_INT:
                floating = expr.dtype.is_floating_point
                template = _FLOAT_OR_INT[expr.op][0 if floating else 1]
            if template is None and expr.op in LIBDEVICE_ONLY:
                if os.environ.get("TRITON_INTERPRET") == "1":
                    raise NotImplementedError(
                        f"inductor-lite Triton codegen: {expr.op!r} needs libdevice, which Triton's interpreter lacks; "
                        "it should have been lowered to an aten call"
                    )
                template = f"libdevice.{expr.op}(" + ", ".join(f"{{{i}}}" for i in range(len(args))) + ")"
            if template is None:
                raise NotImplementedError(
                    f"inductor-lite Triton codegen: no rendering for op {expr.op!r} ({expr.dtype})"
                )
            text = template.format(*args)
        name = f"t{self.counter}"
        self.counter += 1
        self.emit(depth, f"{name} = {text}")
        cse[expr] = name
        return name

    def address(self, name: str, index: Index) -> str:
        text = f"{self.ptr[name]} + ({_index_text(index)})"
        if self.mask != "True" and not index.variables() & self.vector_vars:
            # A block of identical addresses, so the block-shaped mask applies.
            text += f" + 0 * {'xindex' if self.mask == 'xmask' else 'rindex'}"
        return text

    def store(self, p: Placed, value: str, depth: int, mask: str) -> None:
        dtype = _TL_DTYPE[p.buf.dtype]
        address = self.address(p.buf.name, p.store)
        masking = "" if mask == "True" else f", mask={mask}"
        if _is_literal(value):  # a Python literal (True, 0.0) has no .to(): fill with it
            self.emit(depth, f"tl.store({address}, tl.full([], {value}, {dtype}){masking})")
            return
        self.emit(depth, f"tl.store({address}, tl.full([], 0, {dtype}) + ({value}).to({dtype}){masking})")

    def decompose(self, variables: list, flat: str, depth: int) -> None:
        stride = 1
        for var in reversed(variables):
            self.emit(depth, f"{var.name} = ({flat} // {_size(stride)}) % {_size(var.size)}")
            stride = _sym.norm(stride * var.size)

    def write(self) -> tuple[str, tuple[Any, ...], dict[str, int]]:
        """The kernel's source, its grid (sizes, possibly symbolic) and its constexpr block sizes."""
        k = self.kernel
        self.symbols = k.symbols()
        # Shape symbols are runtime values: Triton must not compile a variant per value (1, multiples of 16).
        self.emit(0, f"@triton.jit(do_not_specialize={self.symbols!r})" if self.symbols else "@triton.jit")
        params = [*self.ptr.values(), *self.symbols, "XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        self.emit(0, f"def {k.name}({', '.join(params)}):")
        outer_numel = _sym.prod(v.size for v in k.outer)
        if not k.inner:
            self.emit(1, "xindex = tl.program_id(0).to(tl.int64) * XBLOCK + tl.arange(0, XBLOCK)")
            self.emit(1, f"xmask = xindex < {_size(outer_numel)}")
            self.decompose(k.outer, "xindex", 1)
            cse: dict = {}
            locals_: dict = {}
            for _, nodes in k.steps:
                for p in nodes:
                    v = self.value(p.expr, cse, locals_, 1)
                    locals_[p.buf.name] = v
                    if p.stored:
                        self.store(p, v, 1, "xmask")
            block = min(self.block, _pow2(_sym.hint(outer_numel)))
            blocks = _sym.maximum(1, _sym.floordiv(_sym.norm(outer_numel + block - 1), block))
            return "\n".join(self.lines), (blocks,), {"XBLOCK": block, "RBLOCK": 1}
        self.emit(1, "xindex = tl.program_id(0).to(tl.int64)")
        self.decompose(k.outer, "xindex", 1)
        inner_numel = _sym.prod(v.size for v in k.inner)
        rblock = min(self.block, _pow2(_sym.hint(inner_numel)))
        row_cse: dict = {}
        row_locals: dict = {}
        self.mask = "True"
        for kind, nodes in k.steps:
            if kind == "row":
                p = nodes[0]
                v = self.value(p.expr, row_cse, row_locals, 1)
                row_locals[p.buf.name] = v
                if p.stored:
                    self.store(p, v, 1, "True")
                continue
            self._group(nodes, row_cse, row_locals, inner_numel)
        return "\n".join(self.lines), (outer_numel,), {"XBLOCK": 1, "RBLOCK": rblock}

    def _group(self, nodes: list[Placed], row_cse: dict, row_locals: dict, inner_numel: Any) -> None:
        reductions = [p for p in nodes if p.role == "reduce"]
        for p in reductions:
            acc = f"acc_{p.buf.name}"
            dt = _compute(p.expr.dtype)
            rtype = p.buf.reduction_type
            if rtype in ("argmax", "argmin"):
                init = _extreme("LOWEST" if rtype == "argmax" else "HIGHEST", p.expr.dtype)
                self.emit(1, f"{acc}_v = tl.full([RBLOCK], {init}, {dt})")
                self.emit(1, f"{acc}_i = tl.full([RBLOCK], 0, tl.int64)")
            else:
                init = _REDUCE[rtype][0]
                init = _extreme(init, p.expr.dtype) if init in ("LOWEST", "HIGHEST") else init
                self.emit(1, f"{acc} = tl.full([RBLOCK], {init}, {'tl.int1' if rtype in ('any', 'all') else dt})")
        self.emit(1, f"for roffset in range(0, {_size(inner_numel)}, RBLOCK):")
        self.emit(2, "rindex = roffset + tl.arange(0, RBLOCK)")
        self.emit(2, f"rmask = rindex < {_size(inner_numel)}")
        self.decompose(self.kernel.inner, "rindex", 2)
        self.mask = "rmask"
        cse = dict(row_cse)
        locals_ = dict(row_locals)
        for p in nodes:
            v = self.value(p.expr, cse, locals_, 2)
            if p.role == "full":
                locals_[p.buf.name] = v
                if p.stored:
                    self.store(p, v, 2, "rmask")
                continue
            acc = f"acc_{p.buf.name}"
            rtype = p.buf.reduction_type
            if rtype in ("argmax", "argmin"):
                cmp = ">" if rtype == "argmax" else "<"
                take = f"rmask & (({v} {cmp} {acc}_v) | (({v} != {v}) & ({acc}_v == {acc}_v)))"
                self.emit(2, f"take = {take}")
                self.emit(2, f"{acc}_v = tl.where(take, {v}, {acc}_v)")
                self.emit(2, f"{acc}_i = tl.where(take, ({_index_text(p.rindex_flat)}).to(tl.int64), {acc}_i)")
                continue
            combine = _REDUCE[rtype][1].format(a=acc, v=v)
            self.emit(2, f"{acc} = tl.where(rmask, {combine}, {acc})")
        self.mask = "True"
        for p in reductions:
            acc = f"acc_{p.buf.name}"
            rtype = p.buf.reduction_type
            if rtype in ("argmax", "argmin"):
                best = "dj_max" if rtype == "argmax" else "dj_min"
                self.emit(1, f"{acc}_best = tl.reduce({acc}_v, 0, {best})")
                hit = f"tl.where({acc}_best != {acc}_best, {acc}_v != {acc}_v, {acc}_v == {acc}_best)"
                self.emit(1, f"{acc}_final = tl.min(tl.where({hit}, {acc}_i, {2**62}), 0)")
            else:
                self.emit(1, f"{acc}_final = {_REDUCE[rtype][2].format(a=acc)}")
            row_locals[p.buf.name] = f"{acc}_final"
            if p.stored:
                self.store(p, f"{acc}_final", 1, "True")


def _extreme(which: str, dtype: torch.dtype) -> str:
    if dtype.is_floating_point:
        return f'float("{"-" if which == "LOWEST" else ""}inf")'
    if dtype == torch.bool:
        return "0" if which == "LOWEST" else "1"
    info = torch.iinfo(dtype)
    return str(info.min if which == "LOWEST" else info.max)


def _pow2(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def _launcher(fn: Any, grid: tuple[Any, ...], meta: dict[str, int], symbols: list[str]) -> Callable[..., None]:
    if all(isinstance(g, int) for g in grid):
        if 0 in grid:
            return lambda *tensors: None
        launch = fn[grid]

        def run(*tensors: torch.Tensor) -> None:
            launch(*tensors, **meta)

        return run
    # The grid depends on the shape symbols, which are the launch's trailing arguments.
    grid_of = eval(f"lambda {', '.join(symbols)}: ({', '.join(_size(g) for g in grid)},)", {"max": max})
    count = len(symbols)

    def run_dynamic(*args: Any) -> None:
        grid_now = grid_of(*args[-count:])
        if 0 not in grid_now:
            fn[grid_now](*args, **meta)

    return run_dynamic


def build_kernels(
    kernels: list[Kernel], dtypes: dict[str, torch.dtype], settings: dict[str, Any]
) -> tuple[dict[str, tuple[Callable[..., Any], list[str], bool, list[str]]], str]:
    """Write and import the Triton module for ``kernels``; returns launchers (taking tensors) and the source."""
    block = settings["triton_block"]
    parts = [HELPERS]
    plans = {}
    for kernel in kernels:
        writer = _TritonKernel(kernel, dtypes, block)
        text, grid, meta = writer.write()
        parts.append(text)
        plans[kernel.name] = (writer.params, grid, meta, writer.symbols)
    source = "\n\n".join(parts) + "\n"
    if not kernels:
        return {}, ""
    module = _import_source(source, settings["cache_dir"])
    calls = {}
    for name, (params, grid, meta, symbols) in plans.items():
        calls[name] = (_launcher(getattr(module, name), grid, meta, symbols), params, False, symbols)
    return calls, source


def _import_source(source: str, directory: str) -> Any:
    key = hashlib.sha256(source.encode()).hexdigest()[:40]
    folder = cache_dir(directory) / "triton"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"k{key}.py"
    if not path.exists() or path.read_text() != source:
        stats.builds += 1
        tmp = folder / f".k{key}.{os.getpid()}.{threading.get_ident()}.tmp"  # no name another writer shares
        tmp.write_text(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"dynajit_triton_{key}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"inductor-lite: cannot import generated Triton module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
