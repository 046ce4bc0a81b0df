"""torch.nn attention modules in inference (eval, no_grad): their fused fast-path checks and one graph each."""

import pytest
import torch
from torch import nn


def run(m, *args):
    return m(*args)


def attend(mha, x, mask):
    return mha(x, x, x, key_padding_mask=mask, need_weights=False)[0]


@pytest.mark.parametrize("with_mask", [False, True])
def test_multihead_attention_in_inference_is_one_graph(check, t, with_mask):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    mask = torch.tensor([[False, False, True], [False, False, False]]) if with_mask else None
    with torch.no_grad():
        check(attend, mha, t(2, 3, 8), mask, graphs=1, fullgraph=True)


def test_multihead_attention_weights_in_inference(check, t):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = t(2, 3, 8)
    with torch.no_grad():
        check(run, mha, x, x, x, graphs=1, fullgraph=True)


def test_vit_style_encoder_block_in_inference(check, t):
    """torchvision's ViT EncoderBlock: LayerNorm, self-attention through MultiheadAttention, MLP."""
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(8)
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

        def forward(self, x):
            y = self.ln(x)
            y, _ = self.attn(y, y, y, need_weights=False)
            x = x + y
            return x + self.mlp(x)

    block = Block().eval()
    with torch.no_grad():
        check(run, block, t(2, 5, 8), graphs=1, fullgraph=True, calls=2)
