"""The real-model suite: every eval and train entry of the model zoo (``tests/models/zoo.py``) as a workload.

The zoo builds small torchvision, timm and transformers models offline from
configs with seeded random weights; the tests compile them once against eager,
the benchmarks time them. Each workload belongs to a group the report
summarises on its own: ``cnn`` (convolutional inference), ``transformer``
(attention models' inference, vision transformers included) and ``training``
(forward, loss and backward). ``generate`` entries (greedy decoding) join only
with ``--generate``. A package that is missing or built for another torch makes
its models "skipped" with the one-line reason.
"""

from __future__ import annotations

import functools
import importlib
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from harness.workloads import Case, Workload

__all__ = ["GROUPS", "VISION_TRANSFORMERS", "group_of", "real_models"]

ZOO_DIR = pathlib.Path(__file__).resolve().parents[2] / "tests" / "models"
GROUPS = {
    "cnn": "CNN inference",
    "transformer": "transformer inference",
    "training": "training",
    "generate": "generation",
}
# Attention models among the image models: they are transformers whatever package builds them.
VISION_TRANSFORMERS = frozenset({"vit", "swin", "timm_vit"})


def _zoo() -> Any:
    if str(ZOO_DIR) not in sys.path:
        sys.path.insert(0, str(ZOO_DIR))
    return importlib.import_module("zoo")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _probe(package: str, tiny_forward: Callable[[], Any]) -> str | None:
    """None when ``package`` imports and ``tiny_forward`` runs; otherwise a one-line reason to skip."""
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        return f"{package} not installed ({_first_line(exc)})"
    except Exception as exc:  # a wheel built against another torch fails here with an operator error
        return f"{package} does not match torch {torch.__version__}: {_first_line(exc)}"
    try:
        with torch.no_grad():
            tiny_forward()
    except Exception as exc:
        version = getattr(module, "__version__", "?")
        return f"{package} {version} does not run with torch {torch.__version__}: {_first_line(exc)}"
    return None


def _torchvision_forward() -> None:
    """One of torchvision's own C++ operators (absent when the wheel was built for another torch)."""
    from torchvision.ops import nms

    nms(torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]), torch.tensor([0.9, 0.8]), 0.5)


@functools.cache
def package_unavailable(package: str) -> str | None:
    """Why ``package``'s models cannot run here, or None."""
    forward = _torchvision_forward if package == "torchvision" else (lambda: None)
    return _probe(package, forward)


def group_of(name: str, package: str, mode: str) -> str:
    """The report group of a zoo entry (see the module docstring)."""
    if mode == "train":
        return "training"
    if mode == "generate":
        return "generate"
    if package == "transformers" or name in VISION_TRANSFORMERS:
        return "transformer"
    return "cnn"


def _outputs(value: Any) -> list[torch.Tensor]:
    return _zoo().tensors_of(value)


def _eval_case(entry: Any) -> Case:
    built = entry.build()
    model = built.model.eval()

    def run(fn: Callable[..., Any]) -> Any:
        with torch.no_grad():
            return _outputs(fn(*built.args, **built.kwargs))

    return Case(model, run, entry.rtol, entry.atol, built.args)


def _train_case(entry: Any) -> Case:
    """One step: zeroed gradients, forward, loss, backward; returns the loss and every gradient.

    No optimizer step, so every sample times the same computation on the same weights and the output of
    the check after timing is still comparable with eager's.
    """
    built = entry.build()
    model = built.model.train()
    params = [param for param in model.parameters() if param.requires_grad]
    kwargs = dict(built.kwargs)
    target = kwargs.pop("target", None)

    def run(fn: Callable[..., Any]) -> Any:
        for param in params:
            param.grad = None
        out = fn(*built.args, **kwargs)
        loss = out.loss if target is None else F.cross_entropy(out, target)
        loss.backward()
        return (loss.detach(), *(param.grad for param in params))

    return Case(model, run, entry.rtol, entry.atol, built.args)


def _generate_case(entry: Any) -> Case:
    """Greedy decoding of the zoo's token count with the KV cache: one forward per token."""
    built = entry.build()
    model = built.model.eval()
    steps = _zoo().GENERATE_TOKENS

    def run(fn: Callable[..., Any]) -> Any:
        with torch.no_grad():
            out = fn(input_ids=built.kwargs["input_ids"], use_cache=True)
            tokens = [out.logits[:, -1].argmax(-1, keepdim=True)]
            for _ in range(steps - 1):
                out = fn(input_ids=tokens[-1], past_key_values=out.past_key_values, use_cache=True)
                tokens.append(out.logits[:, -1].argmax(-1, keepdim=True))
            return torch.cat(tokens, dim=1)

    return Case(model, run, entry.rtol, entry.atol)


_CASES = {"eval": _eval_case, "train": _train_case, "generate": _generate_case}


def _describe(entry: Any) -> str:
    what = {"eval": "inference, no_grad", "train": "forward+loss+backward", "generate": "greedy decoding"}[entry.mode]
    attn = f", attn {entry.attn}" if entry.attn else ""
    return f"{entry.package} {entry.name.split('-')[0]}, {what}{attn}"


def real_models(generate: bool = False) -> list[Workload]:
    """A workload per zoo entry (eval and train; generate ones too with ``generate``); [] without the zoo."""
    try:
        entries = _zoo().ENTRIES
    except Exception:
        return []
    workloads = []
    for entry in entries:
        if entry.mode == "generate" and not generate:
            continue
        workloads.append(
            Workload(
                entry.name,
                _describe(entry),
                functools.partial(_CASES[entry.mode], entry),
                in_quick=False,
                unavailable=functools.partial(package_unavailable, entry.package),
                group=group_of(entry.name, entry.package, entry.mode),
            )
        )
    return workloads
