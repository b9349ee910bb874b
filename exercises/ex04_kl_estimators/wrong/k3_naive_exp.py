"""Known-wrong: k3 = exp(log r) - 1 - log r, which goes negative near log r = 0 in float32."""
import torch

HINT = ("For log-ratios close to 0 your k3 comes out slightly negative, which no KL estimate should: "
        "subtracting two nearly equal float32 numbers loses the digits that matter. Check where your formula "
        "forms a number close to 1 and then subtracts 1 from it: could that difference be computed without "
        "forming the number first?")


def kl_k1(logp, ref_logp):
    return logp - ref_logp


def kl_k2(logp, ref_logp):
    return 0.5 * (ref_logp - logp) ** 2


def kl_k3(logp, ref_logp):
    log_r = ref_logp - logp
    return torch.exp(log_r) - 1 - log_r
