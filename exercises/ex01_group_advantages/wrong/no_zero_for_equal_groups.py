"""Known-wrong: equal-reward groups left to floating point (residue / eps)."""
import torch

HINT = ("A group whose rewards are all equal should give exactly 0, but yours gives small or even large "
        "non-zero values: in float32 the mean of equal numbers need not equal them exactly, and a tiny "
        "remainder divided by a tiny denominator is not tiny. Check how your code treats a group whose "
        "rewards are all the same: does anything recognise such a group, or do you rely on the arithmetic to "
        "come out 0?")


def group_advantages(rewards, group_size, scale=True, eps=1e-6):
    r_grp = rewards.view(-1, group_size)
    adv = r_grp - r_grp.mean(dim=1, keepdim=True)
    if scale:
        adv = adv / (r_grp.std(dim=1, keepdim=True) + eps)
    return adv.reshape(-1)
