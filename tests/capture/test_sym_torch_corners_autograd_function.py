"""``torch.autograd.Function`` subclasses: one graph node running the Function, gradients from its own backward."""

import torch
from torch_corners import breaks, run_both

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


class StraightThroughRound(torch.autograd.Function):
    """Rounds forward; lets the gradient through unchanged (autograd's own rule would give zeros)."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class ScaledSquare(torch.autograd.Function):
    """Saves its input, takes a Python number, returns a tensor and a non-differentiable mask."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        mask = x > 0
        ctx.mark_non_differentiable(mask)
        return x * x * scale, mask

    @staticmethod
    def backward(ctx, grad, _mask_grad):
        (x,) = ctx.saved_tensors
        return 2 * ctx.scale * x * grad + 1, None  # the + 1 shows it is this backward that ran


class SetupContextMul(torch.autograd.Function):
    """The forward / setup_context split."""

    @staticmethod
    def forward(x, y):
        return x * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y * 3, grad * x * 3


def ste(x):
    return (StraightThroughRound.apply(x * 3) * x).sum()


def scaled(x):
    y, mask = ScaledSquare.apply(x.sin(), 0.5)
    return (y * mask).sum()


def setup_context(x, y):
    return SetupContextMul.apply(x + 1, y).sum()


def grad_leaf(*shape):
    return lambda: (torch.randn(*shape, requires_grad=True),)


def test_a_function_is_one_graph_and_its_backward_gives_the_gradients():
    run_both(ste, grad_leaf(5), graphs=1, fullgraph=True, backward=True)
    run_both(scaled, grad_leaf(2, 3), graphs=1, fullgraph=True, backward=True)
    run_both(
        setup_context,
        lambda: (torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)),
        graphs=1,
        fullgraph=True,
        backward=True,
    )


def test_without_grad_the_function_still_runs_forward():
    run_both(ste, lambda: (torch.randn(5),), graphs=1, fullgraph=True)


class Doubling(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def doubled(x):
    return Doubling.apply(x).sum()


def test_replacing_the_backward_recompiles():
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(doubled)
    x = torch.randn(3, requires_grad=True)
    compiled(x).backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))
    original = Doubling.backward
    try:
        Doubling.backward = staticmethod(lambda ctx, grad: grad * 5)
        x.grad = None
        compiled(x).backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 5.0))
        assert counter.frame_count == 2
    finally:
        Doubling.backward = original


class ReadsData(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.sum() > 0:  # data-dependent Python
            return x * 2
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def reads_data(x):
    return ReadsData.apply(x) + 1


def test_a_forward_that_cannot_run_on_fake_tensors_is_a_break():
    run_both(reads_data, lambda: (torch.randn(3),), graphs=1)
    (reason,) = breaks(reads_data, torch.randn(3))
    # its forward branches on the data (a bool of a tensor): a read of data, which is a break without the option
    assert reason == "ReadsData_apply reads a tensor's data (set capture_scalar_outputs to trace it)", reason


def test_calls_with_the_same_function_reuse_one_compiled_entry():
    """``Doubling.apply`` is a new bound method at every read: its guard compares by equality, not identity."""
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(doubled)
    for _ in range(5):
        x = torch.randn(3, requires_grad=True)
        compiled(x).backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 2.0))
    assert counter.frame_count == 1
