"""Right, another way: the binomials as exact Python integers, their ratio as an exact fraction."""
import math
from fractions import Fraction

import torch


def pass_at_k(n, c, k):
    vals = [1 - Fraction(math.comb(int(ni) - int(ci), k), math.comb(int(ni), k)) for ni, ci in zip(n.tolist(), c.tolist())]
    return torch.tensor([float(v) for v in vals], dtype=torch.float64)
