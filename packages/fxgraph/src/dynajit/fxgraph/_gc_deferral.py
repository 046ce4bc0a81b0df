"""Compiling without old-generation garbage collections: what a compile made is collected young, once it ends.

Capture defers them while it compiles a frame; a backend, while it compiles a graph (AOT autograd compiles a
training graph's backward at its first backward call, outside any frame's compile).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["full_collections_deferred"]

_deferring = 0
_deferring_lock = threading.Lock()
_saved_thresholds: tuple[int, ...] = ()


@contextlib.contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Keep a compile's objects in the young generations, and collect those generations when it ends.

    Compiling makes many objects that live through the whole compile (graphs, fake tensors, guards) and
    die with it. Left to the default thresholds, they survive two young collections, reach the oldest
    generation and soon make Python collect it -- the whole heap, the model's and torch's objects
    included: a sixth of a model's cold compile. While a frame compiles, only the youngest generation is
    collected automatically (its survivors wait in the middle one); when the last compiling thread
    finishes, the thresholds come back and one collection of the young generations frees the compile's
    cyclic garbage, so only what the compile keeps (code, guards, kernels) moves on to the oldest. A
    program that turned automatic collection off keeps it off, and nothing is collected for it.
    """
    global _deferring, _saved_thresholds
    with _deferring_lock:
        if _deferring == 0:
            _saved_thresholds = gc.get_threshold()
            young = _saved_thresholds[0]
            if young:  # a threshold of 0 means the program turned automatic collection off: left as it is
                gc.set_threshold(young, 1 << 30, 1 << 30)
        _deferring += 1
    try:
        yield
    finally:
        with _deferring_lock:
            _deferring -= 1
            collect = _deferring == 0 and _saved_thresholds[0]
            if collect:
                gc.set_threshold(*_saved_thresholds)
        if collect:
            gc.collect(1)
