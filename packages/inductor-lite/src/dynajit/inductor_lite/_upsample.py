"""Linear, bilinear and trilinear upsampling decomposed as eager's CPU kernel computes them: weighted corners.

torch's decomposition interpolates between two neighbours as ``a + (b - a) * w``; eager's kernel sums each
neighbour times its weight, ``a * (1 - w) + b * w``, dim by dim from the outermost. Rounding apart they agree,
but not on an infinite input: ``inf + (inf - inf) * w`` is NaN where eager's ``inf * (1 - w) + inf * w`` is inf, and a
weight of 0 makes ``0 * inf`` NaN in eager where the other form is finite. So the compiled image had NaN
where eager's had inf. Only floating inputs are decomposed (see :func:`upsampling_decompositions` for ``uint8``).

torch registers its decomposition of the ``vec`` overloads (and of bilinear's ``default``) as Python kernels at the
Autograd key, which the Python dispatcher runs before AOT autograd looks at any decomposition table: see
``_decompositions.our_autograd_kernels``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._decomp import get_decompositions
from torch._decomp.decompositions import upsample_compute_output_size
from torch._prims_common import suggest_memory_format

__all__ = ["upsampling_decompositions"]

aten = torch.ops.aten

# Each op's ``default`` overload takes (input, output_size, align_corners, *scales); its ``vec`` overload
# (input, output_size or None, align_corners, scale_factors or None).
_OPS = (aten.upsample_linear1d, aten.upsample_bilinear2d, aten.upsample_trilinear3d)


def _source_positions(
    in_size: Any, out_size: Any, align_corners: bool, scale: float | None, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For each output position: the two input positions it reads and their weights, as eager's kernel computes them."""
    if align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None and scale > 0 else in_size / out_size
    positions = torch.arange(out_size, dtype=dtype, device=device)
    source = positions * step if align_corners else (positions + 0.5).mul(step).sub(0.5).clamp(min=0)
    lower = source.to(torch.int64)
    upper = (lower + 1).clamp(max=in_size - 1)
    upper_weight = (source - lower).clamp(0, 1)
    return lower, upper, 1 - upper_weight, upper_weight


def _upsample(input: torch.Tensor, output_size: Sequence[Any], align_corners: bool, scales: Sequence[Any]) -> Any:
    if not input.is_floating_point():
        return NotImplemented
    dims = len(output_size)
    compute = torch.float64 if input.dtype == torch.float64 else torch.float32
    corners = []
    for dim, (in_size, out_size, scale) in enumerate(zip(input.shape[2:], output_size, scales)):
        trailing = (1,) * (dims - 1 - dim)
        picked = _source_positions(in_size, out_size, align_corners, scale, compute, input.device)
        corners.append([part.view(out_size, *trailing) for part in picked])
    values = input.to(compute)

    def weighted(dim: int, indices: list[torch.Tensor]) -> torch.Tensor:
        if dim == dims:
            return aten._unsafe_index(values, [None, None, *indices])
        lower, upper, lower_weight, upper_weight = corners[dim]
        return weighted(dim + 1, [*indices, lower]) * lower_weight + weighted(dim + 1, [*indices, upper]) * upper_weight

    result = weighted(0, []).to(input.dtype)
    return result.contiguous(memory_format=suggest_memory_format(input))


def _with_sizes(input: torch.Tensor, output_size: Sequence[Any], align_corners: bool, *scales: Any) -> Any:
    return _upsample(input, output_size, align_corners, scales)


def _with_factors(packet: Any, decompose: Callable[..., Any]) -> Callable[..., Any]:
    def run(
        input: torch.Tensor, output_size: Sequence[Any] | None, align_corners: bool, factors: Sequence[float] | None
    ) -> Any:
        sizes = upsample_compute_output_size(input.size(), output_size, factors)
        scales = factors or [None] * len(sizes)
        if not input.is_floating_point():  # the ``default`` overload, which stays whole
            return packet.default(input, sizes, align_corners, *scales)
        return decompose(input, sizes, align_corners, *scales)

    return run


def _floating_only(decompose: Callable[..., Any]) -> Callable[..., Any]:
    def run(input: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return decompose(input, *args, **kwargs) if input.is_floating_point() else NotImplemented

    return run


def upsampling_decompositions() -> dict[Any, Callable[..., Any]]:
    """The decompositions of the linear and cubic upsampling ops, by overload.

    Linear ones weigh their corners as eager's kernel does. An integer image keeps the op whole, for aten's kernel:
    torch's integer decompositions round otherwise than eager's fixed-point kernels, and a ``uint8`` bilinear or
    bicubic image came out 1 off in a fifth of its pixels.
    """
    ours: dict[Any, Callable[..., Any]] = {}
    for packet in _OPS:
        ours[packet.default] = _with_sizes
        ours[packet.vec] = _with_factors(packet, _with_sizes)
    cubic = aten.upsample_bicubic2d
    torchs = get_decompositions([cubic])[cubic.default]
    ours[cubic.default] = _floating_only(torchs)
    ours[cubic.vec] = _with_factors(cubic, torchs)
    return ours
