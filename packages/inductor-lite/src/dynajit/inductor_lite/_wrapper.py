"""The generated Python wrapper: allocate buffers, call kernels and extern ops, return the outputs.

Everything known at compile time (sizes, strides, dtypes, kernel handles, op objects) is bound
into the wrapper's namespace, so a call does only allocations, ``data_ptr()`` reads and calls.
Buffers are freed after their last use, and a dead buffer of the same layout is reused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from dynajit.inductor_lite._graph import ExternArg, LoweredGraph
from dynajit.inductor_lite._ir import ExternBuffer
from dynajit.inductor_lite._scheduler import Kernel

__all__ = ["WrapperBuilder", "restride"]


def _aliases(item: ExternBuffer) -> bool:
    schema = getattr(item.target, "_schema", None)
    if schema is None:
        return item.target is not None
    return any(r.alias_info is not None for r in schema.returns)


def restride(t: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """``t`` with the strides the kernels were compiled for (a copy only if aten chose others)."""
    if t.stride() == stride or t.numel() <= 1:
        return t
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


class WrapperBuilder:
    """Writes the ``call(args)`` function for one lowered, scheduled graph."""

    def __init__(self, graph: LoweredGraph, items: list[Kernel | ExternBuffer]) -> None:
        self.graph = graph
        self.items = items
        self.namespace: dict[str, Any] = {
            "torch": torch,
            "empty_strided": torch.empty_strided,
            "as_strided": torch.as_strided,
            "restride": restride,
            "device": torch.device,
            "inf": math.inf,
            "nan": math.nan,
        }
        self.lines: list[str] = []

    def bind(self, value: Any, prefix: str) -> str:
        name = f"{prefix}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def arg_text(self, arg: Any) -> str:
        if isinstance(arg, ExternArg):
            if arg.natural:
                return arg.buffer
            return f"as_strided({arg.buffer}, {arg.size}, {arg.stride}, {arg.offset})"
        if isinstance(arg, (list, tuple)):
            inner = ", ".join(self.arg_text(a) for a in arg)
            return f"[{inner}]" if isinstance(arg, list) else f"({inner}{',' if len(arg) == 1 else ''})"
        if arg is None or isinstance(arg, (bool, int, str)) or (isinstance(arg, float) and math.isfinite(arg)):
            return repr(arg)
        return self.bind(arg, "c")

    def build(
        self, kernel_calls: dict[str, tuple[Callable[..., Any], list[str], bool]]
    ) -> tuple[Callable[..., Any], str]:
        """``kernel_calls`` maps a kernel name to (callable, parameter buffer names, whether it takes pointers)."""
        g = self.graph
        names = [b.name if b is not None else f"scalar{i}" for i, b in enumerate(g.inputs)]
        self.lines.append("def call(args):")
        if names:
            self.lines.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = args")
        self.lines.append("    args.clear()")
        for name, value in g.constants.items():
            self.namespace[name] = value
        last_use = self._last_uses()
        outputs = {o.arg.buffer for o in g.outputs if o.arg is not None}
        # Storage an extern result may alias (a view op called through aten) is never handed to another buffer.
        outputs |= {
            name for item in self.items if isinstance(item, ExternBuffer) and _aliases(item) for name in item.reads
        }
        free: dict[tuple, list[str]] = {}
        for pos, item in enumerate(self.items):
            if isinstance(item, Kernel):
                for buf in item.stored_buffers():
                    key = (buf.size, buf.stride, buf.dtype, buf.device)
                    if free.get(key):
                        self.lines.append(f"    {buf.name} = {free[key].pop()}")
                    else:
                        dtype = self.bind(buf.dtype, "dt")
                        dev = self.bind(buf.device, "dev")
                        self.lines.append(
                            f"    {buf.name} = empty_strided({buf.size}, {buf.stride}, dtype={dtype}, device={dev})"
                        )
                fn, params, pointers = kernel_calls[item.name]
                fname = self.bind(fn, item.name + "_")
                args = ", ".join(f"{p}.data_ptr()" if pointers else p for p in params)
                self.lines.append(f"    {fname}({args})")
            else:
                self._extern(item)
            for name in sorted(n for n, last in last_use.items() if last == pos and n not in outputs):
                dead = g.all_buffers.get(name)
                if dead is not None and not isinstance(dead, ExternBuffer) and name.startswith("buf"):
                    free.setdefault((dead.size, dead.stride, dead.dtype, dead.device), []).append(name)
                elif name.startswith("buf"):
                    self.lines.append(f"    del {name}")
        results = [self.arg_text(o.arg) if o.arg is not None else self.arg_text(o.constant) for o in g.outputs]
        self.lines.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
        source = "\n".join(self.lines)
        exec(compile(source, "<inductor_lite wrapper>", "exec"), self.namespace)
        return self.namespace["call"], source

    def _extern(self, item: ExternBuffer) -> None:
        if item.tuple_index is not None:
            self.lines.append(f"    {item.name} = restride({item.args[0]}[{item.tuple_index}], {item.stride})")
            return
        target = self.bind(item.target, "op")
        args = ", ".join(self.arg_text(a) for a in item.args)
        kwargs = ", ".join(f"{k}={self.arg_text(v)}" for k, v in item.kwargs.items())
        call = f"{target}({', '.join(x for x in (args, kwargs) if x)})"
        if item.size or item.stride:
            call = f"restride({call}, {item.stride})"
        self.lines.append(f"    {item.name} = {call}")

    def _last_uses(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for pos, item in enumerate(self.items):
            used = item.reads if isinstance(item, ExternBuffer) else item.memory_reads
            produced = [item.name] if isinstance(item, ExternBuffer) else [b.name for b in item.stored_buffers()]
            for name in [*used, *produced]:
                last[name] = pos
        return last
