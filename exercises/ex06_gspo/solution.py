"""Per response: the masked mean of the log-ratio (padding zeroed before anything else, the token
count clamped to 1), then exp: a geometric mean of the token ratios, which stays near 1 however
long the response is (the plain product would not). Then PPO's pessimistic min on that one
number, and the mean over the responses that have at least one valid token. Nothing is detached
except old_logp and adv, so each token of an unclipped response gets gradient s_i * A_i / |y_i|
(divided by the number of responses).
"""
import torch
from torch import Tensor


def gspo_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
              eps_low: float = 3e-4, eps_high: float = 4e-4) -> Tensor:
    log_ratio = torch.where(mask, logp - old_logp.detach(), torch.zeros_like(logp))     # [B, T]
    n_tok = mask.sum(dim=1)                                                           # [B]
    seq_log_ratio = log_ratio.sum(dim=1) / n_tok.clamp_min(1)                         # [B]
    s = torch.exp(seq_log_ratio.clamp(-20.0, 20.0))                                   # [B]
    adv = adv.detach()
    loss_seq = torch.maximum(-adv * s, -adv * s.clamp(1 - eps_low, 1 + eps_high))     # [B]
    nonempty = n_tok > 0                                                              # [B]
    loss_seq = torch.where(nonempty, loss_seq, torch.zeros_like(loss_seq))
    return loss_seq.sum() / nonempty.sum().clamp_min(1)
