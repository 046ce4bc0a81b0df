"""Twins of test inputs: the same values and layout in a storage of their own, for eager and compiled runs."""

from __future__ import annotations

from typing import Any

import torch


def twin(t: Any) -> Any:
    """A tensor with ``t``'s values and layout (storage offset, strides) in a storage of its own."""
    if not isinstance(t, torch.Tensor):
        return t
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())
    return out
