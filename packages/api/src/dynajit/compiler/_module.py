"""``OptimizedModule``: an ``nn.Module`` whose calls run the compiled ``forward`` of the module it wraps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["OptimizedModule"]


class OptimizedModule(torch.nn.Module):
    """Wraps ``_orig_mod``; attribute access reaches the original, calls run the compiled forward."""

    def __init__(self, mod: torch.nn.Module, decorate: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        super().__init__()
        self._orig_mod = mod
        self._decorate = decorate
        self._compiled_forward = decorate(mod.forward)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled_forward(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"
