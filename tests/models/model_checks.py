"""Run one zoo entry eagerly and under ``dynajit.compiler.compile``, and say everything that differs.

:func:`check` builds the entry twice (same seed: same weights and inputs),
runs one copy eagerly and the other compiled, and returns a :class:`Result`:
whether the outputs (and, for training, the losses, gradients, parameters and
buffers) agree within the entry's tolerance, how many graphs and graph breaks
the first call produced (with the break reasons), whether any frame fell back
to eager (an observed frame of kind ``eager``/``error``/``cache_limit``, or a
RuntimeWarning from dynajit), whether a second call with the same shapes
converted anything again, and the wall time of the compiling call.
:func:`torch_compile_counts` gives torch.compile's graphs and breaks for the
same entry, as a reference.
"""

from __future__ import annotations

import copy
import os
import sysconfig
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from zoo import GENERATE_TOKENS, TRAIN_STEPS, Built, Entry, tensors_of

__all__ = ["Result", "check", "torch_compile_counts"]

# small steps: the comparison with eager checks the compiled gradients, not how a large step amplifies rounding
LEARNING_RATE = 1e-3
FALLBACK_KINDS = ("eager", "error", "cache_limit")
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


@dataclass
class Result:
    """What compiling one entry produced, against eager."""

    name: str
    backend: str
    correct: bool = False
    mismatch: str = ""
    graphs: int = 0
    breaks: int = 0
    break_reasons: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    recompiled: list[str] = field(default_factory=list)
    compile_seconds: float = 0.0
    error: str = ""
    prefill_compiles: int = 0
    decode_compiles: int = 0

    def failures(self) -> list[str]:
        """Every way the entry falls short of: equal to eager, one graph, no break, no fallback, no recompile."""
        found = []
        if self.error:
            found.append(f"raised {self.error}")
        if not self.correct and not self.error:
            found.append(f"differs from eager: {self.mismatch}")
        if self.graphs != 1:
            found.append(f"{self.graphs} graphs")
        if self.breaks:
            found.append(f"{self.breaks} graph breaks: " + "; ".join(self.break_reasons))
        if self.fallbacks:
            found.append("fell back to eager: " + "; ".join(self.fallbacks))
        if self.recompiled:
            found.append("converted again on a call with the same shapes: " + "; ".join(self.recompiled))
        if self.decode_compiles > 2:
            found.append(f"{self.decode_compiles} compiles while decoding (at most 2 allowed)")
        return found


def _first_line(text: str, limit: int = 240) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


@contextmanager
def _watch(result: Result) -> Iterator[list[Any]]:
    """Observe conversions and dynajit's RuntimeWarnings; fold fallbacks into ``result``; yield the frames."""
    import dynajit.capture as capture

    with capture.observe() as seen, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield seen.frames
        finally:
            for frame in seen.frames:
                if frame.kind in FALLBACK_KINDS:
                    result.fallbacks.append(f"{frame.kind} {frame.name}: {_first_line(frame.reason)}")
            for warning in caught:
                text = str(warning.message)
                if issubclass(warning.category, RuntimeWarning) and ("dynajit" in text or "inductor-lite" in text):
                    result.fallbacks.append(f"warning: {_first_line(text)}")
            result.fallbacks[:] = list(dict.fromkeys(result.fallbacks))


def _count(result: Result, frames: list[Any], graphs: bool = True) -> None:
    if graphs:
        result.graphs += sum(len(frame.graphs) for frame in frames)
    breaks = [brk for frame in frames for brk in frame.graph_breaks]
    result.breaks += len(breaks)
    reasons = [f"{_first_line(brk.reason)} @ {_short_location(brk)}" for brk in breaks]
    result.break_reasons = list(dict.fromkeys([*result.break_reasons, *reasons]))


def _short_location(brk: Any) -> str:
    """The innermost frame of the break's stack outside the standard library, as ``<last path parts>:<line>``."""
    if not brk.user_stack:
        return "<unknown>"
    frames = [f for f in brk.user_stack if not f.filename.startswith("<frozen") and not f.filename.startswith(_STDLIB)]
    frame = (frames or list(brk.user_stack))[-1]
    parts = frame.filename.replace("\\", "/").split("/")
    if "site-packages" in parts:
        parts = parts[parts.index("site-packages") + 1 :]
    return f"{'/'.join(parts[-3:])}:{frame.lineno}"


def _conversions(frames: list[Any]) -> list[str]:
    return [f"{frame.name} ({frame.kind}; {'; '.join(frame.recompile_reasons)[:200]})" for frame in frames]


def _compare(expected: Any, actual: Any, rtol: float, atol: float, what: str) -> str:
    """'' when every tensor of ``actual`` matches ``expected``; else the first difference."""
    want, got = tensors_of(expected), tensors_of(actual)
    if len(want) != len(got):
        return f"{what}: {len(got)} tensors, eager has {len(want)}"
    for index, (a, b) in enumerate(zip(want, got, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{what}[{index}]: {tuple(b.shape)} {b.dtype}, eager {tuple(a.shape)} {a.dtype}"
        if not a.dtype.is_floating_point:
            if not torch.equal(a, b):
                return f"{what}[{index}]: integer values differ"
            continue
        if not torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            error = (a.double() - b.double()).abs().nan_to_num(float("inf")).max().item()
            return f"{what}[{index}] {tuple(a.shape)}: max abs error {error:.3g} (rtol {rtol}, atol {atol})"
    return ""


def _copies(built: Built) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return copy.deepcopy(built.args), copy.deepcopy(built.kwargs)


def _loss(model: torch.nn.Module, built: Built) -> tuple[torch.Tensor, Any]:
    args, kwargs = _copies(built)
    target = kwargs.pop("target", None)
    out = model(*args, **kwargs)
    loss = out.loss if target is None else F.cross_entropy(out, target)
    return loss, out


def _state(model: torch.nn.Module) -> dict[str, Any]:
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return {"grads": grads, "state": dict(model.state_dict())}


def _train(model: torch.nn.Module, built: Built, call: Callable[..., Any]) -> tuple[list[torch.Tensor], Any]:
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for _ in range(TRAIN_STEPS):
        optimizer.zero_grad()
        loss, _ = _loss(call, built)
        loss.backward()
        losses.append(loss.detach())
        optimizer.step()
    return losses, _state(model)


def _greedy(call: Callable[..., Any], built: Built, on_prefill: Callable[[], None] | None = None) -> Any:
    out = call(input_ids=built.kwargs["input_ids"], use_cache=True)
    if on_prefill is not None:
        on_prefill()
    tokens, logits = [], [out.logits[:, -1]]
    token = out.logits[:, -1].argmax(-1, keepdim=True)
    for _ in range(GENERATE_TOKENS - 1):
        tokens.append(token)
        out = call(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
        logits.append(out.logits[:, -1])
        token = out.logits[:, -1].argmax(-1, keepdim=True)
    tokens.append(token)
    return torch.cat(tokens, dim=1), torch.stack(logits)


def check(entry: Entry, backend: str = "inductor") -> Result:
    """Compile ``entry`` with dynajit's ``backend`` and compare it with eager; never raises for the model's sake."""
    import dynajit.compiler

    result = Result(entry.name, backend)
    dynajit.compiler.reset()
    try:
        built = entry.build()
        eager_built = entry.build()
        if entry.mode == "eval":
            _check_eval(entry, built, eager_built, result, backend)
        elif entry.mode == "train":
            _check_train(entry, built, eager_built, result, backend)
        else:
            _check_generate(entry, built, eager_built, result, backend)
    except Exception as error:
        result.error = f"{type(error).__name__}: {_first_line(str(error))}"
        result.mismatch = "".join(traceback.format_exception_only(error)).strip()[:400]
    finally:
        dynajit.compiler.reset()
    return result


def _check_eval(entry: Entry, built: Built, eager_built: Built, result: Result, backend: str) -> None:
    import dynajit.compiler

    eager_model = eager_built.model.eval()
    model = built.model.eval()
    with torch.no_grad():
        expected = eager_model(*eager_built.args, **eager_built.kwargs)
        compiled = dynajit.compiler.compile(model, backend=backend)
        with _watch(result) as frames:
            start = time.perf_counter()
            args, kwargs = _copies(built)
            actual = compiled(*args, **kwargs)
            result.compile_seconds = time.perf_counter() - start
        _count(result, frames)
        result.mismatch = _compare(expected, actual, entry.rtol, entry.atol, "output")
        with _watch(result) as frames:
            args, kwargs = _copies(built)
            again = compiled(*args, **kwargs)
        result.recompiled = _conversions(frames)
    result.mismatch = result.mismatch or _compare(expected, again, entry.rtol, entry.atol, "second output")
    result.correct = not result.mismatch


def _check_train(entry: Entry, built: Built, eager_built: Built, result: Result, backend: str) -> None:
    import dynajit.compiler

    eager_model = eager_built.model.train()
    model = built.model.train()
    want_losses, want_state = _train(eager_model, eager_built, eager_model)
    compiled = dynajit.compiler.compile(model, backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for step in range(TRAIN_STEPS):
        with _watch(result) as frames:
            start = time.perf_counter()
            optimizer.zero_grad()
            loss, _ = _loss(compiled, built)
            loss.backward()
            if step == 0:
                result.compile_seconds = time.perf_counter() - start
            optimizer.step()
        if step == 0:
            _count(result, frames)
        else:
            result.recompiled += _conversions(frames)
        losses.append(loss.detach())
    got_state = _state(model)
    result.mismatch = (
        _compare(want_losses, losses, entry.rtol, entry.atol, "losses")
        or _compare(
            list(want_state["grads"].items()), list(got_state["grads"].items()), entry.rtol, entry.atol, "grads"
        )
        or _compare(want_state["state"], got_state["state"], entry.rtol, entry.atol, "parameters/buffers")
    )
    if not result.mismatch and set(want_state["grads"]) != set(got_state["grads"]):
        result.mismatch = "a different set of parameters received gradients"
    result.correct = not result.mismatch


def _check_generate(entry: Entry, built: Built, eager_built: Built, result: Result, backend: str) -> None:
    import dynajit.compiler

    eager_model = eager_built.model.eval()
    model = built.model.eval()
    with torch.no_grad():
        want_tokens, want_logits = _greedy(eager_model, eager_built)
        compiled = dynajit.compiler.compile(model, backend=backend)
        with _watch(result) as frames:
            marks: list[int] = []
            start = time.perf_counter()
            tokens, logits = _greedy(compiled, built, on_prefill=lambda: marks.append(len(frames)))
            result.compile_seconds = time.perf_counter() - start
        prefill, decode = frames[: marks[0]], frames[marks[0] :]
        _count(result, prefill)
        result.prefill_compiles = len(prefill)
        result.decode_compiles = len(decode)
        _count(result, decode, graphs=False)  # a decode step's graph breaks matter as much as the prefill's
        with _watch(result) as again:
            tokens_again, _ = _greedy(compiled, built)
        result.recompiled = _conversions(again)
    result.mismatch = (
        ("generated tokens differ" if not torch.equal(want_tokens, tokens) else "")
        or _compare(want_logits, logits, entry.rtol, entry.atol, "logits")
        or ("second generation's tokens differ" if not torch.equal(want_tokens, tokens_again) else "")
    )
    result.correct = not result.mismatch


def torch_compile_counts(entry: Entry) -> tuple[int, int, list[str]]:
    """torch.compile's (graphs, graph breaks, distinct break reasons) for the entry's first call.

    For ``generate`` entries, the whole decoding loop (so the graphs count the recompiles too).

    Uses torch.compile's ``eager`` backend: graph capture is what is counted, and
    it does not depend on the backend.
    """
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    built = entry.build()
    model = built.model.train() if entry.mode == "train" else built.model.eval()
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad() if entry.mode != "train" else torch.enable_grad():
        if entry.mode == "train":
            loss, _ = _loss(compiled, built)
            loss.backward()
        elif entry.mode == "generate":
            _greedy(compiled, built)
        else:
            compiled(*built.args, **built.kwargs)
    reasons = [_first_line(reason) for reason in counters["graph_break"]]
    graphs = counters["stats"]["unique_graphs"]
    breaks = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    return graphs, breaks, reasons
