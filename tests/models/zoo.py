"""The real-model zoo: small, randomly initialised architectures from torchvision, timm and transformers.

Every entry is built offline from a config or constructor (no download) at a
size that runs in well under a second eagerly on two cores: few layers, a small
hidden size, small inputs. The table is shared by the model tests and the
benchmarks: an :class:`Entry` names its package, how it is exercised (``mode``)
and a builder returning a :class:`Built` (the model, its example positional and
keyword inputs). Builders seed torch themselves, so two builds of one entry
have the same weights and inputs.

Modes:
    ``eval``: one forward in ``eval()`` under ``torch.no_grad()`` (dropout off,
    BatchNorm on running statistics).
    ``train``: ``TRAIN_STEPS`` optimizer steps (forward, loss, backward, SGD step)
    in ``train()`` mode with dropout probabilities set to zero.
    ``generate``: greedy decoding of ``GENERATE_TOKENS`` tokens with the model's
    KV cache, calling the model's forward once per token.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["ENTRIES", "GENERATE_TOKENS", "TRAIN_STEPS", "Built", "Entry", "entry", "tensors_of"]

TRAIN_STEPS = 3
GENERATE_TOKENS = 16
VOCAB = 128


@dataclass
class Built:
    """A model ready to run and the inputs of one call: ``model(*args, **kwargs)``."""

    model: torch.nn.Module
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def example_inputs(self) -> tuple[Any, ...]:
        """The positional inputs (the benchmarks' name for them)."""
        return self.args


@dataclass(frozen=True)
class Entry:
    """One model of the zoo.

    Attributes:
        name: unique id, ``<architecture>[-<attention implementation>][-<mode>]``.
        package: the distribution the builder needs (``torchvision``, ``timm``, ``transformers``).
        build: returns a fresh :class:`Built` with deterministic weights and inputs.
        mode: ``eval``, ``train`` or ``generate`` (see the module docstring).
        attn: the transformers ``attn_implementation`` asked for (None: the library's default).
        rtol, atol: tolerance of the comparison with eager.
    """

    name: str
    package: str
    build: Callable[[], Built]
    mode: str = "eval"
    attn: str | None = None
    rtol: float = 1e-4
    atol: float = 1e-4

    def available(self) -> bool:
        """True when the package the builder needs is installed."""
        return importlib.util.find_spec(self.package) is not None


def tensors_of(value: Any) -> list[torch.Tensor]:
    """Every tensor inside a model output, in a stable order.

    Walks tuples, lists, dicts (transformers' ``ModelOutput`` is one) and
    transformers' KV caches (their ``layers``' ``keys`` and ``values``).
    """
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_of(item)]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_of(item)]
    layers = getattr(value, "layers", None)
    if isinstance(layers, list):
        return [t for layer in layers for t in tensors_of(_layer_state(layer))]
    return []


def _layer_state(layer: Any) -> list[Any]:
    """A cache layer's tensors: an attention layer's keys and values, else its attributes in name order (the
    states of a linear-attention or state-space layer)."""
    if hasattr(layer, "keys") and hasattr(layer, "values"):
        return [layer.keys, layer.values]
    return [value for _, value in sorted(vars(layer).items())]


def _seeded(fn: Callable[[], Built]) -> Callable[[], Built]:
    def build() -> Built:
        torch.manual_seed(0)
        return fn()

    build.__name__ = fn.__name__
    return build


def _images(size: int, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, size, size)


def _tokens(batch: int = 2, length: int = 8) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length))


# --- torchvision -------------------------------------------------------------------------------------------------


def _tv(name: str, size: int = 64, **kwargs: Any) -> Callable[[], Built]:
    def build() -> Built:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None, **kwargs)
        return Built(model, (_images(size),))

    build.__name__ = f"tv_{name}"
    return _seeded(build)


@_seeded
def _tv_densenet() -> Built:
    from torchvision.models import DenseNet

    model = DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, bn_size=2, num_classes=10)
    return Built(model, (_images(64),))


@_seeded
def _tv_convnext() -> Built:
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    settings = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, None, 1)]
    return Built(ConvNeXt(settings, num_classes=10), (_images(64),))


@_seeded
def _tv_vit() -> Built:
    from torchvision.models import VisionTransformer

    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)
    return Built(model, (_images(32),))


@_seeded
def _tv_swin() -> Built:
    from torchvision.models import SwinTransformer

    model = SwinTransformer(
        patch_size=[4, 4], embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=[4, 4], num_classes=10
    )
    return Built(model, (_images(32),))


# --- timm ----------------------------------------------------------------------------------------------------------


def _timm(name: str, size: int, **kwargs: Any) -> Callable[[], Built]:
    def build() -> Built:
        import timm

        model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs)
        return Built(model, (_images(size),))

    build.__name__ = f"timm_{name}"
    return _seeded(build)


# --- transformers ------------------------------------------------------------------------------------------------

# Small shapes every text config shares; each builder maps them onto its config's own names.
_HIDDEN, _HEADS, _LAYERS, _FFN, _POSITIONS = 32, 4, 2, 64, 64


def _hf_config(model_type: str, **kwargs: Any) -> Any:
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type, **kwargs)
    _small_token_ids(config)
    return config


def _small_token_ids(config: Any) -> None:
    """Special token ids inside the small vocabulary (the defaults index the full-size one)."""
    for name, value in list(vars(config).items()):
        if name.endswith("token_id") and isinstance(value, int) and value >= VOCAB:
            setattr(config, name, VOCAB - 1)


def _hf_model(auto_class: str, config: Any, attn: str | None) -> torch.nn.Module:
    import transformers

    extra = {} if attn is None else {"attn_implementation": attn}
    cls = getattr(transformers, auto_class)
    # Auto classes build through from_config; a concrete model class through _from_config
    build = cls.from_config if auto_class.startswith("Auto") else cls._from_config
    return build(config, **extra)


def _standard_sizes() -> dict[str, Any]:
    """The size arguments of the configs that use transformers' usual names."""
    return {
        "vocab_size": VOCAB,
        "hidden_size": _HIDDEN,
        "num_hidden_layers": _LAYERS,
        "num_attention_heads": _HEADS,
        "intermediate_size": _FFN,
        "max_position_embeddings": _POSITIONS,
    }


def _encoder_config(model_type: str) -> Any:
    common = _standard_sizes()
    if model_type == "distilbert":
        return _hf_config(
            "distilbert", vocab_size=VOCAB, dim=_HIDDEN, n_layers=_LAYERS, n_heads=_HEADS, hidden_dim=_FFN
        )
    if model_type == "albert":
        common["embedding_size"] = 16
    if model_type == "roberta":
        common["max_position_embeddings"] = _POSITIONS + 2
    return _hf_config(model_type, **common)


def _decoder_config(model_type: str) -> Any:
    rope = _standard_sizes()
    if model_type in ("llama", "mistral", "qwen2"):
        # grouped-query attention: two query heads share each key/value head
        return _hf_config(model_type, num_key_value_heads=2, **rope)
    if model_type == "phi":
        return _hf_config("phi", partial_rotary_factor=0.5, **rope)
    if model_type == "gpt_neox":
        return _hf_config("gpt_neox", rotary_pct=0.5, **rope)
    if model_type == "gpt2":
        return _hf_config(
            "gpt2", vocab_size=VOCAB, n_embd=_HIDDEN, n_layer=_LAYERS, n_head=_HEADS, n_positions=_POSITIONS
        )
    if model_type == "gpt_neo":
        return _hf_config(
            "gpt_neo",
            vocab_size=VOCAB,
            hidden_size=_HIDDEN,
            num_layers=_LAYERS,
            num_heads=_HEADS,
            attention_types=[[["global", "local"], 1]],
            window_size=4,
            max_position_embeddings=_POSITIONS,
        )
    if model_type == "opt":
        return _hf_config(
            "opt",
            vocab_size=VOCAB,
            hidden_size=_HIDDEN,
            num_hidden_layers=_LAYERS,
            num_attention_heads=_HEADS,
            ffn_dim=_FFN,
            word_embed_proj_dim=_HIDDEN,
            max_position_embeddings=_POSITIONS,
        )
    if model_type == "falcon":
        return _hf_config(
            "falcon", vocab_size=VOCAB, hidden_size=_HIDDEN, num_hidden_layers=_LAYERS, num_attention_heads=_HEADS
        )
    raise ValueError(model_type)


def _seq2seq_config(model_type: str) -> Any:
    if model_type == "t5":
        return _hf_config(
            "t5",
            vocab_size=VOCAB,
            d_model=_HIDDEN,
            d_kv=8,
            d_ff=_FFN,
            num_layers=_LAYERS,
            num_decoder_layers=_LAYERS,
            num_heads=_HEADS,
            relative_attention_num_buckets=8,
            decoder_start_token_id=0,
        )
    sizes = {
        "d_model": _HIDDEN,
        "encoder_layers": _LAYERS,
        "decoder_layers": _LAYERS,
        "encoder_attention_heads": _HEADS,
        "decoder_attention_heads": _HEADS,
        "encoder_ffn_dim": _FFN,
        "decoder_ffn_dim": _FFN,
        "vocab_size": VOCAB,
    }
    if model_type == "bart":
        return _hf_config("bart", max_position_embeddings=_POSITIONS, **sizes)
    if model_type == "whisper":
        return _hf_config("whisper", num_mel_bins=16, max_source_positions=16, max_target_positions=_POSITIONS, **sizes)
    raise ValueError(model_type)


def _hf_encoder(model_type: str, attn: str | None) -> Callable[[], Built]:
    def build() -> Built:
        model = _hf_model("AutoModel", _encoder_config(model_type), attn)
        ids = _tokens()
        mask = torch.ones_like(ids)
        mask[1, -2:] = 0  # a padded second row: the attention mask matters
        return Built(model, (), {"input_ids": ids, "attention_mask": mask})

    return _seeded(build)


def _hf_decoder(model_type: str, attn: str | None) -> Callable[[], Built]:
    def build() -> Built:
        model = _hf_model("AutoModelForCausalLM", _decoder_config(model_type), attn)
        return Built(model, (), {"input_ids": _tokens()})

    return _seeded(build)


def _hf_seq2seq(model_type: str, attn: str | None) -> Callable[[], Built]:
    def build() -> Built:
        config = _seq2seq_config(model_type)
        if model_type == "whisper":
            model = _hf_model("WhisperForConditionalGeneration", config, attn)
            features = torch.randn(2, config.num_mel_bins, 2 * config.max_source_positions)
            return Built(model, (), {"input_features": features, "decoder_input_ids": _tokens(length=4)})
        model = _hf_model("AutoModelForSeq2SeqLM", config, attn)
        return Built(model, (), {"input_ids": _tokens(), "decoder_input_ids": _tokens(length=4)})

    return _seeded(build)


def _hf_clip(tower: str, attn: str | None) -> Callable[[], Built]:
    def build() -> Built:
        import transformers

        sizes = {
            "hidden_size": _HIDDEN,
            "intermediate_size": _FFN,
            "num_hidden_layers": _LAYERS,
            "num_attention_heads": _HEADS,
        }
        if tower == "vision":
            config = transformers.CLIPVisionConfig(image_size=32, patch_size=8, **sizes)
            _small_token_ids(config)
            return Built(_hf_model("CLIPVisionModel", config, attn), (), {"pixel_values": _images(32)})
        config = transformers.CLIPTextConfig(vocab_size=VOCAB, max_position_embeddings=_POSITIONS, **sizes)
        _small_token_ids(config)
        return Built(_hf_model("CLIPTextModel", config, attn), (), {"input_ids": _tokens()})

    return _seeded(build)


# --- training ------------------------------------------------------------------------------------------------------


def _no_dropout(config: Any) -> Any:
    for name in dir(config):
        if "dropout" in name or name.endswith("_pdrop"):
            value = getattr(config, name, None)
            if isinstance(value, float):
                setattr(config, name, 0.0)
    return config


@_seeded
def _train_resnet() -> Built:
    from torchvision.models.resnet import BasicBlock, ResNet

    # float64: a randomly initialised network's BatchNorm gradients in train mode are so ill-conditioned that
    # float32 rounding alone (torch.compile's as much as dynajit's) moves them by percents within three steps
    model = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10).double()
    return Built(model, (_images(64, batch=4).double(),), {"target": torch.randint(0, 10, (4,))})


@_seeded
def _train_vit() -> Built:
    built = _tv_vit()
    return Built(built.model, built.args, {"target": torch.randint(0, 1000, (2,))})


@_seeded
def _train_llama() -> Built:
    model = _hf_model("AutoModelForCausalLM", _no_dropout(_decoder_config("llama")), None)
    ids = _tokens()
    return Built(model, (), {"input_ids": ids, "labels": ids})


@_seeded
def _train_bert() -> Built:
    config = _no_dropout(_encoder_config("bert"))
    config.num_labels = 3
    # what the first call would otherwise write into the config, so every step sees the same config
    config.problem_type = "single_label_classification"
    model = _hf_model("AutoModelForSequenceClassification", config, None)
    return Built(model, (), {"input_ids": _tokens(), "labels": torch.tensor([0, 2])})


# --- generation ----------------------------------------------------------------------------------------------------


def _generator(model_type: str) -> Callable[[], Built]:
    def build() -> Built:
        model = _hf_model("AutoModelForCausalLM", _decoder_config(model_type), None)
        return Built(model, (), {"input_ids": _tokens(batch=1, length=4)})

    return _seeded(build)


# --- the table -----------------------------------------------------------------------------------------------------

_ATTN = (None, "eager")


def _attn_name(attn: str | None) -> str:
    return "default" if attn is None else attn


def _build_table() -> list[Entry]:
    table = [
        Entry("resnet18", "torchvision", _tv("resnet18")),
        Entry("mobilenet_v2", "torchvision", _tv("mobilenet_v2")),
        Entry("mobilenet_v3_small", "torchvision", _tv("mobilenet_v3_small")),
        Entry("efficientnet_b0", "torchvision", _tv("efficientnet_b0")),
        Entry("convnext", "torchvision", _tv_convnext),
        Entry("regnet_y_400mf", "torchvision", _tv("regnet_y_400mf")),
        Entry("densenet", "torchvision", _tv_densenet),
        Entry("shufflenet_v2_x0_5", "torchvision", _tv("shufflenet_v2_x0_5")),
        Entry("squeezenet1_1", "torchvision", _tv("squeezenet1_1")),
        Entry("vit", "torchvision", _tv_vit),
        Entry("swin", "torchvision", _tv_swin),
        Entry("timm_resnet10t", "timm", _timm("resnet10t", 64)),
        Entry("timm_convnext_atto", "timm", _timm("convnext_atto", 64)),
        Entry("timm_vit", "timm", _timm("vit_tiny_patch16_224", 32, img_size=32, patch_size=8, depth=2)),
    ]
    for attn in _ATTN:
        suffix = _attn_name(attn)
        for model_type in ("bert", "distilbert", "roberta", "albert"):
            table.append(Entry(f"{model_type}-{suffix}", "transformers", _hf_encoder(model_type, attn), attn=attn))
        for model_type in ("llama", "mistral", "qwen2", "phi", "gpt2", "gpt_neo", "gpt_neox", "opt", "falcon"):
            table.append(Entry(f"{model_type}-{suffix}", "transformers", _hf_decoder(model_type, attn), attn=attn))
        for model_type in ("t5", "bart", "whisper"):
            table.append(Entry(f"{model_type}-{suffix}", "transformers", _hf_seq2seq(model_type, attn), attn=attn))
        for tower in ("vision", "text"):
            table.append(Entry(f"clip_{tower}-{suffix}", "transformers", _hf_clip(tower, attn), attn=attn))
    table += [
        Entry("resnet10-train", "torchvision", _train_resnet, mode="train", rtol=1e-7, atol=1e-7),
        Entry("vit-train", "torchvision", _train_vit, mode="train", rtol=1e-3, atol=1e-3),
        Entry("llama-train", "transformers", _train_llama, mode="train", rtol=1e-3, atol=1e-3),
        Entry("bert-train", "transformers", _train_bert, mode="train", rtol=1e-3, atol=1e-3),
        Entry("llama-generate", "transformers", _generator("llama"), mode="generate"),
        Entry("gpt2-generate", "transformers", _generator("gpt2"), mode="generate"),
        # a sliding-window cache: its layers count the tokens seen in an int attribute
        Entry("mistral-generate", "transformers", _generator("mistral"), mode="generate"),
    ]
    return table


ENTRIES: list[Entry] = _build_table()
_BY_NAME = {e.name: e for e in ENTRIES}
assert len(_BY_NAME) == len(ENTRIES), "entry names must be unique"


def entry(name: str) -> Entry:
    """The entry called ``name``."""
    return _BY_NAME[name]
