"""Concatenation, constant padding and slice/select scatters lowered to masked loads: fused with their inputs
and their readers, on both code generators."""

import pytest
import torch
import torch.nn.functional as F
from dyn_helpers import check_sizes
from ilite_helpers import check, check_cases
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.inductor_lite import compiled_graphs, config

CASES = {
    "rotate_half": lambda x, y, z: torch.cat([-x[:, 3:], x[:, :3]], -1) * 2 + x,
    "three_pieces": lambda x, y, z: torch.cat([x, y, x[:, :1] + 1], 1).sin(),
    "dim0": lambda x, y, z: torch.cat([x, z * 2], 0) + 1,
    "promoted": lambda x, y, z: torch.cat([x.to(torch.int64), y], 1),
    "legacy_empty_1d": lambda x, y, z: torch.cat([x, torch.empty(0), z], 0),
    "bool": lambda x, y, z: torch.cat([x > 0, y > 0], 1),
    "empty_piece": lambda x, y, z: torch.cat([x[:, :0], y, x[:, 6:]], 1) + 0,
    "expanded_piece": lambda x, y, z: torch.cat([x, y[:, :1].expand(4, 3)], 1),
    "reshaped_pieces": lambda x, y, z: torch.cat([x.reshape(6, 4), z.reshape(6, 3)], 1).t().contiguous(),
    "one_piece": lambda x, y, z: torch.cat([x], 1) * 3,
    "float64": lambda x, y, z: torch.cat([x.double(), y], 1) / 3,
    "int": lambda x, y, z: torch.cat([x.to(torch.int32), (y * 4).to(torch.int32)], 1) // 3,
    "negative_zero": lambda x, y, z: torch.cat([x * 0 - 0.0, -(y * 0)], 1),
    "nan_and_inf": lambda x, y, z: torch.cat([x / 0, (y - y) / (y - y)], 1),
    "reduced": lambda x, y, z: torch.cat([x, y], 1).sum(1),
    "stack": lambda x, y, z: torch.stack([x, x * 2, x + 1], 1).amax(-1),
    "pad": lambda x, y, z: F.pad(x * 2, (1, 2, 0, 3), value=-1.5) + 1,
    "pad_crop": lambda x, y, z: F.pad(x, (-1, 2, 1, -2)).exp(),
    "pad_int": lambda x, y, z: F.pad((x * 3).to(torch.int64), (2, 0), value=7),
    "slice_scatter": lambda x, y, z: torch.slice_scatter(x * 2, y.sin(), 1, 3, 5) - 1,
    "slice_scatter_end": lambda x, y, z: torch.slice_scatter(x, y, 1, -2),
    "slice_scatter_dim0": lambda x, y, z: torch.slice_scatter(z, x[:1] * 4, 0, 1, 2),
    "select_scatter": lambda x, y, z: torch.select_scatter(x, y[:, 0] + 1, 1, -1) * 2,
    "select_scatter_dim0": lambda x, y, z: torch.select_scatter(z, x[0], 0, 1),
}


def _inputs() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return torch.randn(4, 6), torch.randn(4, 2), torch.randn(3, 6)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_concatenations_equal_eager(backend):
    if backend == "triton":
        pytest.importorskip("triton")
    with config.patch(cpu_backend=backend):
        assert check_cases(CASES, *_inputs()) == len(CASES)


def test_a_rotary_embedding_is_one_kernel_without_an_aten_cat():
    """``cat((-x2, x1))`` times a table plus ``x`` (a rotary embedding) is one kernel reading ``x``: each element
    reads the piece its position falls in, so nothing is written out for the concatenation."""
    c = check(lambda x, t: torch.cat([-x[..., 4:], x[..., :4]], -1) * t + x, torch.randn(2, 3, 8), torch.randn(3, 8))
    (graph,) = compiled_graphs(c)
    assert graph.info["kernels"] == 1 and graph.info["externs"] == 0
    assert torch.cat not in graph.call.__globals__.values()


def test_a_concatenation_of_many_pieces_stays_an_aten_call():
    """Past eight pieces every element would test too many ranges: aten's cat copies them instead."""
    pieces = [torch.randn(2, k + 1) for k in range(10)]
    c = check(make_fx(lambda *xs: torch.cat([x * 2 for x in xs], 1))(*pieces), *pieces)
    assert torch.cat in compiled_graphs(c)[0].call.__globals__.values()


def test_a_concatenation_of_inputs_stays_an_aten_call():
    """With nothing to fuse into the pieces, aten's copy of each piece beats an element-wise select."""
    c = check(lambda x, y: (torch.cat([x, y], 1) + 1,), torch.randn(4, 6), torch.randn(4, 2))
    assert torch.cat in compiled_graphs(c)[0].call.__globals__.values()


def test_concatenations_of_dynamic_sizes():
    """Piece boundaries are shape expressions, evaluated from the sizes of each call."""

    def fn(x, y):
        return torch.cat([x * 2, y.sin(), x[:, :1]], 1).cos()

    check_sizes(fn, lambda n: (torch.randn(3, n), torch.randn(3, 2 * n + 1)), [{1: None}, {1: None}])


def test_padding_and_slice_scatters_are_kernels_without_aten_calls():
    """A gradient of a slice and of a select, and a padding, each fused with what computes its inputs."""
    c = check(
        lambda x, y: (
            torch.slice_scatter(x * 2, y.sin(), 1, 3, 5),
            torch.select_scatter(x, y[:, 0] + 1, 1, -1),
            F.pad(x * 2, (1, 2, 0, 3), value=-1.5),
        ),
        torch.randn(4, 6),
        torch.randn(4, 2),
    )
    assert compiled_graphs(c)[0].info["externs"] == 0
