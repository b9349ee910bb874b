"""A tiny decoder-only transformer policy, batched sampling with a KV cache, and the learner's
log-probs of sampled responses.

nanoGPT-shaped (pre-LayerNorm blocks, learned positions, untied head), about 100k parameters
at width 64. Sampling feeds the prompt once and then one token per step, reusing the keys and
values of earlier positions (the KV cache), so no step re-runs the prefix.

A group's G responses share their prompt, so both sampling and the learner's forward run each
distinct prompt once and hand every row its prompt's keys and values (``TinyGPT.prefill``): the
shared-prefix forward of Prefix Grouper (arXiv 2506.05433). The outputs and gradients are those of
a full forward of every row (the gradient reaching the prompt's positions is the sum over the
group's rows); only float rounding differs, in the last bits of float32.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from ..rl.policy import Policy, Rollout, full_precision
from ..rl.registry import make_task
from .task import EOS, PAD, VOCAB_SIZE
from .warm_start import warm_start


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, dtype: torch.dtype | None = None):
        super().__init__()
        self.n_head = n_head
        kw = {"dtype": dtype}
        self.ln1, self.ln2 = nn.LayerNorm(d_model, **kw), nn.LayerNorm(d_model, **kw)
        self.qkv = nn.Linear(d_model, 3 * d_model, **kw)
        self.proj = nn.Linear(d_model, d_model, **kw)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model, **kw), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model, **kw))

    def forward(self, x: Tensor, cache: dict | None, layer: int) -> Tensor:
        B, L, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (z.view(B, L, self.n_head, D // self.n_head).transpose(1, 2) for z in (q, k, v))
        if cache is None:                                        # full forward: causal mask
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:                                                    # incremental: attend to all kept keys
            start = cache.get("len", 0)
            if layer not in cache:                               # preallocated once, written in place
                shape = (B, self.n_head, cache["size"], D // self.n_head)
                cache[layer] = (k.new_empty(shape), v.new_empty(shape))
            k_buf, v_buf = cache[layer]
            k_buf[:, :, start:start + L] = k
            v_buf[:, :, start:start + L] = v
            k, v = k_buf[:, :, :start + L], v_buf[:, :, :start + L]   # [B, H, L_past + L, Dh]
            if L == 1 or start == 0:                             # one new token, or the first chunk
                att = F.scaled_dot_product_attention(q, k, v, is_causal=L > 1)
            else:                                                # a chunk after a past: query i sees
                mask = torch.ones(L, start + L, dtype=torch.bool, device=x.device).tril(start)  # keys <= start + i
                att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(B, L, D))
        return x + self.mlp(self.ln2(x))


def repeats_a_row(prompts: Tensor) -> bool:
    """Whether some row of ``prompts`` [B, L] equals the row before it (a group's shared prompt)."""
    return len(prompts) > 1 and bool((prompts[1:] == prompts[:-1]).all(dim=1).any())


class TinyGPT(Policy):
    """Decoder-only transformer over a task's ``vocab_size`` tokens (the addition task's 14 by
    default). tokens [B, L] -> logits [B, L, V].

    ``dtype`` (default: torch's, float32) is the parameters' dtype from the start: float64
    parameters are drawn in float64, whose normal draws are the same on every CPU (float32's
    vectorised draws differ between AVX2 and plain kernels in their last bits).
    """
    config_fields = ("n_layer", "d_model", "n_head", "warm_steps", "warm_target", "warm_batch", "warm_lr",
                     "warm_noise", "warm_seed")

    def __init__(self, n_layer: int = 2, d_model: int = 64, n_head: int = 4, block_size: int = 16,
                 dtype: torch.dtype | None = None, vocab_size: int = VOCAB_SIZE):
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        if not isinstance(vocab_size, int) or vocab_size <= PAD:
            raise ValueError(f"vocab_size must be an int > {PAD} (EOS and PAD are ids {EOS} and {PAD}), "
                             f"got {vocab_size!r}")
        self.block_size, self.d_model, self.n_layer = block_size, d_model, n_layer
        kw = {"dtype": dtype}
        self.tok = nn.Embedding(vocab_size, d_model, **kw)
        self.pos = nn.Embedding(block_size, d_model, **kw)
        self.blocks = nn.ModuleList(Block(d_model, n_head, dtype) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model, **kw)
        self.head = nn.Linear(d_model, vocab_size, bias=False, **kw)
        # PAD only fills the space after EOS: the policy can never emit it (a finite -1e4, not
        # -inf, so that 0 * logp stays 0 in the entropy and float32 exp gives exactly 0)
        bias = torch.zeros(vocab_size, dtype=dtype)
        bias[PAD] = -1e4
        self.register_buffer("logit_bias", bias, persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, tokens: Tensor, cache: dict | None = None, *, continuation: Tensor | None = None) -> Tensor:
        """tokens [B, L] -> logits [B, L, V], continuing ``cache`` when given.

        With ``continuation`` [B, Lc] (the learner's forward of sampled responses): ``tokens`` are the
        prompts, each distinct one run once (``prefill``), and the continuation follows its prompt's
        cache -> the logits [B, 1 + Lc, V] of the last prompt position and of the continuation. (One
        call of the module, so a DDP wrapper sees one forward.)"""
        if continuation is None:
            return self._logits(tokens, cache)
        if not repeats_a_row(tokens):                            # nothing shared: one plain forward
            return self._logits(torch.cat([tokens, continuation], dim=1), None)[:, tokens.shape[1] - 1:]
        cache, first = self.prefill(tokens)                      # [B, V]
        if continuation.shape[1] == 0:
            return first[:, None]
        return torch.cat([first[:, None], self._logits(continuation, cache)], dim=1)

    def prefill(self, prompts: Tensor) -> tuple[dict, Tensor]:
        """Feed the prompts into a fresh KV cache, each distinct prompt once -> (cache, logits [B, V]
        of every row's last prompt position).

        Rows whose prompt repeats the row before (a group's G samples) share one forward of it: the
        distinct prompts run as a batch of P, then every row receives its prompt's keys and values
        (an index, so gradients flow back summed over the group). Without repeats: one forward of B rows.
        """
        cache: dict = {}
        if not repeats_a_row(prompts):
            return cache, self._logits(prompts, cache)[:, -1]
        distinct, owner = torch.unique_consecutive(prompts, dim=0, return_inverse=True)
        last = self._logits(distinct, cache)[:, -1]              # [P, V]
        for layer in range(self.n_layer):
            k_buf, v_buf = cache[layer]
            cache[layer] = (k_buf[owner], v_buf[owner])          # [B, H, size, Dh]
        return cache, last[owner]

    def _logits(self, tokens: Tensor, cache: dict | None) -> Tensor:
        start = 0 if cache is None else cache.get("len", 0)
        L = tokens.shape[1]
        if cache is not None:
            cache.setdefault("size", self.block_size)
        if start + L > self.block_size:
            raise ValueError(f"sequence of {start + L} tokens exceeds block_size {self.block_size}")
        x = self.tok(tokens) + self.pos(torch.arange(start, start + L, device=tokens.device))
        for i, blk in enumerate(self.blocks):
            x = blk(x, cache, i)
        if cache is not None:
            cache["len"] = start + L
        return self.head(self.ln_f(x)) + self.logit_bias         # [B, L, V]

    eos_id, pad_id = EOS, PAD

    @classmethod
    def for_config(cls, cfg, dtype: torch.dtype, device: torch.device) -> "TinyGPT":
        """A fresh TinyGPT of the config's shape, sized for its task (its vocabulary, its prompt plus the
        generation budget), initialised on the CPU and moved to ``device``."""
        task = make_task(cfg)
        return cls(cfg.n_layer, cfg.d_model, cfg.n_head, block_size=task.prompt_len + cfg.max_new_tokens,
                   dtype=dtype, vocab_size=task.vocab_size).to(device)

    @classmethod
    def initial(cls, cfg, device: torch.device, dtype: torch.dtype = torch.float32, *,
                progress: bool = False) -> tuple["TinyGPT", dict, float]:
        """The policy after the toy's supervised warm start (``toy.warm_start``, cached per process)."""
        state, seconds = warm_start(cfg, device, progress=progress, dtype=dtype)
        model = cls.for_config(cfg, dtype, device)
        model.load_state_dict(state)
        return model, state, seconds

    def rollout(self, prompts: Tensor, max_new_tokens: int, **kw) -> "Rollout":
        """``sample(self, prompts, max_new_tokens, **kw)``: the ``Policy`` interface's sampling."""
        return sample(self, prompts, max_new_tokens, **kw)

    def n_params(self, non_embedding: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.tok.weight.numel() - self.pos.weight.numel() if non_embedding else n

    def flops_per_token(self, context: int, backward: bool = True) -> float:
        """Model FLOPs per token at a given context length (weights + attention scores).

        Forward: 2 N + 4 n_layer d_model context (QK^T and AV); forward + backward is 3 times
        that (the usual 6 N rule, PaLM appendix B). N excludes the embedding lookups.
        """
        fwd = 2 * self.n_params() + 4 * self.n_layer * self.d_model * context
        return 3 * fwd if backward else fwd


@torch.no_grad()
def sample(model: TinyGPT, prompts: Tensor, max_new_tokens: int, *, temperature: float = 1.0,
           greedy: bool = False, generator: torch.Generator | None = None,
           logits_noise: float = 0.0, use_cache: bool = True, stop_check_every: int = 1) -> Rollout:
    """Sample one response per prompt row with a KV cache. prompts [B, Lp] -> Rollout.

    The sampling distribution is softmax(logits / temperature + noise), noise ~ N(0, logits_noise^2)
    drawn per position (a stand-in for an inference engine whose numbers differ from the learner's);
    rollout_logp is the log-prob under that distribution. A finished row keeps feeding PAD, which
    its mask excludes. use_cache=False re-runs the whole prefix every step (for comparison only).
    Decoding stops early once every row has ended, checked every ``stop_check_every`` tokens: each
    check reads a flag back from the device (free on a CPU; on a GPU a sync that stalls the queue).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    B = prompts.shape[0]
    dev = prompts.device
    seq = prompts
    if use_cache:
        cache, last = model.prefill(prompts)
        logits = full_precision(last)                            # [B, V]
    else:
        cache, logits = None, full_precision(model(prompts)[:, -1])
    toks, logps = [], []
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    for _ in range(max_new_tokens):
        z = logits / temperature
        if logits_noise > 0:
            z = z + logits_noise * torch.randn(z.shape, generator=generator, device=dev, dtype=z.dtype)
        logp_all = torch.log_softmax(z, dim=-1)                  # [B, V]
        if greedy:
            tok = logp_all.argmax(dim=-1)
        else:
            tok = torch.multinomial(logp_all.exp(), 1, generator=generator)[:, 0]   # [B]
        tok = torch.where(done, torch.full_like(tok, PAD), tok)
        logps.append(torch.where(done, torch.zeros_like(logp_all[:, 0]),
                                 logp_all.gather(1, tok[:, None])[:, 0]))
        toks.append(tok)
        done = done | (tok == EOS)
        if len(toks) % stop_check_every == 0 and bool(done.all()):
            break
        if use_cache:
            logits = full_precision(model(tok[:, None], cache)[:, -1])
        else:
            seq = torch.cat([prompts, torch.stack(toks, dim=1)], dim=1)
            logits = full_precision(model(seq)[:, -1])
    responses = torch.stack(toks, dim=1)                         # [B, T]
    mask = responses != PAD
    return Rollout(prompts, responses, mask, torch.stack(logps, dim=1) * mask, responses.shape[1])
