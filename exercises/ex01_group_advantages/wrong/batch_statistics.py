"""Known-wrong: mean and std over the whole batch instead of per group."""
import torch

HINT = ("Your advantages are right when the batch holds a single group but wrong with several. Check which "
        "responses your mean and std are taken over: which other responses should a response be compared "
        "with?")


def group_advantages(rewards, group_size, scale=True, eps=1e-6):
    adv = rewards - rewards.mean()
    if scale:
        adv = adv / (rewards.std() + eps)
    r_grp = rewards.view(-1, group_size)
    has_signal = (r_grp != r_grp[:, :1]).any(dim=1, keepdim=True).expand_as(r_grp).reshape(-1)
    return torch.where(has_signal, adv, torch.zeros_like(adv))
