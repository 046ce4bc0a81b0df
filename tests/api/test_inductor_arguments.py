"""``compile``'s checks against the inductor backend's own catalogue of modes and options."""

from __future__ import annotations

import pytest
import torch

from dynajit import compiler


def add_one(x):
    return x + 1


def test_unknown_inductor_mode_lists_the_modes():
    with pytest.raises(
        ValueError, match=r"unknown mode 'fastest' for backend 'inductor'; available modes: 'default', "
    ):
        compiler.compile(add_one, mode="fastest")


def test_unknown_inductor_option_names_the_close_match():
    with pytest.raises(
        ValueError, match=r"unknown option 'max_autotun' for backend 'inductor'\. Did you mean 'max_autotune'"
    ):
        compiler.compile(add_one, options={"max_autotun": True})


def test_the_listing_functions_describe_the_inductor_backend():
    modes = compiler.inductor_list_mode_options()
    assert {"default", "reduce-overhead", "max-autotune"} <= set(modes)
    assert compiler.inductor_list_mode_options("max-autotune")["max_autotune"] is True
    assert "max_autotune" in compiler.inductor_list_options()
    assert compiler.cudagraph_mark_step_begin() is None  # CPU: no CUDA graphs to advance


def test_mode_and_options_reach_the_inductor_backend():
    compiled = compiler.compile(add_one, mode="max-autotune-no-cudagraphs", options={"num_threads": 1})
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), add_one(x))
