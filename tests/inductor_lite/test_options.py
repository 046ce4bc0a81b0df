"""Modes, options, fallbacks to aten, and the output_code log."""

import logging

import pytest
import torch
from ilite_helpers import check

from dynajit.fxgraph import ConfigError, set_logs
from dynajit.inductor_lite import (
    compile_fx,
    compiled_graphs,
    config,
    describe_modes,
    list_mode_options,
    list_options,
)


def _gm():
    return torch.fx.symbolic_trace(lambda x: (x + 1,))


def test_unknown_option_lists_close_matches():
    with pytest.raises(ConfigError, match="num_threads"):
        compile_fx(_gm(), [torch.randn(2)], options={"num_thread": 2})


def test_bad_option_value_is_rejected():
    with pytest.raises(ConfigError, match="cpu_backend"):
        compile_fx(_gm(), [torch.randn(2)], options={"cpu_backend": "fortran"})


def test_unknown_mode_lists_modes():
    with pytest.raises(ValueError, match="max-autotune"):
        compile_fx(_gm(), [torch.randn(2)], mode="max-autotun")


def test_listings():
    modes = list_mode_options()
    assert set(modes) == {"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}
    assert list_mode_options("max-autotune")["max_autotune"] is True
    assert "no-op on CPU" in describe_modes()["reduce-overhead"]
    options = list_options()
    assert {"cpu_backend", "num_threads", "parallel_threshold", "cache_dir"} <= set(options)


def test_options_apply_to_one_compile_only():
    before = config.to_dict()
    c = check(lambda x: (x * 2,), torch.randn(4), options={"num_threads": 1, "parallel_threshold": 1})
    assert "num_threads(1)" in compiled_graphs(c)[0].kernel_source
    assert config.to_dict() == before


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune-no-cudagraphs"])
def test_modes_compile_correctly(mode):
    check(lambda x: (torch.softmax(x, -1) * 2,), torch.randn(8, 16), mode=mode)


def test_unlowered_op_falls_back_to_aten_with_a_log_line(caplog):
    def fn(x):
        return (torch.cumsum(x, 1) * 2, torch.sort(x, 1).values + 1)

    with caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        c = check(fn, torch.randn(3, 5))
    assert "no lowering for aten.cumsum" in caplog.text
    assert "aten.cumsum.default" in compiled_graphs(c)[0].info["fallbacks"]


def test_output_code_log_shows_kernels_and_wrapper(caplog):
    set_logs("output_code")
    try:
        with caplog.at_level(logging.INFO, logger="dynajit.output_code"):
            check(lambda x: (x.exp().sum(-1),), torch.randn(3, 40))
    finally:
        set_logs(output_code=False)
    assert 'extern "C" void kernel0' in caplog.text
    assert "def call(args):" in caplog.text


def test_mismatched_inputs_compile_again():
    c = check(lambda x: (x * 2,), torch.randn(4))
    torch.testing.assert_close(c(torch.randn(2, 3))[0].shape, torch.Size([2, 3]))
    x = torch.randn(6, 2).t()
    torch.testing.assert_close(c(x)[0], x * 2)
    assert len(compiled_graphs(c)) == 3


def test_extern_matmul_and_conv():
    def fn(x, k, b, w):
        return (torch.relu(torch.nn.functional.conv2d(x, k, b)).mean((2, 3)) @ w,)

    inputs = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4), torch.randn(4, 5)
    c = check(fn, *inputs, atol=1e-5, rtol=1e-5)
    assert compiled_graphs(c)[0].info["fallbacks"] == []  # extern by design, not a fallback


def test_max_autotune_picks_a_measured_variant():
    def fn(x, w):
        return (torch.softmax(x * w, -1).sum(0),)

    c = check(fn, torch.randn(64, 200), torch.randn(200), mode="max-autotune", atol=1e-5, rtol=1e-5)
    (graph,) = compiled_graphs(c)
    tuned = graph.info["tuned"]
    assert tuned.num_threads in (0, 1) and tuned.vector_lanes in (0, 16)
