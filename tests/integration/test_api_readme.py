"""The root README's first example runs as written: a compiled function, checked against its ``__wrapped__`` original."""

from __future__ import annotations

import re
import types
from pathlib import Path

import dynajit.capture as capture

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs_and_wrapped_is_the_original_function():
    first_block = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert first_block is not None, "README.md has no python example"
    namespace: dict = {"__name__": "readme_example"}
    with capture.observe() as seen:
        exec(compile(first_block.group(1), str(README), "exec"), namespace)  # asserts compiled == original itself
    compiled = namespace["gelu_mlp"]
    original = compiled.__wrapped__
    assert isinstance(original, types.FunctionType) and original is not compiled
    assert original.__name__ == compiled.__name__ == "gelu_mlp"
    assert "_dynajit_compiled" not in vars(original)
    assert [(frame.name, frame.kind) for frame in seen.frames] == [("gelu_mlp", "compiled")]
    assert len(seen.frames[0].graphs) == 1 and not seen.graph_breaks


def test_readme_dynamic_shapes_example_compiles_three_times():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    dynamic = next(block for block in blocks if "normalize_rows" in block)
    capture.reset()
    with capture.observe() as seen:
        exec(compile(dynamic, str(README), "exec"), {"__name__": "readme_dynamic"})  # asserts against eager
    compiled = [frame for frame in seen.frames if frame.kind == "compiled"]
    assert len(compiled) == 3  # batch 4, the dynamic entry, and batch 1 (sizes 0 and 1 are specialised)
    assert any("size()[0]: expected 4, got 7" in reason for reason in compiled[1].recompile_reasons)
