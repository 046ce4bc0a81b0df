"""A small transformers LLaMA compiled with graph breaks inside its blocks gives eager's logits.

Its decoder layer keeps ``residual = hidden_states`` across a break (one is
put in its MLP) and its blocks run in ``for`` loops over ``nn.ModuleList``:
the patterns of the aliasing, loop and with-block resumption tests, in a real
model.
"""

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter

transformers = pytest.importorskip("transformers")


def test_llama_logits_match_eager(monkeypatch):
    mlp = transformers.models.llama.modeling_llama.LlamaMLP
    original_forward = mlp.forward

    def forward_with_break(self, x):
        capture.graph_break()
        return original_forward(self, x)

    monkeypatch.setattr(mlp, "forward", forward_with_break)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 64, (1, 8))
    counter = CompileCounter()
    compiled = capture.optimize(counter)(model)
    with torch.no_grad():
        expected = model(ids).logits
        with capture.observe() as seen:
            for _ in range(2):
                torch.testing.assert_close(compiled(ids).logits, expected)
    reasons = [b.reason for f in seen.frames for b in f.graph_breaks]
    assert not [r for r in reasons if "cannot be resumed" in r], reasons
    assert counter.frame_count > 2
