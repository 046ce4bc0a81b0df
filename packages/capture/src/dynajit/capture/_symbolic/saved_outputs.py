"""Eager's version check of the graph outputs its autograd saved, made at the backward of a compiled graph.

Eager's ``relu``, ``exp``, ``sigmoid`` save their result for the backward, and a backward that reaches such an op
refuses the result once it was written in place ("modified by an inplace operation"). A backend saves what its
own backward needs, which need not be the output (inductor-lite's relu saves a mask), so a write into the output
after the call went unnoticed and the backward computed where eager raises.

Tracing notes which tensors each recorded op saved (``noting_saved_tensors``); :func:`saved_output_checks` finds
the outputs among them, with the outputs through which a gradient reaches the op that saved each, and
:func:`checking_saved_outputs` records each such output's version after the call and checks it when the backward
reaches one of those outputs with a gradient, as eager checks it when the backward reaches the saving op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from dynajit.capture._symbolic import eager_checks

__all__ = ["SavedOutputCheck", "checking_saved_outputs", "saved_output_checks"]

#: An output eager saved (its index) and the outputs through which the backward reaches the op that saved it.
SavedOutputCheck = tuple[int, tuple[int, ...]]


def saved_output_checks(
    graph: torch.fx.Graph,
    outputs: Sequence[torch.fx.Node],
    saved: dict[int, list[tuple[torch.fx.Node, torch.Tensor]]],
) -> list[SavedOutputCheck]:
    """For each output whose memory an op of ``graph`` saved for its backward (``saved``: by storage), the
    outputs whose gradients reach that op: the op's own result and the values computed from it after it."""
    if not saved:
        return []
    order = {node: i for i, node in enumerate(graph.nodes)}
    position = {node: i for i, node in enumerate(outputs)}
    checks: list[SavedOutputCheck] = []
    for i, node in enumerate(outputs):
        example = eager_checks.example_tensor(node)
        if example is None or not example.requires_grad:
            continue
        reaching: set[int] = set()
        for saver, _ in saved.get(eager_checks.storage_key(example), ()):
            reaching |= {position[n] for n in _computed_after(saver, order) if n in position}
        if reaching:
            checks.append((i, tuple(sorted(reaching))))
    return checks


def _computed_after(saver: torch.fx.Node, order: dict[torch.fx.Node, int]) -> set[torch.fx.Node]:
    """``saver`` and the nodes computed from its result after it. An in-place op's later readers name the tensor
    it wrote (capture returns its argument), so theirs count from the written node's users recorded after it."""
    start = [saver]
    if eager_checks.written(saver.target, saver.args, saver.kwargs):
        written = saver.args[0]
        if isinstance(written, torch.fx.Node):
            start += [user for user in written.users if order.get(user, -1) > order[saver]]
    seen: set[torch.fx.Node] = set()
    while start:
        node = start.pop()
        if node not in seen:
            seen.add(node)
            start.extend(node.users)
    return seen


def checking_saved_outputs(compiled: Callable[..., Any], checks: list[SavedOutputCheck]) -> Callable[..., Any]:
    """``compiled``, each output of ``checks`` checked at the backward as eager checks a tensor it saved."""
    if not checks:
        return compiled

    def run(*args: Any) -> Any:
        results = compiled(*args)
        if torch.is_grad_enabled():
            _check_at_backward(results, checks)
        return results

    return run


def _check_at_backward(results: Sequence[Any], checks: list[SavedOutputCheck]) -> None:
    """One pre-hook per autograd node the checked outputs come from, checking every saved output reached there."""
    per_node: dict[Any, list[tuple[torch.Tensor, int, tuple[int, ...]]]] = {}
    for saved_at, reaching in checks:
        saved = results[saved_at]
        if not isinstance(saved, torch.Tensor):
            continue
        slots: dict[Any, list[int]] = {}
        for j in reaching:
            out = results[j]
            if isinstance(out, torch.Tensor) and out.grad_fn is not None:
                slots.setdefault(out.grad_fn, []).append(out.output_nr)
        if not slots:
            continue
        # An alias shares the version counter and holds no history: the hook makes no reference cycle through the
        # node, and keeps the memory as eager's saved tensor does.
        alias, version = saved.detach(), saved._version
        for node, nrs in slots.items():
            per_node.setdefault(node, []).append((alias, version, tuple(nrs)))
    for node, entries in per_node.items():
        node.register_prehook(_version_check(entries))


def _version_check(entries: list[tuple[torch.Tensor, int, tuple[int, ...]]]) -> Callable[..., None]:
    def check(grad_outputs: Sequence[Any]) -> None:
        for alias, version, slots in entries:
            if alias._version != version and any(grad_outputs[k] is not None for k in slots):
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{alias.type()} {list(alias.shape)}] is at version {alias._version}; expected "
                    f"version {version} instead. Hint: it is an output of a compiled graph that an op of the graph "
                    "saved for its backward (as eager saves it), and it was written in place before the backward "
                    "reached that op."
                )

    return check
