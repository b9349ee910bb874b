"""Known-wrong: mean and std over the whole batch instead of per group."""
import torch

HINT = ("Your advantages are right when the batch holds a single group but wrong with several: "
        "each response must be compared only with the other responses to the same prompt.")


def group_advantages(rewards, group_size, scale=True, eps=1e-6):
    adv = rewards - rewards.mean()
    if scale:
        adv = adv / (rewards.std() + eps)
    r_grp = rewards.view(-1, group_size)
    has_signal = (r_grp != r_grp[:, :1]).any(dim=1, keepdim=True).expand_as(r_grp).reshape(-1)
    return torch.where(has_signal, adv, torch.zeros_like(adv))
