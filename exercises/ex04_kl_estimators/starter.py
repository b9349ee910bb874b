"""ex04: KL estimators. Fill in the bodies; run `python judge.py test ex04`."""
import torch
from torch import Tensor


def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 estimate of KL(pi || pi_ref) per token, tokens sampled from pi. [B, T] -> [B, T].

    With log r = ref_logp - logp:  k1 = -log r.
    """
    raise NotImplementedError("your code here")


def kl_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 estimate of KL(pi || pi_ref) per token, tokens sampled from pi. [B, T] -> [B, T].

    k2 = (log r)^2 / 2.
    """
    raise NotImplementedError("your code here")


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 estimate of KL(pi || pi_ref) per token, tokens sampled from pi. [B, T] -> [B, T].

    k3 = (r - 1) - log r; non-negative, also for log r near 0.
    """
    raise NotImplementedError("your code here")
