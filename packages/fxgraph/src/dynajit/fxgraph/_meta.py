"""dynajit's node-metadata schema: the keys every layer reads and writes on FX nodes.

Capture fills these keys when it records a node; printers, passes and
re-capture read them. Values are kept in the shapes torch.fx tooling expects,
so third-party backends can read them too.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from typing import Any

import torch.fx

__all__ = [
    "EXAMPLE_VALUE",
    "NN_MODULE_STACK",
    "SOURCE_FN_STACK",
    "SOURCE_META_KEYS",
    "STACK_TRACE",
    "copy_source_meta",
    "format_stack_trace",
    "source_meta",
]

EXAMPLE_VALUE = "example_value"
STACK_TRACE = "stack_trace"
NN_MODULE_STACK = "nn_module_stack"
SOURCE_FN_STACK = "source_fn_stack"

#: The keys that say where a node came from in the user's program; re-capture carries them over.
SOURCE_META_KEYS: tuple[str, ...] = (STACK_TRACE, NN_MODULE_STACK, SOURCE_FN_STACK)

Frame = tuple[str, int, str, str | None]


def format_stack_trace(frames: Iterable[Frame | traceback.FrameSummary]) -> str:
    """Format user frames ``(filename, lineno, function, source_line)`` like a traceback, innermost last."""
    summaries = [
        frame if isinstance(frame, traceback.FrameSummary) else traceback.FrameSummary(*frame[:3], line=frame[3])
        for frame in frames
    ]
    return "".join(traceback.StackSummary.from_list(summaries).format())


def copy_meta_value(key: str, value: Any) -> Any:
    """Copy a metadata value so that nodes never share a mutable dict or list."""
    if key == NN_MODULE_STACK and isinstance(value, Mapping):
        return dict(value)
    if key == SOURCE_FN_STACK and isinstance(value, list | tuple):
        return list(value)
    return value


def source_meta(node: torch.fx.Node) -> dict[str, Any]:
    """Return the source keys (stack trace, module stack, source-fn stack) present on ``node``."""
    return {key: copy_meta_value(key, node.meta[key]) for key in SOURCE_META_KEYS if key in node.meta}


def copy_source_meta(src: torch.fx.Node, dst: torch.fx.Node) -> None:
    """Give ``dst`` the source keys of ``src`` that ``dst`` does not already have."""
    for key, value in source_meta(src).items():
        dst.meta.setdefault(key, value)
