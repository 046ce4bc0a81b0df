"""A wider zoo for ``survey.py --wide``: ~150 architectures built generically, beyond the suite's hand-built 56.

Each transformers entry is ``AutoConfig.for_model(<type>)`` with every size field the config has shrunk to the
zoo's small sizes and every dropout set to 0; timm entries are ``timm.create_model(<name>, num_classes=10)`` at
64x64 where the architecture takes any size, else at its own input size. Weights and inputs are random (seeded).
These entries are not in the test suite (about 20 minutes on 2 cores); the survey is the check.
"""

from __future__ import annotations

from typing import Any

import torch
from zoo import VOCAB, Built, Entry, _seeded, _small_token_ids, _tokens

__all__ = ["WIDE_ENTRIES"]

_SIZES = {
    "vocab_size": VOCAB,
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size"), 32),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), 2),
    **dict.fromkeys(("encoder_layers", "decoder_layers", "num_decoder_layers"), 2),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads"), 4),
    **dict.fromkeys(("encoder_attention_heads", "decoder_attention_heads"), 4),
    "num_key_value_heads": 2,
    **dict.fromkeys(("intermediate_size", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim"), 64),
    **dict.fromkeys(("n_inner", "hidden_dim"), 64),
    **dict.fromkeys(("max_position_embeddings", "n_positions"), 64),
    **dict.fromkeys(("head_dim", "d_kv"), 8),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size"), 32),
    **dict.fromkeys(("num_experts", "num_local_experts"), 4),
    "num_experts_per_tok": 2,
    "rotary_dim": 4,
}

CAUSAL = (
    "gemma gemma2 gemma3_text phi3 starcoder2 olmo olmo2 stablelm persimmon mixtral qwen2_moe qwen3 qwen3_moe "
    "granite cohere bloom gptj codegen gpt_bigcode mpt biogpt xglm mamba rwkv nemotron glm helium smollm3 exaone4 "
    "ministral olmoe granitemoe phimoe arcee ernie4_5"
).split()
ENCODERS = (
    "electra deberta deberta-v2 mpnet roformer convbert xlm-roberta camembert layoutlm squeezebert ibert "
    "megatron-bert ernie modernbert canine longformer big_bird data2vec-text rembert mobilebert luke"
).split()
SEQ2SEQ = (
    "mbart marian pegasus blenderbot blenderbot-small m2m_100 plbart led mt5 umt5 longt5 switch_transformers "
    "pegasus_x fsmt"
).split()
VISION = (
    "vit deit beit dinov2 resnet regnet mobilenet_v2 mobilevit poolformer segformer bit pvt pvt_v2 cvt focalnet "
    "vit_msn data2vec-vision dpt siglip_vision_model clip_vision_model glpn textnet ijepa vitdet dinov2_with_registers"
).split()
TIMM = (
    "resnet18d resnext26ts seresnext26d_32x4d ecaresnet26t skresnet18 res2net50_26w_4s dla34 dpn48b "
    "hrnet_w18_small cspresnet50 cspdarknet53 darknet17 vovnet39a ese_vovnet19b_dw rexnet_100 ghostnet_100 "
    "ghostnetv2_100 mobilenetv3_large_100 mobilenetv4_conv_small efficientnet_b0 efficientnetv2_rw_t mixnet_s "
    "tinynet_a lcnet_050 fbnetc_100 mnasnet_100 hardcorenas_a regnetx_002 regnetz_b16 nfnet_l0 nf_resnet26 "
    "dm_nfnet_f0 gernet_s repvgg_a0 mobileone_s0 convmixer_768_32 convnext_atto convnextv2_atto edgenext_xx_small "
    "efficientformer_l1 efficientformerv2_s0 levit_128s mobilevit_xxs mobilevitv2_050 poolformer_s12 "
    "poolformerv2_s12 coat_lite_tiny crossvit_tiny_240 cait_xxs24_224 deit_tiny_patch16_224 vit_tiny_patch16_224 "
    "swin_tiny_patch4_window7_224 swinv2_cr_tiny_224 twins_svt_small pit_ti_224 tnt_s_patch16_224 "
    "xcit_nano_12_p16_224 beit_base_patch16_224 eva02_tiny_patch14_224 maxvit_nano_rw_256 coatnet_nano_rw_224 "
    "fastvit_t8 xception41 densenet121 dpn68 tresnet_m visformer_tiny sequencer2d_s mixer_b16_224 resmlp_12_224 "
    "gmlp_ti16_224 hgnet_tiny hgnetv2_b0 inception_next_tiny tiny_vit_5m_224 rdnet_tiny starnet_s1 fasternet_t0 "
    "efficientvit_b0 efficientvit_m0 repghostnet_050 vgg11_bn selecsls42b botnet26t_256 halonet26t "
    "lambda_resnet26t cs3darknet_s resnetrs50 legacy_seresnet18"
).split()
# timm architectures whose blocks need their pretrained input size (fixed position tables, windows, strides)
_OWN_SIZE = (
    "vit swin cait crossvit deit beit eva max coat twins pit tnt xcit mixer resmlp gmlp tiny_vit levit "
    "efficientformer visformer sequencer halo bot lambda efficientvit_m"
).split()


def _config(model_type: str, **extra: Any) -> Any:
    from transformers import AutoConfig

    base = AutoConfig.for_model(model_type)
    names = set(vars(base)) | set(getattr(base, "attribute_map", {}))
    sizes = {k: v for k, v in _SIZES.items() if k in names and isinstance(getattr(base, k, None), int)}
    config = AutoConfig.for_model(model_type, **sizes, **{k: v for k, v in extra.items() if hasattr(base, k)})
    _small_token_ids(config)
    for name, value in list(vars(config).items()):
        if "drop" in name and isinstance(value, float):
            setattr(config, name, 0.0)  # compiled dropout draws other random numbers than eager
    return config


def _hf(model_type: str, auto_class: str, mode: str) -> Entry:
    def build() -> Built:
        import transformers

        if auto_class == "AutoModel" and model_type in VISION:
            config = _config(model_type, image_size=32, patch_size=8, num_channels=3)
            size = config.image_size if isinstance(getattr(config, "image_size", None), int) else 32
            return Built(
                transformers.AutoModel.from_config(config), (), {"pixel_values": torch.randn(2, 3, size, size)}
            )
        model = getattr(transformers, auto_class).from_config(_config(model_type))
        ids = _tokens()
        if auto_class == "AutoModelForSeq2SeqLM":
            return Built(model, (), {"input_ids": ids, "decoder_input_ids": _tokens(length=4)})
        kwargs: dict[str, Any] = {"input_ids": ids}
        if auto_class == "AutoModel":
            mask = torch.ones_like(ids)
            mask[1, -2:] = 0
            kwargs["attention_mask"] = mask
        if mode == "train":
            kwargs["labels"] = ids
        return Built(model, (), kwargs)

    suffix = {"AutoModelForCausalLM": "lm", "AutoModel": "base", "AutoModelForSeq2SeqLM": "s2s"}[auto_class]
    return Entry(f"wide-{model_type}-{suffix}-{mode}", "transformers", _seeded(build), mode, rtol=1e-3, atol=1e-3)


def _timm(name: str) -> Entry:
    def build() -> Built:
        import timm

        model = timm.create_model(name, pretrained=False, num_classes=10)
        size = (model.pretrained_cfg or {}).get("input_size", (3, 224, 224))[1:]
        if not any(part in name for part in _OWN_SIZE):
            size = (64, 64)
        return Built(model, (torch.randn(2, 3, *size),))

    return Entry(f"wide-timm-{name}", "timm", _seeded(build), "eval", rtol=1e-3, atol=1e-3)


WIDE_ENTRIES: list[Entry] = [
    *(_hf(t, "AutoModelForCausalLM", "eval") for t in CAUSAL),
    *(_hf(t, "AutoModelForCausalLM", "train") for t in CAUSAL),
    *(_hf(t, "AutoModel", "eval") for t in ENCODERS),
    *(_hf(t, "AutoModelForSeq2SeqLM", "eval") for t in SEQ2SEQ),
    *(_hf(t, "AutoModel", "eval") for t in VISION),
    *(_timm(name) for name in TIMM),
]
