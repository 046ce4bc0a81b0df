"""Compiling without full garbage collections: the oldest generation waits until no frame is compiling."""

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
    """Hold off the garbage collector's full (oldest-generation) collections while a frame compiles.

    Compiling keeps many new objects alive (graphs, fake tensors, guards), which makes Python run full
    collections over the whole heap, the model's and torch's objects included: two of them were a sixth
    of a CNN's cold compile; held off, they are one, run soon after. Young collections go on, so cyclic
    garbage made while compiling is still collected; the thresholds are restored when the last compiling
    thread finishes, and a program that turned automatic collection off keeps it off.
    """
    global _deferring, _saved_thresholds
    with _deferring_lock:
        if _deferring == 0:
            _saved_thresholds = gc.get_threshold()
            young, middle, _ = _saved_thresholds
            if young:  # a threshold of 0 means the program turned automatic collection off: left as it is
                gc.set_threshold(young, middle, 1 << 30)
        _deferring += 1
    try:
        yield
    finally:
        with _deferring_lock:
            _deferring -= 1
            if _deferring == 0 and _saved_thresholds[0]:
                gc.set_threshold(*_saved_thresholds)
