"""The aten decompositions AOT autograd applies before lowering, each laid out and checked as eager's kernel is.

On top of torch's core set: composite ops rewritten into ops the lowering table handles, a few kept whole (an
aten call or a lowering does better than their decomposition), decompositions whose result takes eager's
layout (the input's suggested memory format, or a contiguous layout where a size-1 dim makes strides
ambiguous), and composites run eagerly on size-1 tensors first, so the compiled graph raises the dtype errors
eager's kernels raise.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import math
from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._decomp.decompositions import _softmax_unbacked_safe_amax
from torch._prims_common import make_contiguous_strides_for, suggest_memory_format
from torch.fx.experimental.symbolic_shapes import statically_known_true

from dynajit.fxgraph import (
    DECOMPOSED_UNLIKE_EAGER,
    EAGER_BRANCH_KERNELS,
    EAGER_MESSAGE_KERNELS,
    VIEWED_UNLIKE_EAGER,
    in_canonical_layout,
    in_suggested_layout,
    python_kernels_replaced,
)
from dynajit.inductor_lite._batch_norm import eval_batch_norm
from dynajit.inductor_lite._eager_checks import EagerError, checkable, flat, run_on_ones
from dynajit.inductor_lite._ir import may_overflow
from dynajit.inductor_lite._lower_reduce import lowers_layer_norm
from dynajit.inductor_lite._lowering import in_dtype
from dynajit.inductor_lite._upsample import upsampling_decompositions

__all__ = ["decomposition_table", "our_autograd_kernels"]

aten = torch.ops.aten
log = logging.getLogger("dynajit.inductor_lite")

# Composite ops rewritten into ops the lowering table handles (on top of the core aten set).
_EXTRA_DECOMPOSITIONS = [
    aten._softmax,
    aten._log_softmax,
    aten.native_layer_norm,
    aten.hardtanh,
    aten.leaky_relu,
    aten.elu,
    aten.silu,
    aten.hardswish,
    aten.hardsigmoid,
    aten.mish,
    aten.softplus,
    aten.logsumexp,
    aten.std,
    aten.std_mean,
    aten.linalg_vector_norm,
    aten.native_batch_norm,
    aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training,
    # what the no-training decomposition calls (with training=False: nothing is mutated)
    aten._native_batch_norm_legit,
    aten.native_group_norm,
    aten.gelu_backward,
    aten.clamp_min,
    aten.clamp_max,
    aten.sigmoid_backward,
    aten.tanh_backward,
]
# Ops kept whole: the lowering table (or an aten extern call) handles them better than their decomposition.
# ``baddbmm`` also for its layout: eager's kernel returns a contiguous result, its decomposition's final add
# follows a transposed ``input``'s strides.
_KEEP = {
    aten.addmm.default,
    aten.mm.default,
    aten.bmm.default,
    aten.baddbmm.default,
    aten.gelu.default,
    # views and ranges the lowering table takes as they are, where the decompositions trace them again as
    # ``permute`` and ``arange.start_step``
    aten.t.default,
    aten.transpose.int,
    aten.arange.default,
    aten.arange.start,
    # lowered as a masked read laid out as eager's kernel lays it; the decomposition's result is contiguous
    # where eager's keeps a transposed or strided input's order
    aten.select_scatter.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
    # Their kernels check the indices and raise eager's own error: IndexError "Target 9 is out of bounds." for a
    # class past the last, RuntimeError for an index_add past the end (the decompositions' checks raise the other);
    # index_copy's refuses a negative index, which its decomposition, an index_put, counts from the end.
    aten.nll_loss_forward.default,
    aten.nll_loss2d_forward.default,
    aten.index_add.default,
    aten.index_copy.default,
    aten.max_unpool2d.default,
    aten.max_unpool3d.default,
    # Its kernel refuses an input outside [0, 1] (a NaN among them); the decomposition computes on.
    aten.binary_cross_entropy.default,
    # Their kernels add a margin term only where it is above 0, which leaves out a NaN; the decompositions'
    # ``clamp_min(0)`` keeps it (eager's loss of scores holding NaN and inf was inf, compiled NaN).
    aten.multi_margin_loss.default,
    aten.multilabel_margin_loss_forward.default,
}


# Composite ops whose dtype checks live in their kernels (``softmax`` of an int tensor): checked eagerly
# before they are decomposed, as are decomposed pointwise ops and reductions (``frac`` of an int tensor).
# Each takes tensors, scalars and dims only, so size-1 stand-ins are valid arguments.
_CHECKED_COMPOSITES = {
    aten._softmax, aten._log_softmax, aten.logsumexp, aten.std, aten.std_mean, aten.var, aten.var_mean,
    aten.linalg_vector_norm, aten.hardtanh, aten.leaky_relu, aten.elu, aten.silu, aten.hardswish,
    aten.hardsigmoid, aten.mish, aten.softplus, aten.gelu_backward, aten.sigmoid_backward, aten.tanh_backward,
}  # fmt: skip


# Ops whose eager CPU kernel lays its output out in the input's suggested memory format (contiguous, or
# channels-last for a channels-last input): batch norms, whose decompositions follow the input's strides, and
# channel shuffles, whose decompositions' views give a contiguous result.
_SUGGESTED_LAYOUT = {
    aten.native_batch_norm, aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit, aten.channel_shuffle, aten.native_channel_shuffle,
}  # fmt: skip
# Training-mode batch norms: their statistics are a sum's mean and the variance about it (see ``_batch_moments``).
_BATCH_STATISTICS = {aten.native_batch_norm, aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit}
# Ops whose eager kernel gives a contiguous result the strides ``empty`` gives, where the decomposition keeps an
# input's stride on a size-1 dim: a convolution reading the result would choose another output layout from it.
_CANONICAL_LAYOUT = {aten.native_layer_norm, aten.native_group_norm, aten._log_softmax}


# Ops whose eager checks depend on the values (``mvlgamma`` needs every element above (p-1)/2): ones as
# stand-ins could make eager raise where the caller's inputs would not.
_VALUE_CHECKED = {aten.mvlgamma, aten.mvlgamma_}


# Overloads that read a one-element tensor's value as a scalar of ``self``'s dtype; eager's kernel checks that it
# fits, while the decompositions cast it: where it may not fit, the op is kept for aten's kernel to check.
_SCALAR_FROM_TENSOR = {
    aten.masked_fill.Tensor: 2, aten.masked_fill_.Tensor: 2, aten.fill.Tensor: 1, aten.fill_.Tensor: 1,
    aten.index_fill.int_Tensor: 3, aten.index_fill_.int_Tensor: 3,
}  # fmt: skip


def _kept_where_the_value_may_not_fit(position: int, decompose: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(decompose)
    def run(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        value = (self, *args)[position] if position <= len(args) else kwargs.get("value")
        if isinstance(value, torch.Tensor) and may_overflow(value.dtype, self.dtype):
            return NotImplemented  # traced as the op itself
        return decompose(self, *args, **kwargs)

    return run


# How the ``var_mean`` a norm's decomposition calls computes its moments, as that norm's eager kernel does: layer
# and group norm in the input's type; batch norm in double, its mean a sum's. Elsewhere it is eager's ``var_mean``.
_MOMENTS: contextvars.ContextVar[str] = contextvars.ContextVar("moments", default="var_mean")
_ROWS_IN_FLOAT, _BATCH_SUMS = "rows in float", "batch sums"


def _in_double(statistic: Callable[..., Any], self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """``var``, ``std`` or ``var_mean`` of a float32 or 16-bit input computed in double, as eager's kernels do.

    In float32 a deviation above 2**64 squares to inf: eager's std of ``[0, 1e30, 0]`` is 5.8e29; and a sum of
    two values near the largest float32 overflows: eager's training-mode batch norm (whose statistics are
    ``var_mean``'s in its decomposition) of a channel holding them had a finite mean, a float sum inf. Layer and
    group norm keep theirs in float32: their eager kernels' moments are float32 too.
    """
    moments = _MOMENTS.get()
    if moments == _BATCH_SUMS and statistic is torch.var_mean:
        return _batch_moments(self, *args, **kwargs)
    if self.dtype not in (torch.float32, torch.float16, torch.bfloat16) or moments == _ROWS_IN_FLOAT:
        return NotImplemented  # traced as the op itself: double already, or eager's own error for an integer
    result = statistic(self.to(torch.float64), *args, **kwargs)
    return tuple(r.to(self.dtype) for r in result) if isinstance(result, tuple) else result.to(self.dtype)


def _batch_moments(
    self: torch.Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch norm's ``var_mean`` as its eager kernel takes it, in double: the mean a sum's over the count, then the
    sum of squared deviations from it. A channel holding inf has an infinite mean, where ``var_mean``'s own is NaN
    unless that element is the last (see ``_lower_reduce._mean_in_order``); equal values deviate by exactly 0."""
    wide = self.to(torch.float64) if self.dtype in (torch.float32, torch.float16, torch.bfloat16) else self
    rank = max(wide.dim(), 1)
    dims = [d % rank for d in ([dim] if isinstance(dim, int) else dim or range(wide.dim()))]
    mean = torch.mean(wide, dims, keepdim=True)
    deviation = wide - mean
    kept = 1 if correction is None else correction
    divisor = torch.sym_max(math.prod(wide.shape[d] for d in dims) - kept, 0)
    var = torch.sum(deviation * deviation, dims, keepdim=keepdim) / divisor
    return var.to(self.dtype), (mean if keepdim else mean.squeeze(dims)).to(self.dtype)


def _with_moments(moments: str, decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``decompose`` with the ``var_mean`` it calls computed as ``moments`` says (see ``_MOMENTS``)."""

    @functools.wraps(decompose)
    def run(*args: Any, **kwargs: Any) -> Any:
        token = _MOMENTS.set(moments)
        try:
            return decompose(*args, **kwargs)
        finally:
            _MOMENTS.reset(token)

    return run


def _kept_for_integers(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``decompose`` for a floating input; an integer one keeps the op whole.

    torch's decomposition of ``threshold`` computes an integer input in float32 (2**31 - 1 came back as -2**31);
    eager converts the threshold and the value to the input's type instead.
    """

    @functools.wraps(decompose)
    def run(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not self.is_floating_point():
            return NotImplemented  # traced as the op itself
        return decompose(self, *args, **kwargs)

    return run


@functools.cache
def decomposition_table() -> dict[Any, Callable[..., Any]]:
    """The aten decompositions applied before lowering."""
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA_DECOMPOSITIONS))
    table[aten.native_layer_norm.default] = _normalized_as_eager(table[aten.native_layer_norm.default])
    table[aten.take.default] = _take_by_a_flat_index
    table[aten.resize_as.default] = _resize_as_eager_does
    backward = aten.native_layer_norm_backward.default
    table[backward] = _layer_norm_input_gradient_as_eager(table[backward])
    for op in _KEEP:
        table.pop(op, None)
    for op, decompose in table.items():
        packet = getattr(op, "overloadpacket", None)
        if packet in _SUGGESTED_LAYOUT:
            table[op] = decompose = _in_suggested_layout(decompose)
        if packet in _CANONICAL_LAYOUT:
            table[op] = decompose = _in_canonical_layout(decompose)
        if packet in _CHECKED_COMPOSITES or (checkable(op) and packet not in _VALUE_CHECKED):
            table[op] = _checked(op, decompose)
    for op, position in _SCALAR_FROM_TENSOR.items():
        if op in table:
            table[op] = _kept_where_the_value_may_not_fit(position, table[op])
    no_training = aten._native_batch_norm_legit_no_training.default
    table[no_training] = eval_batch_norm(table[no_training])
    table[aten.threshold.default] = _kept_for_integers(table[aten.threshold.default])
    table[aten.var.correction] = _checked(aten.var, functools.partial(_in_double, torch.var))
    table[aten.std.correction] = _checked(aten.std, functools.partial(_in_double, torch.std))
    table[aten.var_mean.correction] = _checked(aten.var_mean, functools.partial(_in_double, torch.var_mean))
    for norm in (aten.native_layer_norm.default, aten.native_group_norm.default):
        table[norm] = _with_moments(_ROWS_IN_FLOAT, table[norm])
    for op in table:
        if getattr(op, "overloadpacket", None) in _BATCH_STATISTICS:
            table[op] = _with_moments(_BATCH_SUMS, table[op])
    table[aten.native_layer_norm.default] = _kept_for_canonical_inputs(table[aten.native_layer_norm.default])
    table[aten.logsumexp.default] = _checked(aten.logsumexp, _logsumexp_as_eager)
    table[aten._softmax.default] = _checked(aten._softmax, _softmax_as_eager)
    table[aten.logit.default] = _logit_bounds_as_eager(table[aten.logit.default])
    table.update(upsampling_decompositions())
    return table


def _layer_norm_input_gradient_as_eager(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``native_layer_norm_backward`` whose input gradient is eager's kernel's algebra: with ``g`` the output's
    gradient times the weight and the row's sums ``db = sum(g)``, ``ds = sum(g * x)``, it is ``rstd * g + b * x + c``
    where ``b = (db * mean - ds) * rstd**3 / n`` and ``c = -b * mean - db * rstd / n``.

    torch's decomposition computes ``rstd / n * (n * g - db - x_hat * sum(g * x_hat))``: the same number for finite
    values, but another pattern of infinities and NaNs where the gradient holds an infinity (eager's is NaN
    throughout such a row, the decomposition's kept an infinity beside NaNs). The weight's and the bias's
    gradients are the decomposition's.
    """

    def run(
        grad_out: torch.Tensor,
        input: torch.Tensor,
        normalized_shape: list[int],
        mean: torch.Tensor,
        rstd: torch.Tensor,
        weight: torch.Tensor | None,
        bias: torch.Tensor | None,
        output_mask: list[bool],
    ) -> Any:
        axis = input.dim() - len(normalized_shape)
        n, rows = math.prod(input.shape[axis:]), math.prod(input.shape[:axis])
        if not output_mask[0] or statically_known_true(n == 0) or statically_known_true(rows == 0):
            return decompose(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
        _, d_weight, d_bias = decompose(
            grad_out, input, normalized_shape, mean, rstd, weight, bias, [False, *output_mask[1:]]
        )
        dtype = torch._prims_common.get_computation_dtype(input.dtype)
        x, g = input.to(dtype), grad_out.to(dtype)
        if weight is not None:
            g = g * weight.to(dtype)
        while mean.dim() < x.dim():
            mean, rstd = mean.unsqueeze(-1), rstd.unsqueeze(-1)
        dims = list(range(axis, x.dim()))
        db, ds = g.sum(dims, keepdim=True), (g * x).sum(dims, keepdim=True)
        scale = 1.0 / n
        b = (db * mean - ds) * rstd * rstd * rstd * scale
        c = -b * mean - db * rstd * scale
        return (rstd * g + b * x + c).to(input.dtype), d_weight, d_bias

    return run


def _resize_as_eager_does(
    self: torch.Tensor, other: torch.Tensor, memory_format: torch.memory_format | None = None
) -> torch.Tensor:
    """``resize_as`` as eager's kernel: with no memory format it only resizes. torch's decomposition passes
    ``contiguous_format``, which restrides a transposed tensor of the same size over its memory as it lies:
    ``x.clone().resize_as_(y)`` of a column-major ``x`` returned its elements transposed."""
    if memory_format == torch.preserve_format:
        memory_format = suggest_memory_format(other)
    return aten.resize(self, other.shape, memory_format=memory_format)


def _take_by_a_flat_index(self: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``take`` as an index of the flattened tensor by the flattened index. torch's decomposition indexes by
    ``index`` itself, and Python indexing reads a 0-d index as an int: a data-dependent ``item()``, which failed
    the compile of ``torch.take(x, torch.tensor(0))``."""
    return self.reshape(-1)[index.reshape(-1)].reshape(index.shape)


def _logsumexp_as_eager(self: torch.Tensor, dim: Any, keepdim: bool = False) -> torch.Tensor:
    """``logsumexp`` op by op in the input's dtype, as eager's kernel computes it (ATen's ``logsumexp_out_impl``).

    torch's decomposition computes a 16-bit input in float32 and rounds once; eager rounds the differences, the
    exponentials, the sum and its log to the input's dtype, each a separate op: a bfloat16 result differed from
    eager's by an ulp nearly everywhere (and a matrix product of it by 0.04 after cancellation).
    """
    if not self.is_floating_point():
        self = self.to(torch.get_default_dtype())
    dims = [dim] if isinstance(dim, int) else list(dim)
    if self.numel() == 0:
        return torch.sum(torch.exp(self), dims, keepdim).log()
    maxes = torch.amax(self, dims, keepdim=True)
    maxes = torch.masked_fill(maxes, maxes.abs() == float("inf"), 0)
    maxes_squeezed = maxes if keepdim else torch.squeeze(maxes, dims)
    return torch.sum(torch.exp(self - maxes), dims, keepdim).log().add(maxes_squeezed)


def _normalized_as_eager(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``native_layer_norm`` with its output computed as eager's kernel computes it, ``(x - mean) * rstd * weight +
    bias`` in the accumulator type, and ``rstd`` NaN where the mean's square overflows, as eager's is.

    Eager's moments combine partial means whose difference is squared: a row whose mean is past the square root
    of the largest float32 (``nan_to_num`` of an inf, fuzz a91-1:291) has a NaN ``rstd`` and output in eager,
    where the variance as sums is 0 and the row normalized to 0.
    """

    @functools.wraps(decompose)
    def run(input: torch.Tensor, normalized_shape: Any, weight: Any, bias: Any, eps: float) -> Any:
        # The statistics in eager's accumulator type (float32 for a 16-bit input, where the decomposition would
        # round them to the input's type before returning them).
        acc = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
        x = input.contiguous().to(acc)  # (eager's result is contiguous, whatever the input's layout)
        _, mean, rstd = decompose(x, normalized_shape, None, None, eps)
        rstd = torch.where(torch.isinf(mean * mean), torch.nan, rstd)
        result = (x - mean) * rstd
        if weight is not None:
            result = result * weight.to(acc)
        if bias is not None:
            result = result + bias.to(acc)
        return result.to(input.dtype), mean.to(input.dtype), rstd.to(input.dtype)

    return run


def _kept_for_canonical_inputs(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``native_layer_norm`` kept whole (lowered by ``_lower_reduce``) for an input laid out as ``torch.empty``
    lays out its shape, the op's own fake result then being laid out as eager's, where ``lowers_layer_norm`` holds;
    ``decompose`` for any other.

    The decomposition traced a dozen ops per call, a tenth of a transformer's compile. For another input (a
    transposed one, or one whose size-1 dim has another stride), the fake kernel follows the input's strides
    where eager's result is contiguous, and a convolution reading it would choose another layout: the
    decomposition's result is laid out as eager's (``_in_canonical_layout``).
    """

    @functools.wraps(decompose)
    def run(input: torch.Tensor, normalized_shape: Any, weight: Any, bias: Any, eps: float) -> Any:
        affine = [t.dtype for t in (weight, bias) if t is not None]
        empty = any(statically_known_true(size == 0) for size in input.shape)
        canonical = make_contiguous_strides_for(input.shape)
        if lowers_layer_norm(input.dtype, affine, empty) and all(
            statically_known_true(a == b) for a, b in zip(input.stride(), canonical)
        ):
            return NotImplemented  # traced as the op itself
        return decompose(input, normalized_shape, weight, bias, eps)

    return run


def _softmax_as_eager(self: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    """``softmax`` as eager's kernel computes it (ATen's ``_vec_softmax``): the exponentials of the differences
    from the row's maximum times one reciprocal of their sum.

    torch's decomposition divides every element by the sum, which can land an ulp away from eager's product;
    code generation then divides as written, since a user's own ``x / x.amax()`` is a division in eager (whose
    quotient, 1.0, became 0.99999994 through a reciprocal, and 0 after ``.long()``).
    """
    x = self.contiguous()  # (eager's result is contiguous)
    computed = x.to(torch.float32) if x.dtype in (torch.float16, torch.bfloat16) else x
    unnormalized = torch.exp(computed - _softmax_unbacked_safe_amax(computed, dim))
    result = unnormalized * torch.reciprocal(torch.sum(unnormalized, dim, keepdim=True))
    return result if half_to_float else result.to(x.dtype)


def _logit_bounds_as_eager(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``logit(x, eps)`` of a 16-bit input as eager's kernel computes it: clamped to ``eps`` and ``1 - eps`` rounded to
    its type, then ``log(x / (1 - x))`` each op rounded to it (torch's decomposition computes in float32:
    bfloat16 ``logit(1.0, eps=0.01)`` came out 4.59, eager's 4.44, the logit of 0.98828125)."""

    @functools.wraps(decompose)
    def run(self: torch.Tensor, eps: float | None = None) -> Any:
        if eps is None or self.dtype not in (torch.float16, torch.bfloat16):
            return decompose(self, eps)
        low, high = in_dtype(eps, self.dtype), in_dtype(1 - eps, self.dtype)
        x = torch.where(self < low, low, torch.where(self > high, high, self))
        return torch.log(x / (1 - x))  # op by op in the input's type, each rounded, as eager's kernel computes

    return run


def _in_suggested_layout(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``decompose``, its first result laid out as eager's kernel lays it: in the input's suggested memory format."""

    @functools.wraps(decompose)
    def run(input: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        result = decompose(input, *args, **kwargs)
        return in_suggested_layout(tuple(result) if isinstance(result, list) else result, input)

    return run


def _in_canonical_layout(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``decompose``, its first result laid out as eager's kernel lays it when contiguous (see ``in_canonical_layout``)."""

    @functools.wraps(decompose)
    def run(*args: Any, **kwargs: Any) -> Any:
        return in_canonical_layout(decompose(*args, **kwargs))

    return run


def _checked(op: Any, decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``decompose`` after running ``op`` eagerly on size-1 tensors of its arguments' dtypes (see ``run_on_ones``).

    Where eager accepted the call and the decomposition refuses it, the op is traced whole: eager's kernel skips
    its dtype checks for an empty input (``softmax`` of an empty bool tensor is an empty bool tensor), which the
    decomposition's own ops (a subtraction of bools) make anyway.
    """

    @functools.wraps(decompose)
    def run(*args: Any, **kwargs: Any) -> Any:
        run_on_ones(op, args, kwargs)
        try:
            # tried on the stand-ins first where it matters: a refusal under fake tensors is logged as an error
            if any(
                isinstance(a, torch.Tensor) and statically_known_true(a.numel() == 0)
                for a in flat([*args, *kwargs.values()])
            ):
                run_on_ones(decompose, args, kwargs)
            return decompose(*args, **kwargs)
        except (EagerError, RuntimeError) as err:
            log.info("inductor-lite: %s kept whole, its decomposition refuses what eager accepts: %s", op, err)
            return NotImplemented  # traced as the op itself

    return run


def _below_autograd(overload: Any, decompose: Callable[..., Any]) -> Callable[..., Any]:
    """``decompose`` as a Python kernel at the Autograd key; where it declines (an integer input, which no gradient
    flows through), the op itself, below autograd, for the decomposition table to keep whole."""

    def run(*args: Any, **kwargs: Any) -> Any:
        result = decompose(*args, **kwargs)
        if result is NotImplemented:
            with torch._C._AutoDispatchBelowAutograd():
                return overload(*args, **kwargs)
        return result

    return run


def our_autograd_kernels() -> contextlib.AbstractContextManager[None]:
    """A context within which AOT autograd traces the ops torch decomposes unlike eager at the Autograd keys with
    this table's decompositions, or keeps them whole (see ``dynajit.fxgraph.python_kernels_replaced``), keeps whole
    those whose Python kernel returns views where eager's does not (``dynajit.fxgraph.VIEWED_UNLIKE_EAGER``), and
    the ops whose backward formula branches on the data with eager's branch (``dynajit.fxgraph.EAGER_BRANCH_KERNELS``),
    and raises eager's messages where torch words them otherwise (``dynajit.fxgraph.EAGER_MESSAGE_KERNELS``)."""
    table = decomposition_table()
    ours = {op: None if op in _KEEP else _below_autograd(op, table[op]) for op in DECOMPOSED_UNLIKE_EAGER}
    kept = {**dict.fromkeys(VIEWED_UNLIKE_EAGER), **EAGER_BRANCH_KERNELS, **EAGER_MESSAGE_KERNELS}
    return python_kernels_replaced({**ours, **kept})
