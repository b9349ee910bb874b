"""Chapter 01's seeded simulations: packed GAE, verl's advantage whitening, and a tiny policy
trained with PPO's clip for one or several updates on each batch.

The policy is a table of logits [T, V]: token t of every response is drawn from softmax(theta[t]).
It has no context, which is all the chapter needs: ratios, clip statistics, KL and the logged loss
behave as in a real model, at a size that trains in milliseconds.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..advantages import group_advantages
from ..kl import kl_k3
from ..losses import resolve_loss
from ..masking import check_mask, check_tensor, masked_mean

# ---- GAE over packed rows, and verl's whitening ------------------------------------------------


def _check_gae_inputs(rewards, values, dones, mask, gamma, lam) -> None:
    for name, x in (("rewards", rewards), ("values", values)):
        check_tensor(x, name, ndim=2, floating=True)
    if values.shape != rewards.shape:
        raise ValueError(f"values must have the shape of rewards {tuple(rewards.shape)}, "
                         f"got {tuple(values.shape)}")
    check_mask(mask, rewards, "rewards")
    check_tensor(dones, "dones", ndim=2)
    if dones.dtype != torch.bool or dones.shape != rewards.shape:
        raise ValueError(f"dones must be a bool tensor of shape {tuple(rewards.shape)} (True on the last "
                         f"token of each response), got {dones.dtype} {tuple(dones.shape)}")
    for name, v in (("gamma", gamma), ("lam", lam)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")


@torch.no_grad()
def packed_gae(rewards: Tensor, values: Tensor, dones: Tensor, mask: Tensor, *, gamma: float = 1.0,
               lam: float = 0.95) -> tuple[Tensor, Tensor]:
    """GAE for rows that hold several responses back to back. [B, T] each -> (adv, returns) [B, T].

    ``dones`` (bool) is True on the last token of each response: there the scan forgets V and A of
    the next position (rlhf-book's ``not_done`` form), so a packed row gives each response the
    advantages it gets in a row of its own. Otherwise as ``advantages.gae``: padding is skipped,
    and adv / returns are 0 on it.
    """
    _check_gae_inputs(rewards, values, dones, mask, gamma, lam)
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    values = torch.where(mask, values, torch.zeros_like(values))
    B, T = rewards.shape
    next_value, next_adv = rewards.new_zeros(B), rewards.new_zeros(B)      # [B] each
    adv = torch.zeros_like(rewards)
    for t in reversed(range(T)):
        keep = (~dones[:, t]).to(rewards.dtype)          # 0 at a response's end: nothing after it counts
        delta = rewards[:, t] + gamma * keep * next_value - values[:, t]
        a_t = delta + gamma * lam * keep * next_adv
        valid = mask[:, t]
        adv[:, t] = torch.where(valid, a_t, torch.zeros_like(a_t))
        next_value = torch.where(valid, values[:, t], next_value)
        next_adv = torch.where(valid, a_t, next_adv)
    returns = torch.where(mask, adv + values, torch.zeros_like(adv))
    return adv, returns


def masked_whiten(x: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """verl's ``masked_whiten``: (x - mean) / sqrt(var + eps) over the valid tokens of the batch.

    x, mask [B, T] -> [B, T]. The variance is Bessel-corrected (n / (n - 1)), as in verl, so the
    result has mean 0 and unbiased variance 1 over valid tokens; padding is set to 0 here.
    """
    check_tensor(x, "x", ndim=2, floating=True)
    check_mask(mask, x, "x")
    n = int(mask.sum())
    if n < 2:
        raise ValueError(f"mask must select at least 2 valid tokens to whiten, got {n}")
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask) * n / (n - 1)
    return torch.where(mask, (x - mean) * torch.rsqrt(var + eps), torch.zeros_like(x))


def model_state_gib(n_params: float, trained: int, frozen: int) -> float:
    """GiB of weights and optimiser state: 16 bytes per trained parameter, 2 per frozen one.

    16 = bf16 weight and gradient (2 + 2) + fp32 master weight and Adam's two moments (4 + 4 + 4),
    the usual mixed-precision accounting (ZeRO paper); activations and KV caches are not counted.
    """
    return n_params * (16 * trained + 2 * frozen) / 2**30


# ---- a tiny tabular policy ---------------------------------------------------------------------

GOOD_TOKENS = 2          # tokens 0 and 1 are "good": the reward is their share of a response


def token_logp(logits: Tensor, tokens: Tensor) -> Tensor:
    """log pi(token_t) under the tabular policy. logits [T, V], tokens [B, T] -> logp [B, T]."""
    logsm = logits.log_softmax(-1)                                         # [T, V]
    return logsm[torch.arange(tokens.shape[1]), tokens]                    # [B, T]


@torch.no_grad()
def sample_batch(logits: Tensor, n_prompts: int, group_size: int, gen: torch.Generator,
                 min_len: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    """Draw B = P*G responses. -> tokens [B, T] (long), mask [B, T] (bool), rewards [B].

    Lengths are uniform in [min_len, T]; the reward is the share of valid tokens that are good.
    """
    T, V = logits.shape
    B = n_prompts * group_size
    probs = logits.softmax(-1)                                             # [T, V]
    tokens = torch.multinomial(probs, B, replacement=True, generator=gen).T   # [B, T]
    lengths = torch.randint(min_len, T + 1, (B,), generator=gen)           # [B]
    mask = torch.arange(T)[None, :] < lengths[:, None]                     # [B, T]
    good = (tokens < GOOD_TOKENS) & mask
    rewards = good.sum(1).to(logits.dtype) / lengths.to(logits.dtype)      # [B]
    return tokens, mask, rewards


def init_logits(seed: int, T: int = 8, V: int = 8) -> Tensor:
    """Seeded starting logits [T, V] (float64), small and random."""
    gen = torch.Generator().manual_seed(seed)
    return 0.3 * torch.randn(T, V, generator=gen, dtype=torch.float64)


def train_tabular(*, seed: int, n_batches: int, updates_per_batch: int, loss: str = "grpo",
                  eps_low: float = 0.2, eps_high: float = 0.2, beta: float = 0.0, lr: float = 2.0,
                  n_prompts: int = 16, group_size: int = 4, T: int = 8, V: int = 8) -> dict:
    """Train the tabular policy with a registered loss + beta * k3 KL to the starting policy.

    Each batch is sampled once, its old_logp recomputed by the learner (as verl and TRL do), then
    ``updates_per_batch`` plain gradient steps are taken on it. Returns per-update lists (statistics measured
    *before* that update's step, so update 0 of every batch sees ratio 1) and the final logits:
    ``batch``, ``update``, ``pg_loss``, ``kl``, ``loss``, ``binding_frac`` (clip/low + clip/high),
    ``outside_frac``, ``ratio_max``, ``grad_norm``, ``reward`` (the batch's mean reward), ``n_tokens``
    (the batch's valid tokens, the denominator of both fractions), ``logits``.
    """
    if not (isinstance(updates_per_batch, int) and updates_per_batch >= 1):
        raise ValueError(f"updates_per_batch must be an int >= 1, got {updates_per_batch!r}")
    fn = resolve_loss(loss)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)            # tensors of a few hundred numbers: a second thread only waits
    try:
        return _train(fn, seed, n_batches, updates_per_batch, eps_low, eps_high, beta, lr,
                      n_prompts, group_size, T, V)
    finally:
        torch.set_num_threads(threads)


def _train(fn, seed, n_batches, updates_per_batch, eps_low, eps_high, beta, lr, n_prompts,
           group_size, T, V) -> dict:
    gen = torch.Generator().manual_seed(seed)
    theta = init_logits(seed, T, V).requires_grad_(True)
    ref_logits = theta.detach().clone()
    keys = ("batch", "update", "pg_loss", "kl", "loss", "binding_frac", "outside_frac", "ratio_max",
            "grad_norm", "reward", "n_tokens")
    log = {k: [] for k in keys}
    for b in range(n_batches):
        tokens, mask, rewards = sample_batch(theta.detach(), n_prompts, group_size, gen)
        adv = group_advantages(rewards, group_size)                        # [B]
        old_logp = token_logp(theta, tokens).detach()                      # [B, T]
        ref_logp = token_logp(ref_logits, tokens)                          # [B, T]
        for k in range(updates_per_batch):
            logp = token_logp(theta, tokens)                               # [B, T]
            pg_loss, stats = fn(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high)
            kl = masked_mean(kl_k3(logp, ref_logp, mask), mask)
            total = pg_loss + beta * kl
            (grad,) = torch.autograd.grad(total, theta)
            row = dict(batch=b, update=k, pg_loss=pg_loss.item(), kl=kl.item(), loss=total.item(),
                       binding_frac=stats["clip/low_frac"] + stats["clip/high_frac"],
                       outside_frac=stats["ratio/outside_frac"], ratio_max=stats["ratio/max"],
                       grad_norm=grad.norm().item(), reward=float(rewards.mean()),
                       n_tokens=int(mask.sum()))
            for key in keys:
                log[key].append(row[key])
            with torch.no_grad():
                theta -= lr * grad          # plain SGD: torch.optim's first step costs seconds of imports
    log["logits"] = theta.detach().clone()
    return log


def binding_share(log: dict) -> float:
    """Of all out-of-range tokens in a ``train_tabular`` log, the share whose clip binds (no gradient).

    Pooled over every update: binding tokens / out-of-range tokens, each count read back as
    fraction * ``n_tokens`` (an integer; the fractions are float32). About 1/2 when the ratio's drift is
    independent of the sign of A and symmetric about the range; above 1/2 once updates move each ratio
    the way its advantage pushes it.
    """
    for key in ("binding_frac", "outside_frac", "n_tokens"):
        if key not in log:
            raise ValueError(f"log must be a train_tabular log with a {key!r} list, got keys {sorted(log)}")
    binding = sum(round(f * n) for f, n in zip(log["binding_frac"], log["n_tokens"]))
    outside = sum(round(f * n) for f, n in zip(log["outside_frac"], log["n_tokens"]))
    if outside == 0:
        raise ValueError("log has no out-of-range token (outside_frac is 0 at every update): no share to take")
    return binding / outside


# ---- the chapter's GAE example -----------------------------------------------------------------


def gae_example() -> dict:
    """Two responses with an outcome reward on their last token and a critic's guesses V.

    Row 0: 6 tokens, right (reward 1); row 1: 4 tokens, wrong (reward 0), padded to T = 6.
    -> rewards, values [2, 6] float64, mask [2, 6] bool.
    """
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    rewards = torch.tensor([[0, 0, 0, 0, 0, 1.0], [0, 0, 0, 0, 0, 0]], dtype=torch.float64)
    values = torch.tensor([[0.40, 0.45, 0.50, 0.60, 0.70, 0.80],
                           [0.50, 0.45, 0.35, 0.20, 0.00, 0.00]], dtype=torch.float64)
    return dict(rewards=rewards, values=values, mask=mask)


def pack_rows(x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Put the valid tokens of every row back to back in one row (sequence packing).

    x, mask [B, T] -> packed [1, N] (N = mask.sum()), dones [1, N] True on each response's last token.
    """
    check_mask(mask, x, "x")
    lengths = mask.sum(1)                                                  # [B]
    ends = torch.cumsum(lengths, 0)[lengths > 0] - 1                       # index of each last token
    dones = torch.zeros(1, int(lengths.sum()), dtype=torch.bool)
    dones[0, ends] = True
    return x[mask][None, :], dones


def outcome_token_rewards(rewards: Tensor, mask: Tensor) -> Tensor:
    """Put each response's reward on its last valid token, as verl does for PPO. [B], [B, T] -> [B, T]."""
    check_tensor(rewards, "rewards", ndim=1, floating=True)
    if rewards.shape[0] != mask.shape[0]:
        raise ValueError(f"rewards must have shape [B]=({mask.shape[0]},), got {tuple(rewards.shape)}")
    last = mask & (mask.cumsum(1) == mask.sum(1, keepdim=True))           # [B, T]
    return torch.where(last, rewards[:, None], torch.zeros_like(rewards)[:, None])
