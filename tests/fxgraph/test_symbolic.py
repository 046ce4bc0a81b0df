"""Symbolic example values: symbols named after their sources, ranges, duck sizing, dense strides."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from dynajit.fxgraph import is_symbolic, symbolic_fake, symbolic_int, symbols_of


def _mode() -> FakeTensorMode:
    return FakeTensorMode(shape_env=ShapeEnv())


def test_marked_dims_become_named_symbols_and_others_stay_static() -> None:
    mode = _mode()
    fake = symbolic_fake(mode, torch.randn(5, 3), "L['x']", {0: None})
    assert isinstance(fake.shape[0], torch.SymInt) and fake.shape[1] == 3
    assert fake.stride() == (3, 1)
    (symbol,) = symbols_of(fake)
    assert [s.name for s in mode.shape_env.var_to_sources[symbol]] == ["L['x'].size()[0]"]
    assert mode.shape_env.var_to_range[symbol].lower == 2  # 0 and 1 are specialised, as in torch.compile


def test_strides_follow_memory_order_of_a_transposed_value() -> None:
    fake = symbolic_fake(_mode(), torch.randn(4, 6).t(), "L['x']", {0: None, 1: None})
    assert fake.stride()[0] == 1 and fake.stride()[1] == fake.shape[0]


@pytest.mark.parametrize(
    ("strides", "channel_stride"),
    [((9, 9, 3, 1), "H*W"), ((9, 1, 3, 1), 1), ((9, 100, 3, 1), 100)],
    ids=["contiguous", "channels_last", "odd"],
)
def test_a_size_one_dims_stride_is_the_values_where_no_product_of_sizes_gives_it(strides, channel_stride) -> None:
    # The stride addresses nothing, but a convolution lays its output out by it: the fake must hold the value's.
    value, mode = torch.empty_strided((2, 1, 3, 3), strides), _mode()
    fake = symbolic_fake(mode, value, "L['x']", {0: None, 2: None, 3: None}, duck=False)
    height, width = fake.shape[2], fake.shape[3]
    stride = fake.stride()[1]
    if channel_stride == "H*W":
        assert stride.node.expr == (height * width).node.expr
    elif channel_stride == 1:
        assert stride == 1 and not isinstance(stride, torch.SymInt)
    else:  # no product of sizes gives it: a symbol of its own, as guards name it
        assert is_symbolic(stride)
        (symbol,) = symbols_of(stride)
        assert [s.name for s in mode.shape_env.var_to_sources[symbol]] == ["L['x'].stride()[1]"]
    assert [int(s) for s in fake.stride()] == list(strides)


def test_non_dense_values_are_refused() -> None:
    with pytest.raises(ValueError, match="not dense"):
        symbolic_fake(_mode(), torch.randn(4, 6)[:, ::2], "L['x']", {0: None})


def test_equal_sizes_share_a_symbol_only_with_duck_sizing() -> None:
    mode = _mode()
    a = symbolic_fake(mode, torch.randn(5), "L['a']", {0: None})
    b = symbolic_fake(mode, torch.randn(5), "L['b']", {0: None})
    c = symbolic_fake(mode, torch.randn(5), "L['c']", {0: None}, duck=False)
    assert symbols_of(a) == symbols_of(b) != symbols_of(c)


def test_bounds_narrow_the_range_and_a_value_outside_is_an_error() -> None:
    mode = _mode()
    fake = symbolic_fake(mode, torch.randn(6), "L['x']", {0: (2, 8)})
    (symbol,) = symbols_of(fake)
    assert (mode.shape_env.var_to_range[symbol].lower, mode.shape_env.var_to_range[symbol].upper) == (2, 8)
    with pytest.raises(Exception, match="not in range"):
        symbolic_fake(mode, torch.randn(9), "L['y']", {0: (2, 8)})


def test_symbolic_ints_and_requires_grad() -> None:
    mode = _mode()
    n = symbolic_int(mode.shape_env, 7, "L['n']")
    assert is_symbolic(n) and not is_symbolic(7)
    fake = symbolic_fake(mode, torch.randn(3, 2, requires_grad=True), "L['w']", {0: None})
    assert fake.requires_grad and is_symbolic(fake)


@pytest.mark.parametrize(
    "value",
    [torch.randn(3, 4, requires_grad=True), torch.randn(4, 3, requires_grad=True).clone().t()],
    ids=["leaf", "made by autograd"],
)
def test_a_fake_is_a_leaf_exactly_when_its_value_is(value) -> None:
    # autograd refuses an in-place op on a leaf that requires grad, and allows it on a tensor autograd made
    mode = _mode()
    fake = symbolic_fake(mode, value, "L['x']", {0: None, 1: None})
    assert (fake.is_leaf, fake.requires_grad) == (value.is_leaf, True)
    assert [fake.stride(d) == 1 if isinstance(fake.stride(d), int) else False for d in range(2)] == [
        value.stride(d) == 1 for d in range(2)
    ]
    with mode, torch.enable_grad():
        if value.is_leaf:
            with pytest.raises(RuntimeError, match="leaf Variable"):
                fake.mul_(2)
        else:
            assert fake.mul_(2).grad_fn is not None
