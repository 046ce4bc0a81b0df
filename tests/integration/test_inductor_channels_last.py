"""``options={"layout_optimization": True}``: convolution graphs run channels-last when their convolutions pay.

The decision times the graph's convolutions in both layouts; these tests fix its outcome (by standing in
for the timing) and compare the compiled model with eager: values, output strides, and the layout the
convolutions actually ran in.
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.utils._python_dispatch
from torch import nn

import dynajit.inductor_lite._layout as layout
from dynajit import compiler
from dynajit.inductor_lite import compile_fx


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


class Net(nn.Module):
    """Convolutions, batch norm, a residual add, pooling, a 4-D output and a flattened head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.stem(x)))
        z = torch.relu(self.conv(y) + y)
        pooled = nn.functional.adaptive_avg_pool2d(nn.functional.max_pool2d(z, 2), 1).flatten(1)
        return self.head(pooled), z


class Flat(nn.Module):
    """A view of a convolution's output that eager's strides allow and channels-last does not."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y.view(y.shape[0], -1) * 2


def _run(model: nn.Module, x: torch.Tensor, faster: bool, monkeypatch, caplog) -> list[str]:
    times = {torch.contiguous_format: 2.0, torch.channels_last: 1.0 if faster else 2.0}
    monkeypatch.setattr(layout, "_conv_seconds", lambda convs, memory_format: times[memory_format])
    compiled = compiler.compile(model, options={"layout_optimization": True})
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        actual = compiled(x)
        expected = model(x)
    for a, e in zip(
        actual if isinstance(actual, tuple) else (actual,), expected if isinstance(expected, tuple) else (expected,)
    ):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
        assert a.stride() == e.stride()
    return [r.getMessage() for r in caplog.records if "convolutions" in r.getMessage()]


class ConvAttention(nn.Module):
    """Convolutions feeding an attention over their (channel, row, column) output (fuzz a60-1:698): channels-last
    reaches the flash kernel's inputs with a last dim of stride 8, which that kernel reads as contiguous."""

    def __init__(self) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(3, 3, 3, padding=1, groups=3)
        self.pointwise = nn.Conv2d(3, 8, 1)

    def forward(self, x):
        v = self.pointwise(self.depthwise(x).flip(3))
        return nn.functional.scaled_dot_product_attention(v, v * 0.5, v, is_causal=True)


def test_an_attention_reading_channels_last_values_gets_its_last_dim_contiguous(monkeypatch, caplog):
    torch.manual_seed(0)
    model = ConvAttention()
    decisions = _run(model.eval(), torch.randn(1, 3, 2, 2), True, monkeypatch, caplog)
    assert any("channels-last" in d for d in decisions), decisions
    compiler.reset()  # and in training: the flash kernel's backward, with the gradients
    compiled = compiler.compile(model.train(), options={"layout_optimization": True})
    x = torch.randn(1, 3, 2, 2)
    compiled(x).sum().backward()
    actual = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for a, e in zip(actual, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)


def test_convolutions_that_pay_run_channels_last_and_outputs_keep_eager_strides(monkeypatch, caplog):
    torch.manual_seed(0)
    decisions = _run(Net().eval(), torch.randn(2, 3, 16, 16), True, monkeypatch, caplog)
    assert decisions and decisions[0].startswith("inductor-lite: convolutions run channels-last")


def test_convolutions_that_do_not_pay_keep_their_layout(monkeypatch, caplog):
    torch.manual_seed(0)
    decisions = _run(Net().eval(), torch.randn(2, 3, 16, 16), False, monkeypatch, caplog)
    assert decisions and decisions[0].startswith("inductor-lite: convolutions stay in their layout (channels-last")


def test_a_view_channels_last_refuses_leaves_the_graph_as_it_was(monkeypatch, caplog):
    torch.manual_seed(0)
    decisions = _run(Flat().eval(), torch.randn(2, 4, 6, 6), True, monkeypatch, caplog)
    assert decisions and "aten.view" in decisions[0] and "stay in their layout" in decisions[0]


class NormThenConv(nn.Module):
    """A layer norm over channels done channels-last (as ConvNeXt's), then a depthwise convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.conv = nn.Conv2d(8, 8, 7, padding=3, groups=8)

    def forward(self, x):
        y = self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.conv(y)


def test_an_aten_call_reads_a_kernel_result_in_eager_layout():
    """The kernel writes the norm's result in eager's layout (channels-last strides), so the convolution
    returns the layout the graph expects: no copy of its result into another layout at every call."""
    torch.manual_seed(0)
    model, x = NormThenConv().eval(), torch.randn(2, 8, 10, 10)
    compiled = compiler.compile(model, options={"layout_optimization": False})
    with torch.no_grad():
        compiled(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            actual = compiled(x)
        expected = model(x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    assert actual.stride() == expected.stride()
    assert [e.name for e in prof.events() if e.name == "aten::copy_"] == []


def test_one_slow_round_from_elsewhere_does_not_decide_the_layout(monkeypatch, caplog):
    """The layouts are timed in interleaved rounds and the fastest of each compared: a burst of load during
    one round (here the second as-is round, five times slower) cannot make the slower layout win."""
    samples = {torch.contiguous_format: iter([1.0, 5.0, 1.0]), torch.channels_last: iter([1.5, 1.5, 1.5])}
    monkeypatch.setattr(layout, "_conv_seconds", lambda convs, memory_format: next(samples[memory_format]))
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 3, 16, 16)
    compiled = compiler.compile(model, options={"layout_optimization": True})
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        actual, expected = compiled(x), model(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    decisions = [r.getMessage() for r in caplog.records if "convolutions" in r.getMessage()]
    assert decisions and decisions[0].startswith("inductor-lite: convolutions stay in their layout")


def test_the_first_round_warms_up_and_does_not_count(monkeypatch, caplog):
    # oneDNN builds its primitives at a convolution's first call: that round is not the layout's speed, and
    # running it apart before the timed rounds cost a quarter of the timing (a float64 ResNet's compile: 0.2 s).
    samples = {torch.contiguous_format: iter([1.0, 2.0, 2.0]), torch.channels_last: iter([3.0, 1.0, 1.0])}
    monkeypatch.setattr(layout, "_conv_seconds", lambda convs, memory_format: next(samples[memory_format]))
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 3, 16, 16)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        actual, expected = compiler.compile(model, options={"layout_optimization": True})(x), model(x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    decisions = [r.getMessage() for r in caplog.records if "convolutions" in r.getMessage()]
    assert decisions and decisions[0].startswith("inductor-lite: convolutions run channels-last")


def _recording_copies(monkeypatch) -> list[list[tuple[tuple[int, ...], torch.memory_format]]]:
    """A list that gets, for each timed run of the convolutions, the (shape, layout) of each copy it times."""
    runs: list[list[tuple[tuple[int, ...], torch.memory_format]]] = []
    real_run = layout._run_convolutions

    def recording(calls, copies=(), matmuls=frozenset()):
        runs.append([(tuple(source.shape), memory_format) for source, memory_format in copies])
        return real_run(calls, copies, matmuls)

    monkeypatch.setattr(layout, "_run_convolutions", recording)
    return runs


def test_the_copies_channels_last_adds_count_against_it(monkeypatch):
    """Channels-last is timed with the copies the rewrite adds (the input into channels-last, 4-D outputs back
    into eager's layout): on a graph of one small convolution they cost what channels-last saves, and the
    input's copy was the whole of the extra peak memory."""
    runs = _recording_copies(monkeypatch)
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(
            compiler.compile(model, options={"layout_optimization": True})(x), model(x), rtol=1e-4, atol=1e-4
        )
    timed = [copies for copies in runs if copies]
    assert timed and all(copies == timed[0] for copies in timed)
    assert ((2, 3, 16, 16), torch.channels_last) in timed[0]  # the input, into channels-last
    assert any(memory_format == torch.contiguous_format for _, memory_format in timed[0])  # z, back
    assert len(timed) == 3 and len(runs) == 6  # three channels-last rounds (one warms up); as-is rounds copy nothing


def test_a_training_step_times_the_forwards_copies_only(monkeypatch):
    """The backward's convolutions are not timed, so neither are its copies (the weights' gradients back into
    eager's layout): counted against the forward's gains alone they kept a float64 ResNet's step, 11% faster
    channels-last, in its layout. The step itself still matches eager's, gradients included."""
    runs = _recording_copies(monkeypatch)
    torch.manual_seed(0)
    model, x = Net().train(), torch.randn(2, 3, 16, 16)
    reference = Net().train()
    reference.load_state_dict(model.state_dict())
    compiled = compiler.compile(model, options={"layout_optimization": True})
    for fn in (compiled, reference):
        logits, z = fn(x)
        (logits.sum() + z.mean()).backward()
    for p, e in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, e.grad, rtol=1e-4, atol=1e-4)
    timed = [copies for copies in runs if copies]
    assert timed and ((2, 3, 16, 16), torch.channels_last) in timed[0]  # the forward's input, into channels-last
    weights = {tuple(p.shape) for p in model.parameters() if p.dim() == 4}
    assert {(shape, torch.channels_last) for shape in weights} <= set(timed[0])  # the weights, into channels-last
    back = [shape for shape, memory_format in timed[0] if memory_format == torch.contiguous_format]
    assert not weights & set(back)  # no weight gradient's copy back


class _ConvolutionLayouts(torch.utils._python_dispatch.TorchDispatchMode):
    """Records, for each convolution and its gradients' op, whether its input and weight are channels-last."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, bool, bool]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default):
            x, w = (args[0], args[1]) if func is torch.ops.aten.convolution.default else (args[1], args[2])
            last = torch.channels_last
            self.seen.append((func.__name__, x.is_contiguous(memory_format=last), w.is_contiguous(memory_format=last)))
        return func(*args, **(kwargs or {}))


def test_a_training_step_channels_last_lays_out_the_weights_too(monkeypatch):
    """slow_conv2d (float64) copies an NCHW weight into channels-last at each call, forward and backward: the
    step reads one copy per weight instead, made once in the forward and saved for the backward (a float64
    ResNet's step about 3% faster). Gradients and outputs are eager's, in eager's layout."""
    times = {torch.contiguous_format: 2.0, torch.channels_last: 1.0}
    monkeypatch.setattr(layout, "_conv_seconds", lambda convs, memory_format: times[memory_format])
    torch.manual_seed(0)
    model, x = Net().double().train(), torch.randn(2, 3, 16, 16, dtype=torch.float64)
    reference = Net().double().train()
    reference.load_state_dict(model.state_dict())
    # (compiled by inductor-lite alone: a function compiled by capture runs as it is under a dispatch mode)
    compiled = compile_fx(torch.fx.symbolic_trace(model), [x], options={"layout_optimization": True})
    compiled(x)  # the first call
    for p in model.parameters():
        p.grad = None
    layouts = _ConvolutionLayouts()
    outputs = []
    for fn, mode in ((compiled, layouts), (reference, _ConvolutionLayouts())):
        with mode:
            logits, z = fn(x)
            (logits.sum() + z.mean()).backward()
        outputs.append((logits, z))
    for actual, expected in zip(*outputs):
        torch.testing.assert_close(actual, expected)
        assert actual.stride() == expected.stride()
    for p, e in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, e.grad)
        assert p.grad.stride() == e.grad.stride()
    assert {op for op, _, _ in layouts.seen} == {"convolution.default", "convolution_backward.default"}
    assert all(x_last and w_last for _, x_last, w_last in layouts.seen), layouts.seen


def test_a_saving_within_timing_jitter_keeps_the_layout(monkeypatch, caplog):
    # 30% faster, but 15 µs a call: the rounds' jitter, not the layout, would decide.
    times = {torch.contiguous_format: 50e-6, torch.channels_last: 35e-6}
    monkeypatch.setattr(layout, "_conv_seconds", lambda convs, memory_format: times[memory_format])
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 3, 16, 16)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        torch.testing.assert_close(
            compiler.compile(model, options={"layout_optimization": True})(x), model(x), rtol=1e-4, atol=1e-4
        )
    decisions = [r.getMessage() for r in caplog.records if "convolutions" in r.getMessage()]
    assert decisions and decisions[0].startswith("inductor-lite: convolutions stay in their layout")


class Pointwise(nn.Module):
    """Pointwise convolutions (with and without bias) between others: a 3x3 stem, a strided 1x1 (not a
    matrix product of the input's rows), and a wide last 1x1 whose weight is the largest tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.expand = nn.Conv2d(16, 64, 1, bias=False)
        self.down = nn.Conv2d(64, 64, 1, stride=2)
        self.wide = nn.Conv2d(64, 1024, 1)

    def forward(self, x):
        y = torch.relu(self.expand(torch.relu(self.stem(x))))
        return self.wide(torch.relu(self.down(y))).mean((2, 3)), y


def _as_chosen(monkeypatch, matmul_faster: bool) -> None:
    times = {torch.contiguous_format: 2.0, torch.channels_last: 1.0}
    monkeypatch.setattr(layout, "_conv_seconds", lambda timing, memory_format: _prepared(timing, memory_format, times))
    matmul_seconds = 1.0 if matmul_faster else 3.0
    monkeypatch.setattr(layout, "_seconds", lambda fn, args: matmul_seconds if fn is layout._run_as_matmul else 2.0)


def _prepared(timing, memory_format, times):
    timing.prepared(memory_format)  # (decides the matrix products in channels-last)
    return times[memory_format]


def _ops_run(compiled, x):
    with torch.no_grad():
        compiled(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = compiled(x)
    return out, [e.name for e in prof.events()]


@pytest.mark.parametrize("matmul_faster", [True, False], ids=["matmuls", "convolutions"])
def test_pointwise_convolutions_timed_faster_as_matrix_products_run_as_those(matmul_faster, monkeypatch, caplog):
    _as_chosen(monkeypatch, matmul_faster)
    torch.manual_seed(0)
    model, x = Pointwise().eval(), torch.randn(2, 3, 8, 8)
    with caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        actual, names = _ops_run(compiler.compile(model, options={"layout_optimization": True}), x)
    with torch.no_grad():
        expected = model(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
        assert a.stride() == e.stride()
    convolutions = names.count("aten::convolution")
    # the stem and the strided 1x1 stay convolutions; the other two become a mm and an addmm
    assert convolutions == (2 if matmul_faster else 4)
    assert ("aten::mm" in names and "aten::addmm" in names) is matmul_faster
    messages = [r.getMessage() for r in caplog.records]
    assert ("inductor-lite: 2 pointwise convolutions run as matrix products" in messages) is matmul_faster


def _peak_bytes(fn, x) -> int:
    with torch.no_grad():
        fn(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            fn(x)
    live = peak = 0
    for event in sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns()):
        if event.name() == "[memory]":
            live += event.nbytes()
            peak = max(peak, live)
    return peak


def test_pointwise_convolutions_as_matrix_products_copy_no_weight(monkeypatch):
    """oneDNN copies a convolution's weight into its own layout at every call; the wide last 1x1 weight is the
    largest tensor of the graph, so that copy was its peak. As a matrix product nothing is copied."""
    _as_chosen(monkeypatch, True)
    torch.manual_seed(0)
    model, x = Pointwise().eval(), torch.randn(2, 3, 8, 8)
    compiled = compiler.compile(model, options={"layout_optimization": True})
    weight_bytes = model.wide.weight.numel() * 4
    if _peak_bytes(model, x) < weight_bytes:
        pytest.skip("oneDNN copies no weight with this many threads (OMP_NUM_THREADS=1): nothing to avoid")
    assert _peak_bytes(compiled, x) < weight_bytes


def test_channels_last_must_win_every_round(monkeypatch, caplog):
    """A layout that wins on its fastest round but loses another is noise, not a saving: a full benchmark run
    once took channels-last for a vision transformer's patch convolution that way, doubling its peak memory."""
    samples = {torch.contiguous_format: iter([2.0, 2.0, 2.0]), torch.channels_last: iter([1.0, 1.0, 3.0])}
    monkeypatch.setattr(layout, "_conv_seconds", lambda convs, memory_format: next(samples[memory_format]))
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 3, 16, 16)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        for a, e in zip(compiler.compile(model, options={"layout_optimization": True})(x), model(x)):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    decisions = [r.getMessage() for r in caplog.records if "convolutions" in r.getMessage()]
    assert decisions and decisions[0].startswith("inductor-lite: convolutions stay in their layout")


class PatchEmbedding(nn.Module):
    """A vision transformer's stem: one convolution cutting the image into patches, then tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, 32, 8, stride=8)
        self.mix = nn.Linear(32, 32)

    def forward(self, x):
        return self.mix(self.patches(x).flatten(2).transpose(1, 2)).relu()


def test_channels_last_that_would_raise_the_peak_memory_keeps_the_layout(monkeypatch, caplog):
    """In channels-last, the input's copy and oneDNN's second copy of the weight are held at the patch
    convolution, the graph's largest moment: however fast the timing says it is, the layout stays."""
    torch.manual_seed(0)
    model, x = PatchEmbedding().eval(), torch.randn(2, 3, 32, 32)
    decisions = _run(model, x, True, monkeypatch, caplog)
    assert decisions == ["inductor-lite: convolutions stay in their layout (channels-last would raise the peak memory)"]
    assert _peak_bytes(compiler.compile(model, options={"layout_optimization": True}), x) <= _peak_bytes(model, x)


def test_a_convolution_of_an_expanded_input_is_timed_and_compiled(monkeypatch):
    # (e35-1:119) The timing inputs were made with the fake input's strides and filled by a copy, which eager
    # refuses for an expanded layout (several elements on one memory location): the compile failed.
    times = {torch.contiguous_format: 2.0, torch.channels_last: 1.0}
    monkeypatch.setattr(
        layout, "_conv_seconds", lambda timing, memory_format: (timing.prepared(memory_format), times[memory_format])[1]
    )
    conv = nn.Conv2d(4, 4, 3, padding=1, groups=4).requires_grad_(False)

    def fn(x, scale):
        return conv(scale.broadcast_to(x.shape))

    compiled = compiler.compile(fn, options={"layout_optimization": True})
    for size in (1, 3):
        x, scale = torch.randn(size, 4, size, size), torch.randn(1, 1)
        with torch.no_grad():
            actual, expected = compiled(x, scale), fn(x, scale)
        assert actual.stride() == expected.stride()
        torch.testing.assert_close(actual, expected)


def _train_step(model: nn.Module, fn, x: torch.Tensor) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    model.zero_grad()
    outputs = fn(x)
    weights = [torch.linspace(-1, 2, o.numel(), dtype=o.dtype).view(o.shape) for o in outputs]
    sum((o * w).sum() for o, w in zip(outputs, weights)).backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    return [o.detach() for o in outputs], {**grads, **dict(model.named_buffers())}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("model_class", [Net, Pointwise])
def test_a_training_graphs_convolutions_and_their_gradients_run_channels_last(model_class, dtype, monkeypatch, caplog):
    # The forward and backward of a training step are split from one graph: there each convolution's input is
    # copied channels-last once, its gradient reads that copy, and the weights' gradients and the outputs get
    # back eager's layout. (A float64 ResNet's step ran 1.33x faster so: slow_conv2d is 1.7x faster on NHWC.)
    _as_chosen(monkeypatch, matmul_faster=True)
    torch.manual_seed(0)
    model = model_class().to(dtype).train()
    x = torch.randn(2, 3, 16, 16, dtype=dtype)
    compiled = compiler.compile(model, options={"layout_optimization": True})
    with caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        for _ in range(2):  # (twice: the running statistics move on from the compiled step's)
            expected_state = {k: v.clone() for k, v in model.state_dict().items()}
            expected = _train_step(model, model, x)
            model.load_state_dict(expected_state)
            actual = _train_step(model, compiled, x)
            torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
            for a, e in zip([*actual[0], *actual[1].values()], [*expected[0], *expected[1].values()]):
                # (a size-1 dimension's stride addresses nothing: a 1x1 weight's gradient may differ there)
                assert all(n == 1 or sa == se for n, sa, se in zip(e.shape, a.stride(), e.stride())), (a, e)
    decisions = [r.getMessage() for r in caplog.records if "convolutions" in r.getMessage()]
    assert decisions and decisions[0].startswith("inductor-lite: convolutions run channels-last"), decisions


@pytest.mark.parametrize(
    ("channels_last", "train", "decided"),
    [
        ([1.0, 0.93, 1.2, 0.94], True, "run channels-last"),  # 7% in its fastest of three timed rounds
        ([1.0, 0.97, 0.96, 0.98], True, "stay in their layout"),  # 4%: not enough
        ([1.0, 0.93, 1.2], False, "stay in their layout"),  # inference: 10%, in every round
    ],
)
def test_a_training_step_decides_on_its_fastest_rounds_at_a_smaller_margin(
    channels_last, train, decided, monkeypatch, caplog
):
    # A float64 ResNet's forward convolutions timed 12% faster channels-last, its whole step 14%: the gradients,
    # not timed, gain too. At 10% in every round, one round slowed by other load kept it in NCHW.
    samples = {torch.contiguous_format: iter([1.0] * 4), torch.channels_last: iter(channels_last)}
    monkeypatch.setattr(layout, "_conv_seconds", lambda timing, memory_format: next(samples[memory_format]))
    torch.manual_seed(0)
    model = Net().to(torch.float64).train(train)
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    compiled = compiler.compile(model, options={"layout_optimization": True})
    with caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        if train:
            actual, expected = _train_step(model, compiled, x), _train_step(model, model, x)
        else:
            with torch.no_grad():
                actual, expected = compiled(x), model(x)
    torch.testing.assert_close(actual, expected, rtol=1e-7, atol=1e-7)
    decisions = [r.getMessage() for r in caplog.records if "convolutions" in r.getMessage()]
    assert decisions and decisions[0].startswith(f"inductor-lite: convolutions {decided}"), decisions


def test_an_integer_convolution_is_timed_on_integers():
    # Timing the layouts filled the convolution's inputs with normal_(), which has no integer kernel: the
    # compile failed (a fallback to eager, an error in strict mode)
    def fn(x, w):
        return nn.functional.conv2d(x, w) * 2

    x, w = torch.randint(-3, 3, (1, 2, 5, 5)), torch.randint(-3, 3, (3, 2, 3, 3))
    torch.testing.assert_close(compiler.compile(fn)(x, w), fn(x, w))  # (strict: no fallback)


class OneChannel(nn.Module):
    """A convolution with one output channel, returned and read by another (fuzz a288.17:187)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, padding=1)
        self.mix = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y, self.mix(y)


def test_a_one_channel_output_gets_back_eagers_stride_of_its_channel_dim(monkeypatch, caplog):
    # In channels-last the channel dim of a one-channel output has stride 1 where eager's is H*W: the same
    # elements, but a convolution reading it after the graph (past a graph break) lays its own output out
    # channels-last where eager's is contiguous.
    monkeypatch.setattr(layout, "_peak_bytes", lambda *args: 0)
    torch.manual_seed(0)
    # (every other image: the copy into channels-last gives the channel dim stride 1)
    model, x = OneChannel().eval(), torch.randn(4, 1, 8, 8)[::2]
    decisions = _run(model, x, True, monkeypatch, caplog)  # (compares every stride, the channel dim's too)
    assert decisions and decisions[0].startswith("inductor-lite: convolutions run channels-last")
    with torch.no_grad():
        returned, expected = compiler.compile(model, options={"layout_optimization": True})(x)[0], model(x)[0]
        assert model.mix(returned).stride() == model.mix(expected).stride()
