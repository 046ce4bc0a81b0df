"""Eval-mode batch norm as one op while AOT autograd traces, and one pointwise loop when lowered.

Decomposed, an eval-mode batch norm is sixteen aten ops (casts, unsqueezes, the arithmetic), and AOT autograd's
tracing costs about a millisecond per op it traces, in each of its passes and again in our channels-last pass's
re-run: most of a CNN's cold compile. So on CPU each eval-mode ``F.batch_norm`` of a captured graph becomes one
op of ours before AOT autograd sees it (:func:`batch_norms_as_one_op`), and so does the decomposition of
``_native_batch_norm_legit_no_training`` (:func:`eval_batch_norm`): ``dynajit_inductor::batch_norm_inference``.
Its fake kernel lays the result out as eager's kernel does, in the input's suggested memory format (torch's
meta kernel follows a transposed input's strides, where a later ``view`` that eager allows then fails); its
real kernel is eager's, its gradient what eager's ``native_batch_norm_backward`` computes in eval mode (written
out: torch's decomposition of that op divides by the elements per channel, and an empty input failed); and its
lowering computes what torch's decomposition computes, ``(x - mean) * rsqrt(var + eps) *
weight + bias`` per channel, in one loop the scheduler fuses with its neighbours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import _disable_current_modes

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._eager_checks import EagerError
from dynajit.inductor_lite._freezing import batch_norm_arguments
from dynajit.inductor_lite._index import Index
from dynajit.inductor_lite._ir import Expr, TensorValue, const, op, opmath_dtype
from dynajit.inductor_lite._lowering import lowering, to_value

__all__ = ["batch_norms_as_one_op", "eval_batch_norm"]

aten = torch.ops.aten

_LIBRARY = torch.library.Library("dynajit_inductor", "FRAGMENT")
_LIBRARY.define(
    "batch_norm_inference(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, "
    "float eps) -> Tensor"
)


def _eager(input: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, eps: float) -> Any:
    return aten._native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, 0.0, eps)[0]


def _fake(input: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, eps: float) -> Any:
    _check_as_eager(input, weight, bias, running_mean, running_var)
    return torch.empty(input.shape, dtype=input.dtype, memory_format=_output_format(input))


_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}
_CHECKED: set[tuple[Any, ...]] = set()


def _check_as_eager(input: torch.Tensor, *vectors: Any) -> None:
    """Raise (as :class:`EagerError`) what eager's kernel raises for these dtypes and sizes: its mixed-dtype rule
    ("all inputs must share same datatype"), a statistic of another size than the channels. Eager's kernel is run
    on a stand-in of one element per channel, once per signature; with a symbolic size nothing is checked."""
    sizes = [*input.shape, *(v.numel() for v in vectors if v is not None)]
    if not all(isinstance(n, int) for n in sizes):
        return
    signature = (
        input.dim(),
        input.dtype,
        tuple(sizes),
        *((v.dtype, v.dim()) if v is not None else None for v in vectors),
    )
    if signature in _CHECKED:
        return
    stand_in = [n if k == 1 or n == 0 else 1 for k, n in enumerate(input.shape)]
    try:
        with _disable_current_modes():
            ones = [None if v is None else torch.ones(v.shape, dtype=v.dtype) for v in vectors]
            aten._native_batch_norm_legit_no_training(torch.ones(stand_in, dtype=input.dtype), *ones, 0.0, 1e-5)
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        raise EagerError(err) from err
    _CHECKED.add(signature)


def _output_format(input: torch.Tensor) -> torch.memory_format:
    """The layout of eager's result: channels-last for an input that is channels-last and not also contiguous (a
    size-1 dim can make it both), else contiguous. Checked against eager's kernel on every permutation of 2- to
    5-dim inputs of sizes 1 to 3, dense and sliced: wherever eager's result is contiguous, this one is."""
    channels_last = _CHANNELS_LAST.get(input.dim())
    if channels_last is not None and not input.is_contiguous() and input.is_contiguous(memory_format=channels_last):
        return channels_last
    return torch.contiguous_format


def _save(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    input, weight, bias, running_mean, running_var, eps = inputs
    ctx.save_for_backward(input, weight, running_mean, running_var)
    ctx.eps = eps
    ctx.bias_dtype = None if bias is None else bias.dtype


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    """Eval-mode batch norm's gradients, as ``native_batch_norm_backward`` computes them with ``train=False``:
    ``grad * weight * invstd``, and per channel ``sum(grad * (input - mean) * invstd)`` and ``sum(grad)``.

    Written out rather than calling it: torch's decomposition of that op, which AOT autograd traces, divides by
    the elements per channel even in eval mode, where nothing needs it, and an empty input made the compile fail.
    """
    input, weight, running_mean, running_var = ctx.saved_tensors
    if input.shape[1] != running_var.shape[0]:  # only an empty input gets here (eager refuses any other one)
        return (
            input.new_zeros(input.shape) if ctx.needs_input_grad[0] else None,
            weight.new_zeros(weight.shape) if ctx.needs_input_grad[1] else None,
            running_var.new_zeros(running_var.shape, dtype=ctx.bias_dtype) if ctx.needs_input_grad[2] else None,
            None,
            None,
            None,
        )
    compute = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    per_channel = [1] * input.dim()
    per_channel[1] = input.shape[1]
    axes = [k for k in range(input.dim()) if k != 1]
    invstd = torch.rsqrt(running_var.to(compute) + ctx.eps)
    scale = invstd if weight is None else invstd * weight.to(compute)
    grad_c = grad.to(compute)
    grad_input = grad_weight = grad_bias = None
    if ctx.needs_input_grad[0]:
        grad_input = (grad_c * scale.reshape(per_channel)).to(input.dtype)
    if ctx.needs_input_grad[1]:
        centred = input.to(compute) - running_mean.to(compute).reshape(per_channel)
        grad_weight = ((grad_c * centred).sum(axes) * invstd).to(weight.dtype)
    if ctx.needs_input_grad[2]:
        grad_bias = grad_c.sum(axes).to(ctx.bias_dtype)
    return grad_input, grad_weight, grad_bias, None, None, None


_LIBRARY.impl("batch_norm_inference", _eager, "CompositeExplicitAutograd")
torch.library.register_fake("dynajit_inductor::batch_norm_inference", _fake, lib=_LIBRARY)
torch.library.register_autograd("dynajit_inductor::batch_norm_inference", _backward, setup_context=_save, lib=_LIBRARY)
BATCH_NORM_INFERENCE = torch.ops.dynajit_inductor.batch_norm_inference.default


def batch_norms_as_one_op(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with each eval-mode ``F.batch_norm`` on CPU (constant ``training=False``, running statistics
    given) calling ``batch_norm_inference``; ``gm`` itself is left unchanged (a rewrite works on a copy)."""
    found = [(node, args) for node in gm.graph.nodes if (args := _eval_batch_norm_args(node)) is not None]
    if not found:
        return gm
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    graph.output(graph.graph_copy(gm.graph, copies))
    for node, args in found:
        old = copies[node]
        operands = torch.fx.map_arg(
            tuple(args[k] for k in ("input", "weight", "bias", "running_mean", "running_var")), lambda n: copies[n]
        )
        with graph.inserting_before(old):
            output = graph.call_function(BATCH_NORM_INFERENCE, (*operands, float(args["eps"])))
        output.meta = dict(old.meta)
        old.replace_all_uses_with(output)
        graph.erase_node(old)
        copies[node] = output  # a later batch norm of this one's result reads the new op
    return torch.fx.GraphModule(gm, graph, class_name=type(gm).__name__)


def _eval_batch_norm_args(node: torch.fx.Node) -> dict[str, Any] | None:
    if node.op != "call_function" or node.target is not torch.nn.functional.batch_norm:
        return None
    args = batch_norm_arguments(node)
    example = args["input"].meta.get("example_value") if isinstance(args["input"], torch.fx.Node) else None
    if args["training"] is not False or not isinstance(args["eps"], (int, float)) or example is None:
        return None
    if args["running_mean"] is None or args["running_var"] is None or example.device.type != "cpu":
        return None
    if example.dim() < 2:  # (no channel dim: the statistics are read as eager reads them, by the decomposition)
        return None
    return args


def eval_batch_norm(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """The decomposition of ``_native_batch_norm_legit_no_training``: our one op on CPU, else ``decompose``."""

    def run(
        input: torch.Tensor, weight: Any, bias: Any, running_mean: Any, running_var: Any, momentum: float, eps: float
    ) -> Any:
        if input.device.type != "cpu" or running_mean is None or running_var is None or input.dim() < 2:
            return decompose(input, weight, bias, running_mean, running_var, momentum, eps)
        output = BATCH_NORM_INFERENCE(input, weight, bias, running_mean, running_var, eps)
        # (eager's CPU kernel returns empty statistics of the input's dtype in eval mode)
        return output, input.new_zeros((0,)), input.new_zeros((0,))

    return run


@lowering(BATCH_NORM_INFERENCE)
def _lower(
    ctx: Any, x: TensorValue, weight: Any, bias: Any, mean: TensorValue, var: TensorValue, eps: float
) -> TensorValue:
    out = ctx.current_val()
    compute = opmath_dtype(out.dtype)
    channel = [_per_channel(ctx, v, compute) for v in (mean, var, weight, bias)]
    load_mean, load_var, load_weight, load_bias = channel

    def loader(idx: Sequence[Index]) -> Expr:
        centred = op("sub", compute, op("cast", compute, x.loader(idx)), load_mean(idx))  # type: ignore[misc]
        invstd = op("rsqrt", compute, op("add", compute, load_var(idx), const(eps, compute)))  # type: ignore[misc]
        y = op("mul", compute, centred, invstd)
        if load_weight is not None:
            y = op("mul", compute, y, load_weight(idx))
        if load_bias is not None:
            y = op("add", compute, y, load_bias(idx))
        return op("cast", out.dtype, y)

    return TensorValue(_sym.shape_of(out), out.dtype, loader, ctx.device, cost=6)


def _per_channel(ctx: Any, value: Any, compute: torch.dtype) -> Callable[[Sequence[Index]], Expr] | None:
    """A loader of a per-channel vector (dim 1 of the input) at an element's index, cast to ``compute``."""
    if value is None:
        return None
    vector = to_value(ctx, value, compute)

    def load(idx: Sequence[Index]) -> Expr:
        return op("cast", compute, vector.loader([idx[1]]))

    return load
