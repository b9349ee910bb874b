"""Known-wrong: r = pi / pi_ref instead of pi_ref / pi."""
import torch

HINT = ("Your k1 and k3 would be right if the two policies swapped roles. The tokens were sampled "
        "from pi (logp), not from pi_ref: check which probability is on top of the ratio r.")


def _log_r(logp, ref_logp):
    return logp - ref_logp


def kl_k1(logp, ref_logp):
    return -_log_r(logp, ref_logp)


def kl_k2(logp, ref_logp):
    return 0.5 * _log_r(logp, ref_logp) ** 2


def kl_k3(logp, ref_logp):
    log_r = _log_r(logp, ref_logp)
    return torch.expm1(log_r) - log_r
