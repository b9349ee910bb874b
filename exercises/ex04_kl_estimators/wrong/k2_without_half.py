"""Known-wrong: k2 without the 1/2."""
import torch

HINT = ("Your k2 is exactly twice the expected value everywhere. Check the constant factor of your formula "
        "against the task's definition of k2: which factor is missing?")


def kl_k1(logp, ref_logp):
    return logp - ref_logp


def kl_k2(logp, ref_logp):
    return (ref_logp - logp) ** 2


def kl_k3(logp, ref_logp):
    log_r = ref_logp - logp
    return torch.expm1(log_r) - log_r
