"""Straight-line tensor code, the seed's toy example, and graph breaks with resume functions."""

import torch

from dynajit.capture._frame import ConvertedFrame, FrameContext
from dynajit.capture.testing import CompileCounter


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_toy_example_three_graphs_over_100_calls(check):
    gen = torch.Generator().manual_seed(1)
    check(
        toy_example,
        graphs=3,
        calls=100,
        make_args=lambda: (torch.randn(8, generator=gen), torch.randn(8, generator=gen)),
    )


def straight(a, b):
    x = torch.sin(a) + torch.cos(b)
    y = x.relu() * 2
    return y @ b.t(), y.sum(dim=-1)


def test_straight_line_one_graph(check, t):
    check(straight, t(3, 3), t(3, 3), graphs=1)


def test_convert_frame_directly_returns_code_with_same_arguments(t):
    counter = CompileCounter()
    converted = _convert(straight, (t(2, 2), t(2, 2)), counter)
    assert converted.code.co_varnames[:2] == ("a", "b")
    assert converted.code.co_argcount == 2
    assert counter.frame_count == 1 and any(name.startswith("__compiled_fn_") for name in converted.new_globals)


def _convert(fn, args, backend) -> ConvertedFrame:
    from dynajit.capture._convert import convert_frame

    return convert_frame(fn, args, FrameContext(backend=backend))
