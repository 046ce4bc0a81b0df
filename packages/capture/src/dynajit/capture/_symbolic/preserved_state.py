"""The process state a backend's compile leaves as it found it: torch's global modes and its random generators.

A backend runs code of its own while a frame is converted: AOT autograd traces the graph and may leave the
grad mode the graph ends in; a backend timing candidate kernels on random inputs draws from the global
generator. Whatever it left changed would be seen by the user's next line (``torch.randn`` giving other
numbers than in eager), and by the GLOBAL_STATE guard built after the compile: an entry guarded by the mode
the compile left, not the one the frame was called in, would answer calls made in the other mode.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["preserved_process_state"]

_AUTOCAST_DEVICES = ("cpu", "cuda")


def _deterministic_algorithms() -> tuple[bool, bool]:
    return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


@contextlib.contextmanager
def preserved_process_state() -> Iterator[None]:
    """Run the block, then put back grad mode, default dtype, deterministic algorithms, autocast and the RNG states."""
    grad = torch.is_grad_enabled()
    dtype = torch.get_default_dtype()
    deterministic = _deterministic_algorithms()
    autocast = [
        (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)) for device in _AUTOCAST_DEVICES
    ]
    autocast_cache = torch.is_autocast_cache_enabled()
    # (CUDA's generators only once CUDA is initialized: reading them would initialize it)
    cuda_devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=cuda_devices):
            yield
    finally:
        torch._C._set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        if _deterministic_algorithms() != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        for device, enabled, autocast_dtype in autocast:
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, autocast_dtype)
        torch.set_autocast_cache_enabled(autocast_cache)
