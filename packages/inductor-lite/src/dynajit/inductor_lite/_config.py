"""inductor-lite's configuration (one typed object) and its compile modes.

Every field can be set in code, patched for a block, overridden by ``DYNAJIT_<FIELD>``, or passed
as ``compile_fx(..., options={...})`` for one compile. A mode is a named set of option values.
"""

from __future__ import annotations

import difflib
from typing import Any

from dynajit.fxgraph import Config, ConfigError, option

__all__ = [
    "MODES",
    "InductorConfig",
    "config",
    "cudagraph_mark_step_begin",
    "describe_modes",
    "list_mode_options",
    "list_options",
    "resolve_settings",
]


class InductorConfig(Config):
    """Settings of the inductor-lite backend."""

    cpu_backend: str = option(
        "cpp", "code generator for CPU tensors: 'cpp' (C++/OpenMP) or 'triton' (run under TRITON_INTERPRET=1)",
        choices=("cpp", "triton"),
    )  # fmt: skip
    cxx: str = option("g++", "the C++ compiler used to build CPU kernels")
    cxx_flags: str = option(
        "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -ffp-contract=off -fwrapv -fno-thread-jumps",
        "flags for the C++ compiler (no fast-math, and no contraction of a * b + c into one rounding: results must "
        "round as eager's op-by-op kernels do; -fwrapv: an integer overflow wraps, as eager's does, where g++ "
        "would assume it never happens and fold ``bool + (2**63 - 1)`` to 2**63 - 1; -fno-thread-jumps: g++ 12 "
        "with AVX-512 dropped one of the masked stores its jump threading made of one store, leaving an element "
        "of a short loop unwritten where the loop index and an integer value were both 0)",
    )
    cache_dir: str = option(
        "", "kernel cache directory; empty means $DYNAJIT_CACHE_DIR or ~/.cache/dynajit/inductor_lite"
    )
    background_build: bool = option(
        True,
        "build C++ kernels on a thread while compilation goes on; the graph's first call waits for them "
        "(should the build fail, the graph runs its aten ops from then on, with a warning)",
    )
    build_parts: int = option(
        0,
        "libraries a graph's C++ kernels are split into, built by parallel compiler processes; "
        "0 picks one per CPU while each gets at least 4 kernels",
    )
    parallel_threshold: int = option(32768, "minimum elements of work before a kernel's loops use OpenMP threads")
    num_threads: int = option(0, "OpenMP threads per kernel; 0 uses OpenMP's default")
    vector_lanes: int = option(
        0, "how reductions vectorise: 0 uses OpenMP SIMD reductions; n > 0 uses n independent accumulator lanes"
    )
    fuse_attention: bool = option(
        True, "run written-out float32 attention, softmax(q @ k^T * scale) @ v, as the fused attention kernel"
    )
    max_autotune: bool = option(
        False, "time candidate thread counts / block sizes on the example inputs, keep the fastest"
    )
    cudagraphs: bool = option(False, "replay CUDA graphs for CUDA inputs (no-op on CPU)")
    triton_block: int = option(1024, "Triton block size along the flattened (or reduction) dimension")
    fallback_random: bool = option(True, "random ops call aten (same random stream as eager)")
    freezing: bool = option(
        False,
        "treat the graph's parameters and buffers as constants, as for inference: an eval-mode batch norm right "
        "after a convolution is folded into the convolution's weight and bias at compile time. Their values are "
        "then baked in: changing them in place afterwards (an optimizer step) is not seen",
    )
    layout_optimization: bool = option(
        True,
        "run a graph's 2-D convolutions (and a training step's gradients of them) and the ops after them "
        "channels-last on CPU (oneDNN then reorders nothing) when its convolutions, timed in both layouts at compile time with the copies the "
        "change adds, run at least 10% and 50 us a call faster so (in every timed round; a training step's, 5% in its fastest); outputs keep eager's layout. There, each 1x1 "
        "convolution (stride 1, no padding or groups) timed at least 10% faster as a matrix product of the "
        "channels-last rows runs as one (no weight reordered at every call)",
    )
    strict: bool = option(
        False,
        "never run a graph's aten ops in place of its kernels: a background build that fails raises "
        "BuildError at the graph's first call instead of warning (the same DYNAJIT_STRICT=1 switch as capture's)",
    )


config = InductorConfig()

# mode -> the option values it sets.
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"max_autotune": True, "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
}

_MODE_DOCS = {
    "default": "fused kernels with the configured settings",
    "reduce-overhead": "also records CUDA graphs for CUDA inputs to cut launch overhead; a no-op on CPU",
    "max-autotune": "also times thread counts (C++) or block sizes (Triton) on the example inputs and keeps the fastest",
    "max-autotune-no-cudagraphs": "max-autotune without CUDA graphs",
}


def list_mode_options(mode: str | None = None, dynamic: bool | None = None) -> dict[str, Any]:
    """The option values each mode sets: ``{mode: {option: value}}``, or ``{option: value}`` for one mode.

    ``dynamic`` is accepted for signature compatibility with ``torch._inductor.list_mode_options``; the
    modes do not depend on it.
    """
    if mode is None:
        return {name: dict(values) for name, values in MODES.items()}
    _check_mode(mode)
    return dict(MODES[mode])


def describe_modes() -> dict[str, str]:
    """One sentence per mode saying what it does."""
    return dict(_MODE_DOCS)


def cudagraph_mark_step_begin() -> None:
    """Start of a new step for CUDA graphs. Replays hand out copies of their outputs, so there is nothing to release."""


def list_options() -> dict[str, str]:
    """Every option name with its documentation."""
    return config.describe()


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        close = difflib.get_close_matches(str(mode), MODES, n=2)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise ValueError(f"inductor-lite: unknown mode {mode!r}{hint}; known modes: {', '.join(MODES)}")


def resolve_settings(mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    """The option values for one compile: the config, then the mode's values, then ``options``."""
    if mode is not None:
        _check_mode(mode)
    options = dict(options or {})
    try:
        config.check_names(options)
    except ConfigError as err:
        raise ConfigError(f"inductor-lite options: {err}") from None
    settings = config.to_dict()
    settings.update(MODES.get(mode or "default", {}))
    settings.update(options)
    with config.patch(settings):  # validates types and choices
        pass
    return settings
