"""Real models from torchvision and transformers, built from small configs with random weights.

They join the suite only when their package imports and runs one tiny forward
with the installed torch (a torchvision wheel built for another torch fails at
import or at its first operator); otherwise the report says why in one line.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import torch

from harness.workloads import Case, Workload

__all__ = ["REAL_MODELS"]


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


def _resnet18() -> torch.nn.Module:
    from torchvision.models import resnet18

    return resnet18(weights=None, num_classes=100).eval()


def _bert() -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
        max_position_embeddings=128,
    )
    return BertModel(config).eval()


def _gpt2() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=2, n_positions=128)
    return GPT2LMHeadModel(config).eval()


def _image_case() -> Case:
    torch.manual_seed(0)
    model = _resnet18()
    images = torch.randn(4, 3, 64, 64)

    def run(fn: Callable[..., Any]) -> Any:
        with torch.no_grad():
            return fn(images)

    return Case(model, run, rtol=1e-3, atol=1e-3)


def _token_case(make: Callable[[], torch.nn.Module]) -> Case:
    torch.manual_seed(0)
    model = make()
    tokens = torch.randint(0, 1000, (4, 64))

    def run(fn: Callable[..., Any]) -> Any:
        with torch.no_grad():
            return fn(tokens)[0]  # last hidden state / logits

    return Case(model, run, rtol=1e-3, atol=1e-3)


def _torchvision_forward() -> None:
    """A tiny resnet18 forward, and one of torchvision's own C++ operators (absent when built for another torch)."""
    from torchvision.ops import nms

    _resnet18()(torch.randn(1, 3, 32, 32))
    nms(torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]), torch.tensor([0.9, 0.8]), 0.5)


@functools.cache
def _torchvision_unavailable() -> str | None:
    return _probe("torchvision", _torchvision_forward)


@functools.cache
def _transformers_unavailable() -> str | None:
    return _probe("transformers", lambda: _bert()(torch.randint(0, 1000, (1, 8))))


REAL_MODELS: list[Workload] = [
    Workload(
        "resnet18", "torchvision resnet18, random weights, 4x3x64x64", _image_case, False, _torchvision_unavailable
    ),
    Workload(
        "bert_small",
        "transformers BERT, 2 layers, hidden 128, 4x64 tokens",
        lambda: _token_case(_bert),
        False,
        _transformers_unavailable,
    ),
    Workload(
        "gpt2_small",
        "transformers GPT-2 LM, 2 layers, n_embd 128, 4x64 tokens",
        lambda: _token_case(_gpt2),
        False,
        _transformers_unavailable,
    ),
]
