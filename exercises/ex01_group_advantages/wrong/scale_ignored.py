"""Known-wrong: the scale flag is ignored (always divides by the std)."""
import torch

HINT = ("With scale=False your advantages are still rescaled. Dr. GRPO keeps only one of the two "
        "normalisation steps of GRPO: check which of your steps still runs when scale is False, and which one "
        "Dr. GRPO leaves out.")


def group_advantages(rewards, group_size, scale=True, eps=1e-6):
    r_grp = rewards.view(-1, group_size)
    adv = (r_grp - r_grp.mean(dim=1, keepdim=True)) / (r_grp.std(dim=1, keepdim=True) + eps)
    has_signal = (r_grp != r_grp[:, :1]).any(dim=1, keepdim=True)
    return torch.where(has_signal, adv, torch.zeros_like(adv)).reshape(-1)
