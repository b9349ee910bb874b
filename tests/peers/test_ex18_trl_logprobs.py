"""Exercise 18's layout is TRL's: TRL 1.16.0's own GRPOTrainer._get_per_token_logps_and_entropies (its
fused LM head, the labels it builds from the attention mask, the temperature it divides by) on a small
random Llama gives, on a left-padded prompt + right-padded completion batch, the log-probs the
exercise's reference solution computes from the same model's plain logits, and 0 on the padding."""
from __future__ import annotations

import contextlib
import importlib.util
import types
from pathlib import Path

import pytest
import torch

from conftest import REASON

pytest.importorskip("trl", reason=REASON)
from transformers import LlamaConfig, LlamaForCausalLM                 # noqa: E402
from trl import GRPOTrainer                                           # noqa: E402
from trl.trainer.utils import add_fused_lm_head                       # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAD = EOS = 2


def _solution():
    path = ROOT / "exercises" / "ex18_chat_logprobs" / "solution.py"
    spec = importlib.util.spec_from_file_location("_peers_ex18_solution", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.completion_logprobs


def _batch(g, vocab=96):
    """Prompts of 5, 7 and 4 tokens padded on the left; completions of 3 (ending in EOS), 5 (cut off)
    and 1 (EOS alone) tokens padded on the right to C = 5; TRL's attention mask, prompt then completion."""
    prompts = [torch.randint(3, vocab, (n,), generator=g) for n in (5, 7, 4)]
    answers = [torch.cat([torch.randint(3, vocab, (2,), generator=g), torch.tensor([EOS])]),
               torch.randint(3, vocab, (5,), generator=g), torch.tensor([EOS])]
    P, C = 7, 5
    ids = torch.full((3, P + C), PAD)
    attn = torch.zeros(3, P + C, dtype=torch.long)
    for b, (p, a) in enumerate(zip(prompts, answers)):
        ids[b, P - len(p):P], ids[b, P:P + len(a)] = p, a
        attn[b, P - len(p):P + len(a)] = 1
    return ids, attn, C


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.3])
def test_trls_per_token_log_probs_are_the_exercises(temperature):
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         pad_token_id=PAD, eos_token_id=EOS)).eval()
    add_fused_lm_head(model, temperature=temperature)
    ids, attn, C = _batch(torch.Generator().manual_seed(1))
    trainer = types.SimpleNamespace(accelerator=types.SimpleNamespace(autocast=contextlib.nullcontext))
    with torch.no_grad():
        trl_logps, _, _ = GRPOTrainer._get_per_token_logps_and_entropies.__wrapped__(trainer, model, ids, attn, C)
        logits = model(input_ids=ids, attention_mask=attn).logits             # the plain forward
    mask = attn[:, -C:].bool()
    ours = _solution()(logits, ids, mask, temperature)
    assert trl_logps.shape == ours.shape == (3, C)
    torch.testing.assert_close(ours, trl_logps, rtol=0, atol=1e-5)
    assert (trl_logps[~mask] == 0).all() and mask.sum() == 3 + 5 + 1
