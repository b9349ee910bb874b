"""The real chat model as the RL trainer's policy: ``ChatPolicy`` gives ``lm.ChatLM`` the interface the
trainer reads from the toy's ``TinyGPT``, so one trainer and the same losses train either.

The interface (``rl.policy.Policy``): ``rollout(prompts, max_new_tokens, ...)`` samples an ``rl.policy.Rollout``;
the module's ``forward(prompts, continuation=responses[:, :-1])`` is the learner's forward (the logits
``[B, T, V]`` that predict each response token, float32); ``eos_id`` and ``pad_id``; ``flops_per_token``.
Prompts arrive as one id tensor left-padded with ``lm.PROMPT_PAD``; responses are padded with the pad id (this
model's pad token is its EOS token, so a row's mask, not its ids, says where it ends). A group's repeated
prompt runs once in sampling and in the learner's forward (``ChatLM.prefill(share=True)``).
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..rl.policy import Policy, Rollout
from . import model as lm         # the name callers know it by: chapter 13 shows forward's source


class ChatPolicy(Policy):
    """A ``ChatLM`` as a module: its parameters are the model's (so an optimiser, a deep copy for pi_ref and
    ``state_dict`` work as for ``TinyGPT``), its forward and sampling are ``ChatLM``'s."""

    def __init__(self, chat: lm.ChatLM):
        super().__init__()
        self.net = chat.model                 # registers the parameters
        self.chat = chat
        self.eos_id, self.pad_id = chat.eos_id, chat.pad_id
        cfg = chat.model.config
        self.n_layer, self.d_model = cfg.num_hidden_layers, cfg.hidden_size
        self.block_size = chat.max_len
        self.score_rows = 8       # rows per forward without gradient (the trainer's targets): [8, T, V] logits
        # the trainer hands the memory its steps free back to the system after each one (rl.device): a step frees
        # GBs of blocks whose gaps would pile up; the toy's steps free little and would only run slower
        self.returns_freed_memory = True

    @classmethod
    def for_config(cls, cfg, dtype: torch.dtype, device: torch.device) -> "ChatPolicy":
        """The pretrained model, loaded on ``device`` (its task and sizes are its own)."""
        return build_policy(dtype, device)

    def forward(self, prompts: Tensor, cache=None, *, continuation: Tensor | None = None) -> Tensor:
        """The learner's forward: ``prompts`` ``[B, Lp]`` (left-padded) and ``continuation``
        ``[B, T - 1]`` (the responses without their last token) -> float32 logits ``[B, T, V]``,
        position t predicting response token t. Every row is scored over all T positions; those
        after its end are padding the loss masks."""
        if cache is not None or continuation is None:
            raise ValueError("ChatPolicy's forward scores responses: call it as "
                             "policy(prompts, continuation=...)")
        B, T = continuation.shape[0], continuation.shape[1] + 1
        response = torch.cat([continuation, continuation.new_full((B, 1), self.pad_id)], dim=1)
        lengths = torch.full((B,), T, dtype=torch.long)
        rows = lm.prompt_rows(prompts)
        return self.chat.shared_prompt_logits(rows, response.to(self.chat.device), lengths)

    @torch.no_grad()
    def rollout(self, prompts: Tensor, max_new_tokens: int, *, temperature: float = 1.0, greedy: bool = False,
                generator: torch.Generator | None = None, logits_noise: float = 0.0,
                stop_check_every: int = 1) -> Rollout:
        """Sample one reply per prompt row (``ChatLM.sample``, the group's prompt fed once), seeded from
        ``generator`` -> a ``Rollout``: responses ``[B, T]`` padded with the pad id, the mask from the lengths."""
        if logits_noise:
            raise ValueError(f"logits_noise={logits_noise}: the real model has no simulated sampler noise "
                             f"(the toy's mismatch='noise'); use mismatch='none'")
        seed = (int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
                if generator is not None else 0)                   # drawn where the generator is (CPU or GPU)
        r = self.chat.sample(lm.prompt_rows(prompts), max_new_tokens=max_new_tokens, temperature=temperature,
                             greedy=greedy, seed=seed, share_prompts=True)
        dev = prompts.device
        mask = r.mask.to(dev)
        return Rollout(prompts, r.response.to(dev), mask, r.logp.to(dev) * mask, r.response.shape[1])

    def reference(self) -> "PretrainedReference":
        """pi_ref for a run that starts from the pretrained weights (the trainer's ``reference``)."""
        return PretrainedReference(next(self.parameters()).device)

    def n_params(self, non_embedding: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.net.get_input_embeddings().weight.numel() if non_embedding else n

    def flops_per_token(self, context: float, backward: bool = True) -> float:
        """Model FLOPs per token: 2 N + 4 n_layer d_model context forward (N without the embedding; the tied
        head's matrix product counts once more, 2 d_model V), three times that with the backward."""
        V, D = self.net.get_input_embeddings().weight.shape
        fwd = 2 * self.n_params() + 2 * V * D + 4 * self.n_layer * self.d_model * context
        return 3 * fwd if backward else fwd


class PretrainedReference:
    """The pretrained model as pi_ref, loaded from the built folder on first use and dropped by ``release``:
    the same weights the run started from, in memory only while a step scores with them."""

    def __init__(self, device: torch.device):
        self.device, self.policy = device, None

    def __call__(self, prompts: Tensor, cache=None, *, continuation: Tensor | None = None) -> Tensor:
        if self.policy is None:
            self.policy = build_policy(device=self.device).requires_grad_(False)
        return self.policy(prompts, cache, continuation=continuation)

    def release(self) -> None:
        self.policy = None

    def state_dict(self) -> dict:
        """Nothing for a checkpoint to keep: the pretrained weights are reloaded from the built folder."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        if state:
            raise ValueError(f"the pretrained reference reloads its weights; got a state of {len(state)} tensors")


def build_policy(dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> ChatPolicy:
    """SmolLM2-135M-Instruct from the built folder (``make model``) as a trainable policy."""
    if dtype != torch.float32:
        raise ValueError(f"the real model trains with float32 parameters (dtype=torch.float32), got {dtype}; "
                         f"bfloat16 arithmetic comes from precision='bf16' (autocast)")
    return ChatPolicy(lm.load("fp32", device))
