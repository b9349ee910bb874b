"""Known-wrong: the optimistic max of the two terms instead of PPO's pessimistic min."""
import torch

HINT = ("Both candidate terms are there, but per token you keep a different one from PPO's. Check the choice "
        "between them: which one does PPO's pessimistic objective keep, and with yours, is a token stopped at "
        "the edge of the clip range or rewarded for moving further outside it?")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    a = adv[:, None]
    loss_tok = -torch.maximum(a * ratio, a * ratio.clamp(1 - eps_low, 1 + eps_high))
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
