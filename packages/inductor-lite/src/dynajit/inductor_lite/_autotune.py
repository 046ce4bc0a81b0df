"""max-autotune and reduce-overhead.

``tune`` builds a graph once per candidate setting (thread count, reduction lanes, parallel
threshold for C++; block size for Triton), times each on inputs made like the example inputs,
and keeps the fastest. ``wrap_cudagraphs`` records the compiled graph into a CUDA graph on static
input buffers and replays it (CUDA only; on CPU, reduce-overhead changes nothing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from dynajit.inductor_lite import _sym

__all__ = ["example_tensor", "tune", "wrap_cudagraphs"]

log = logging.getLogger("dynajit.inductor_lite")
T = TypeVar("T")


def example_tensor(like: Any) -> Any:
    """A real tensor with the size, strides, dtype and device of ``like`` (which may be a fake tensor), random.

    Symbolic sizes take their example values (max-autotune tunes a dynamic graph at the example sizes). The
    values fill the memory the strides reach and are viewed with them, so an expanded layout (a stride 0 over a
    dim of several elements) is made as eager's expand makes it, where writing into it is refused.
    """
    if isinstance(like, torch.SymInt):
        return _sym.hint(like)
    if not isinstance(like, torch.Tensor):
        return like
    size = tuple(_sym.hint(s) for s in like.shape)
    stride = tuple(_sym.hint(s) for s in like.stride())
    extent = 0 if 0 in size else 1 + sum((n - 1) * abs(s) for n, s in zip(size, stride))
    # A generator of its own: drawing from the global one would change the numbers the user's program draws
    # next (a backward's kernels are compiled, and timed, while the user's backward runs).
    drawn = {"generator": torch.Generator(like.device).manual_seed(0), "device": like.device}
    if like.dtype == torch.bool:
        memory = torch.rand(extent, **drawn) > 0.5
    elif like.dtype.is_floating_point:
        memory = torch.randn(extent, **drawn).to(like.dtype)
    else:
        memory = torch.randint(0, 8, (extent,), **drawn).to(like.dtype)
    return memory.as_strided(size, stride)


def _time(call: Callable[[list[Any]], Any], inputs: Sequence[Any], budget: float = 0.05) -> float:
    call(list(inputs))
    best = float("inf")
    deadline = time.perf_counter() + budget
    runs = 0
    while runs < 3 or (time.perf_counter() < deadline and runs < 50):
        start = time.perf_counter()
        call(list(inputs))
        best = min(best, time.perf_counter() - start)
        runs += 1
    return best


def tune(build: Callable[[T], Callable[[list[Any]], Any]], candidates: Sequence[T], example_inputs: Sequence[Any]) -> T:
    """The candidate whose built graph runs fastest on inputs made like ``example_inputs``."""
    # AOT autograd calls compilers with its fake mode active: time on real tensors.
    with unset_fake_temporarily(), torch.no_grad():
        inputs = [example_tensor(x) for x in example_inputs]
        timings = []
        for candidate in candidates:
            try:
                timings.append((_time(build(candidate), inputs), candidate))
            except Exception as err:  # a candidate that fails to build or run is skipped, not fatal
                log.info("inductor-lite autotune: candidate %s failed: %s", candidate, err)
    if not timings:
        return candidates[0]
    best = min(timings, key=lambda t: t[0])
    log.info("inductor-lite autotune: %s", ", ".join(f"{c} {t * 1e6:.1f}us" for t, c in timings))
    return best[1]


def wrap_cudagraphs(compiled: Any, example_inputs: Sequence[Any]) -> Callable[[list[Any]], Any]:
    """Replay ``compiled`` through a CUDA graph recorded on static copies of the inputs."""
    with unset_fake_temporarily():
        static_inputs = [example_tensor(x) for x in example_inputs]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            compiled(list(static_inputs))  # warm up outside the capture (allocations, Triton compiles)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_outputs = compiled(list(static_inputs))

    def replay(args: list[Any]) -> Any:
        for dst, src in zip(static_inputs, args):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        args.clear()
        graph.replay()
        # Outputs live in the graph's memory pool; hand out copies so the next replay cannot overwrite them.
        return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in static_outputs)

    replay._boxed_call = True  # type: ignore[attr-defined]
    replay.inner = compiled  # type: ignore[attr-defined]
    return replay
