"""Pointwise graphs: fused chains, broadcasting, scalars, views of inputs."""

import torch
from ilite_helpers import check


def test_chain_and_transpose():
    check(lambda x, y: ((torch.relu(x * 2 + y) - 1).sin(), x.t() + 1), torch.randn(4, 8), torch.randn(8))
