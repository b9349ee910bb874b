"""Known-wrong: the population std (divide by G) instead of the Bessel-corrected one."""
import torch

HINT = ("Your advantages are a little larger in magnitude than expected, by a factor that depends "
        "only on the group size. There are two common definitions of the standard deviation; "
        "check which one the task asks for and which one your code uses.")


def group_advantages(rewards, group_size, scale=True, eps=1e-6):
    r_grp = rewards.view(-1, group_size)
    adv = r_grp - r_grp.mean(dim=1, keepdim=True)
    if scale:
        adv = adv / (r_grp.std(dim=1, keepdim=True, unbiased=False) + eps)
    has_signal = (r_grp != r_grp[:, :1]).any(dim=1, keepdim=True)
    return torch.where(has_signal, adv, torch.zeros_like(adv)).reshape(-1)
