"""Facts of a tensor object that its fake does not hold (shared memory, which storage it is set to): the
compiled function answers them as eager does, on every call."""

import pytest
import torch
from torch_corners import run_both

import dynajit.capture as capture


def _shared_or_not(x):
    return x * 2 if x.is_shared() else x + 100


def _plain():
    return (torch.ones(3),)


def _in_shared_memory():
    return (torch.ones(3).share_memory_(),)  # (as a DataLoader worker's batch arrives)


@pytest.mark.parametrize(
    "order", [(_plain, _in_shared_memory), (_in_shared_memory, _plain)], ids=["plain_first", "shared_first"]
)
def test_is_shared_is_the_real_tensors_and_guarded(order):
    # The fake answered False for a tensor in shared memory, and that answer was kept for later calls.
    capture.reset()
    for make in order:
        run_both(_shared_or_not, make, fullgraph=True, reset=False)


def _set_to(x, y):
    return x + x.is_set_to(y)


def _two_tensors():
    return (torch.ones(2), torch.ones(2))


def _one_tensor_twice():
    x = torch.ones(2)
    return (x, x)


@pytest.mark.parametrize(
    "order", [(_two_tensors, _one_tensor_twice), (_one_tensor_twice, _two_tensors)], ids=["apart_first", "same_first"]
)
def test_is_set_to_compares_the_real_storages(order):
    # Fakes never share storage: is_set_to of a tensor and itself answered False.
    capture.reset()
    for make in order:
        run_both(_set_to, make, reset=False)
