"""ex12: the adaptive KL controller. Fill in the body; run `python judge.py test ex12`."""


def adaptive_kl_update(beta: float, current_kl: float, target_kl: float, n_steps: int,
                       horizon: int) -> float:
    """One update of Ziegler et al.'s controller; returns the new beta as a Python float.

    e = clip(current_kl / target_kl - 1, -0.2, 0.2);  beta_new = beta * (1 + e * n_steps / horizon).
    """
    raise NotImplementedError("your code here")
