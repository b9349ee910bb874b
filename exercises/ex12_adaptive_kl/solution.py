"""The proportional error is relative to the target (a KL 50% above target gives e = 0.5 whatever
the target's scale), clipped to +-0.2 so that one noisy batch cannot move beta much. The step is
scaled by n_steps / horizon: over `horizon` samples at a constant error, beta changes by about a
factor e^e. Plain Python arithmetic, returned as float.
"""


def adaptive_kl_update(beta: float, current_kl: float, target_kl: float, n_steps: int,
                       horizon: int) -> float:
    error = min(max(current_kl / target_kl - 1.0, -0.2), 0.2)
    return float(beta * (1.0 + error * n_steps / horizon))
