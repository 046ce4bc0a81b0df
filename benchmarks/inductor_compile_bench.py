"""Eager vs torch.compile (inductor) vs dynajit inductor-lite on CPU, in one process.

Run: ``python benchmarks/inductor_compile_bench.py [--quick] [--only a,b] [--no-torch-compile]``.
For each workload it prints steady-state time per call, speedup over eager and cold compile time
(fresh cache directories), then warm compile times measured in a second process against the
caches the first one filled. torch.compile is called here only as the reference.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def pointwise_chain(x, y):
    return (torch.sigmoid(x * 1.5 + y) * torch.tanh(x - y)).relu() + 0.5


def softmax(x):
    return (torch.softmax(x, -1),)


def layer_norm(x, w, b):
    return (F.layer_norm(x, (x.shape[-1],), w, b),)


class MLP(nn.Module):
    def __init__(self, d=256, h=1024):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(d, h), nn.Linear(h, d), nn.LayerNorm(d)

    def forward(self, x):
        return (self.norm(x + self.fc2(F.gelu(self.fc1(x)))),)


class Block(nn.Module):
    def __init__(self, d=128, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp1, self.mlp2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads)), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return (x + self.mlp2(F.gelu(self.mlp1(self.ln2(x)))),)


def workloads():
    torch.manual_seed(0)
    return {
        "pointwise": (pointwise_chain, (torch.randn(1024, 1024), torch.randn(1024, 1024))),
        "softmax": (softmax, (torch.randn(1024, 1024),)),
        "layer_norm": (layer_norm, (torch.randn(4096, 256), torch.randn(256), torch.randn(256))),
        "mlp": (MLP().eval(), (torch.randn(512, 256),)),
        "transformer_block": (Block().eval(), (torch.randn(8, 64, 128),)),
    }


def timeit(fn, args, reps):
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        best = math.inf
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(reps):
                fn(*args)
            best = min(best, (time.perf_counter() - start) / reps)
    return best


def compile_dynajit(fn, args):
    from dynajit.inductor_lite import compile_fx

    gm = torch.fx.symbolic_trace(fn)
    with torch.no_grad():
        return compile_fx(gm, list(args))


def compile_times(names: list[str], with_torch_compile: bool) -> dict[str, tuple[float, float]]:
    """Compile time of each workload (dynajit, torch.compile), first call included."""
    out = {}
    for name, (fn, args) in workloads().items():
        if names and name not in names:
            continue
        start = time.perf_counter()
        compile_dynajit(fn, args)(*args)
        ours = time.perf_counter() - start
        ref = math.nan
        if with_torch_compile:
            torch._dynamo.reset()
            start = time.perf_counter()
            with torch.no_grad():
                torch.compile(fn)(*args)
            ref = time.perf_counter() - start
        out[name] = (ours, ref)
    return out


def child_compile_times(name: str, with_torch_compile: bool, env: dict[str, str]) -> tuple[float, float]:
    """Compile times of one workload measured in a fresh process with the given cache directories."""
    cmd = [sys.executable, __file__, "--compile-child", "--only", name]
    if not with_torch_compile:
        cmd.append("--no-torch-compile")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, **env})
    return tuple(json.loads(proc.stdout.strip().splitlines()[-1])[name])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--compile-child", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    # Import what both compilers share (AOT autograd, decompositions) before timing either.
    import functorch.compile  # noqa: F401
    import torch._decomp

    names = [n for n in opts.only.split(",") if n]
    if opts.compile_child:
        print(json.dumps(compile_times(names, not opts.no_torch_compile)))
        return
    os.environ.setdefault("DYNAJIT_CACHE_DIR", tempfile.mkdtemp(prefix="dynajit-bench-"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-"))
    reps = 5 if opts.quick else 20
    rows = []
    for name, (fn, args) in workloads().items():
        if opts.only and name not in opts.only.split(","):
            continue
        eager = timeit(fn, args, reps)
        start = time.perf_counter()
        ours = compile_dynajit(fn, args)
        ours(*args)
        ours_compile = time.perf_counter() - start
        with torch.no_grad():
            torch.testing.assert_close(ours(*args), fn(*args), rtol=1e-4, atol=1e-4)
        ours_t = timeit(ours, args, reps)
        row = [name, eager * 1e3, ours_t * 1e3, eager / ours_t, ours_compile]
        if not opts.no_torch_compile:
            torch._dynamo.reset()
            start = time.perf_counter()
            ref = torch.compile(fn)
            with torch.no_grad():
                ref(*args)
            ref_compile = time.perf_counter() - start
            ref_t = timeit(ref, args, reps)
            row += [ref_t * 1e3, eager / ref_t, ref_compile]
        rows.append(row)
        print(_fmt(row), flush=True)
    # Compile times in fresh processes: cold (empty caches), then warm (the caches the cold run filled).
    cold_total = [0.0, 0.0]
    for r in rows:
        env = {
            "DYNAJIT_CACHE_DIR": tempfile.mkdtemp(prefix="dynajit-bench-"),
            "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor-bench-"),
        }
        cold = child_compile_times(r[0], not opts.no_torch_compile, env)
        warm = child_compile_times(r[0], not opts.no_torch_compile, env)
        cold_total = [cold_total[0] + cold[0], cold_total[1] + cold[1]]
        print(
            f"{r[0]:18s} fresh-process compile: cold dynajit {cold[0]:6.2f}s torch.compile {cold[1]:6.2f}s"
            f" | warm dynajit {warm[0]:6.2f}s torch.compile {warm[1]:6.2f}s",
            flush=True,
        )
    if not opts.no_torch_compile:
        print(f"fresh-process cold compile ratio (dynajit / torch.compile) {cold_total[0] / cold_total[1]:.3f}")
    speedups = [r[3] for r in rows]
    print(f"dynajit geomean speedup {math.prod(speedups) ** (1 / len(speedups)):.2f}x", end="")
    if not opts.no_torch_compile:
        ref_speedups = [r[6] for r in rows]
        print(f"; torch.compile geomean {math.prod(ref_speedups) ** (1 / len(ref_speedups)):.2f}x", end="")
        print(f"; compile time ratio (dynajit / torch.compile) {sum(r[4] for r in rows) / sum(r[7] for r in rows):.3f}")
    print()


def _fmt(row):
    text = f"{row[0]:18s} eager {row[1]:8.3f} ms | dynajit {row[2]:8.3f} ms {row[3]:5.2f}x compile {row[4]:6.2f}s"
    if len(row) > 5:
        text += f" | torch.compile {row[5]:8.3f} ms {row[6]:5.2f}x compile {row[7]:6.2f}s"
    return text


if __name__ == "__main__":
    sys.exit(main())
