"""Known-wrong: the optimistic max of the two terms instead of PPO's pessimistic min."""
import torch

HINT = ("Per token you keep the more favourable of the two candidate terms (a max of the objective, "
        "or a min of the loss) where PPO keeps the worse one (min of the objective, max of the "
        "loss). Both terms are there, only the choice between them is flipped: with it, a token is "
        "rewarded for moving further outside the clip range instead of being stopped there.")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    a = adv[:, None]
    loss_tok = -torch.maximum(a * ratio, a * ratio.clamp(1 - eps_low, 1 + eps_high))
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
