"""Python kernels torch registers at the Autograd keys, replaced or removed while AOT autograd traces.

torch registers some of its decompositions as Python kernels at the Autograd and CompositeImplicitAutograd keys,
and the Python dispatcher AOT autograd traces under runs them before any decomposition table is consulted, with
any backend. A few of them compute other values than eager's kernels (:data:`DECOMPOSED_UNLIKE_EAGER`): those a
backend traces with :func:`python_kernels_replaced`, its own kernel in their place or none (the op kept whole, its
C++ autograd kernel recording it). The kernels are torch's process-wide registrations: they are swapped for the
trace alone and put back after, so eager code running meanwhile on another thread under the Python dispatcher
would see ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch._C import DispatchKey

__all__ = [
    "DECOMPOSED_UNLIKE_EAGER",
    "EAGER_MESSAGE_KERNELS",
    "VIEWED_UNLIKE_EAGER",
    "python_kernels_replaced",
    "with_eager_views",
]

aten = torch.ops.aten

_UPSAMPLING = (aten.upsample_linear1d, aten.upsample_bilinear2d, aten.upsample_trilinear3d, aten.upsample_bicubic2d)

# Linear upsampling interpolates as ``a + (b - a) * w`` (NaN beside an infinity, where eager's ``a * (1 - w) + b * w``
# is inf), an integer image rounds otherwise than eager's fixed-point kernels (1 off in a fifth of a ``uint8``
# image's pixels), and the margin losses clamp a NaN term their kernels leave out (``if (z > 0)``).
DECOMPOSED_UNLIKE_EAGER = frozenset({
    *(packet.default for packet in _UPSAMPLING), *(packet.vec for packet in _UPSAMPLING),
    aten.multi_margin_loss.default, aten.multilabel_margin_loss_forward.default,
})  # fmt: skip

# ``matmul``'s Python kernel, which the Python dispatcher runs once sizes are symbolic, returns a view of the product
# where eager's C++ kernel returns a tensor of its own (``squeeze`` and ``view`` for ``squeeze_`` and
# ``_unsafe_view``): ``detach_()`` and in-place writes under autograd refuse or rebase that view. Its C++ kernel,
# kept whole in its place, takes symbolic sizes too, guarding the sizes it compares.
VIEWED_UNLIKE_EAGER = frozenset({aten.matmul.default, aten.matmul.out})

_KEYS = (DispatchKey.Autograd, DispatchKey.CompositeImplicitAutograd)


def _one_hot(self: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    """torch's Python kernel of ``one_hot`` (its checks run when the graph does), with eager's messages: torch's
    say ``one_hot: Class values ...``, which a ``try`` comparing the message sees."""
    if num_classes == -1:
        num_classes = int(self.max().item()) + 1
    aten._assert_async.msg(torch.all(self >= 0), "Class values must be non-negative.")
    aten._assert_async.msg(torch.all(self < num_classes), "Class values must be smaller than num_classes.")
    return (self.unsqueeze(-1) == torch.arange(num_classes, dtype=self.dtype, device=self.device)).to(torch.int64)


# Kernels raising what eager's raise, word for word, where torch's Python kernels word it otherwise.
EAGER_MESSAGE_KERNELS: dict[Any, Callable[..., Any]] = {aten.one_hot.default: _one_hot}


@contextlib.contextmanager
def python_kernels_replaced(replacements: Mapping[Any, Callable[..., Any] | None]) -> Iterator[None]:
    """Within: each op's Python kernels at the Autograd keys replaced by its kernel in ``replacements``, or removed
    where that is None; an op without one there gets its kernel at the Autograd key (or is left as it is)."""
    replaced, added = [], []
    for overload, kernel in replacements.items():
        present = [key for key in _KEYS if key in overload.py_kernels]
        for key in present:
            replaced.append((overload, key, overload.py_kernels[key]))
            if kernel is None:
                del overload.py_kernels[key]
            else:
                overload.py_kernels[key] = kernel
        if not present and kernel is not None:
            overload.py_kernels[DispatchKey.Autograd] = kernel
            added.append(overload)
        overload._dispatch_cache.clear()
    try:
        yield
    finally:
        for overload, key, kernel in replaced:
            overload.py_kernels[key] = kernel
            overload._dispatch_cache.clear()
        for overload in added:
            del overload.py_kernels[DispatchKey.Autograd]
            overload._dispatch_cache.clear()


def with_eager_views() -> contextlib.AbstractContextManager[None]:
    """A context within which the ops of :data:`VIEWED_UNLIKE_EAGER` run their C++ kernels, as in eager."""
    return python_kernels_replaced(dict.fromkeys(VIEWED_UNLIKE_EAGER))
