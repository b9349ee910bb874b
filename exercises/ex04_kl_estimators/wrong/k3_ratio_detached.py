"""Known-wrong: k3 with the ratio r detached (right values, wrong gradient)."""
import torch

HINT = ("Your k3 values are right but its gradient with respect to logp is not: part of the expression is cut "
        "off from autograd. Check every place where logp enters your k3: does each one still carry its "
        "gradient, as a loss term must?")


def kl_k1(logp, ref_logp):
    return logp - ref_logp


def kl_k2(logp, ref_logp):
    return 0.5 * (ref_logp - logp) ** 2


def kl_k3(logp, ref_logp):
    log_r = ref_logp - logp
    return torch.expm1(log_r).detach() - log_r
