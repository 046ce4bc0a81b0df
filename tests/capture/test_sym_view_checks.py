"""``view_checks.viewable`` decides as eager's ``view`` does, on layouts that slicing, chunks and permutes make."""

import itertools
import random

import torch

from dynajit.capture._symbolic.view_checks import viewable


def _layouts(rng: random.Random, count: int):
    """Tensors of 1-4 dims with sizes 1-3, each sliced, chunked, permuted or unsqueezed at random."""
    for _ in range(count):
        t = torch.empty([rng.randint(1, 3) for _ in range(rng.randint(1, 4))])
        for _ in range(rng.randint(0, 3)):
            dim = rng.randrange(t.dim())
            step = rng.choice(["slice", "chunk", "permute", "unsqueeze", "step"])
            if step == "slice" and t.shape[dim] > 1:
                t = t.narrow(dim, rng.randrange(t.shape[dim]), 1)
            elif step == "chunk":
                t = t.chunk(2, dim)[-1]
            elif step == "permute":
                t = t.permute(rng.sample(range(t.dim()), t.dim()))
            elif step == "unsqueeze":
                t = t.unsqueeze(dim)
            else:
                t = t[(slice(None),) * dim + (slice(None, None, 2),)]
        yield t


def _shapes(numel: int):
    """Every shape of up to three dims holding ``numel`` elements, ones included."""
    divisors = [d for d in range(1, numel + 1) if numel % d == 0] or [0]
    for rank in (1, 2, 3):
        for dims in itertools.product(divisors, repeat=rank):
            if torch.Size(dims).numel() == numel:
                yield list(dims)


def test_viewable_agrees_with_eagers_view_on_random_layouts():
    rng, checked, refused = random.Random(0), 0, 0
    for t in _layouts(rng, 300):
        for shape in _shapes(t.numel()):
            try:
                t.view(shape)
                expected = True
            except RuntimeError:
                expected = False
            assert viewable(tuple(t.shape), t.stride(), shape) == expected, (t.shape, t.stride(), shape)
            checked, refused = checked + 1, refused + (not expected)
    assert checked > 1000 and refused > 100  # (both answers are exercised)


def test_a_size_one_dim_does_not_join_the_dims_around_it():
    # Fake tensors' reference view accepts this layout; eager's kernel raises.
    assert not viewable((1, 2, 1, 2), (8, 4, 2, 1), (1, 4))
    assert viewable((1, 2, 1, 2), (4, 2, 2, 1), (1, 4))
