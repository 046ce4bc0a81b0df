"""Dynamic shapes: compiles and compile time over a sweep of batch sizes, dynajit vs torch.compile, one process.

Run: ``python benchmarks/dynamic_bench.py [--sizes 20] [--backend inductor]`` (also part of
``python benchmarks/run.py``). Each workload is called once per batch size, in a shuffled order
that starts with two sizes (the second call is where automatic dynamic shapes kick in). For each
implementation it counts compilations (graphs handed to the backend) and, for dynajit's inductor,
the aten graphs it generated kernels for (a backend that specialised on sizes would add one per
size), sums the time spent in calls that compiled, and checks every output against eager. Both use their default, ``dynamic=None``.
torch.compile is called here only as the reference.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A pre-norm transformer block with causal attention written out (dim 128, 4 heads)."""

    def __init__(self, dim: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).tril().logical_not(), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(256, 1024), nn.Linear(1024, 256), nn.LayerNorm(256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.fc2(F.gelu(self.fc1(x))))


WORKLOADS: dict[str, tuple[Callable[[], nn.Module], Callable[[int], torch.Tensor]]] = {
    "transformer_block (batch b x seq 64)": (Block, lambda b: torch.randn(b, 64, 128)),
    "mlp (batch b x 256)": (MLP, lambda b: torch.randn(b, 256)),
}


class Counting:
    """Wrap a backend: count the graphs it compiles."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.graphs = backend, 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
        self.graphs += 1
        return self.backend(gm, example_inputs, **kwargs)


def _dynajit(backend_name: str) -> tuple[Callable[[nn.Module, Counting], Any], Callable[[], None], Any]:
    import dynajit.compiler as dc
    from dynajit._dynamo import lookup_backend

    return (lambda m, c: dc.compile(m, backend=c)), dc.reset, lookup_backend(backend_name)


def _torch_compile() -> tuple[Callable[[nn.Module, Counting], Any], Callable[[], None], Any]:
    import torch._dynamo
    from torch._inductor.compile_fx import compile_fx

    return (lambda m, c: torch.compile(m, backend=c)), torch._dynamo.reset, compile_fx


def sweep(impl: str, make: Callable[[nn.Module, Counting], Any], reset: Callable[[], None], backend: Any,
          workload: str, sizes: list[int]) -> dict[str, Any]:  # fmt: skip
    """Call the compiled workload at each size; count compiles and the time of the calls that compiled."""
    build, make_input = WORKLOADS[workload]
    torch.manual_seed(0)
    model = build().eval()
    reset()
    counter = Counting(backend)
    compiled = make(model, counter)
    built_before = _aten_graphs_generated()
    compile_seconds, steady = 0.0, []
    mismatches = []
    with torch.no_grad():
        for size in sizes:
            x = make_input(size)
            before = counter.graphs
            start = time.perf_counter()
            out = compiled(x)
            seconds = time.perf_counter() - start
            if counter.graphs > before:
                compile_seconds += seconds
            else:
                steady.append(seconds)
            if not torch.allclose(out, model(x), rtol=1e-3, atol=1e-3):
                mismatches.append(size)
    built = _aten_graphs_generated() - built_before if impl.startswith("dynajit[inductor") else None
    return {
        "implementation": impl,
        "workload": workload,
        "compiles": counter.graphs,
        "kernel_graphs_generated": built,
        "compile_seconds": compile_seconds,
        "calls_without_compiling_ms": 1000 * sum(steady) / max(len(steady), 1),
        "mismatched_sizes": mismatches,
    }


def _aten_graphs_generated() -> int:
    """inductor-lite's count of aten graphs it generated code for (a new size of a static graph adds one)."""
    from dynajit.inductor_lite import cache_stats

    return cache_stats()["graphs_compiled"]


def format_table(rows: list[dict[str, Any]], sizes: list[int]) -> str:
    lines = [
        f"Batch sizes, in call order: {sizes}",
        "",
        "| workload | implementation | compiles | kernel graphs generated | time in compiling calls (s) "
        "| other calls, mean (ms) | matches eager |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ok = "yes" if not r["mismatched_sizes"] else f"no: {r['mismatched_sizes']}"
        lines.append(
            f"| {r['workload']} | {r['implementation']} | {r['compiles']} | {r['kernel_graphs_generated'] or '-'} | "
            f"{r['compile_seconds']:.2f} | "
            f"{r['calls_without_compiling_ms']:.2f} | {ok} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure, print the Markdown table and return the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, default=20, help="how many batch sizes (1..64) to sweep")
    parser.add_argument("--backend", default="inductor", help="the dynajit backend")
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args(argv if argv is not None else [])
    rng = random.Random(0)
    sizes = [8, 16, *rng.sample([s for s in range(1, 65) if s not in (8, 16)], args.sizes - 2)]
    impls = [(f"dynajit[{args.backend}]", *_dynajit(args.backend))]
    if not args.no_torch_compile:
        impls.append(("torch.compile", *_torch_compile()))
    rows = [sweep(name, make, reset, backend, w, sizes) for w in WORKLOADS for name, make, reset, backend in impls]
    print(format_table(rows, sizes))
    return {"sizes": sizes, "rows": rows}


if __name__ == "__main__":
    main(sys.argv[1:])
