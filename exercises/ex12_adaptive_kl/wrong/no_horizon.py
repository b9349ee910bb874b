"""Known-wrong: the step is not scaled by n_steps / horizon."""
HINT = ("Your beta moves by the wrong amount. Check how your update depends on the size of the batch: how "
        "many samples does the batch cover, relative to the controller's horizon?")


def adaptive_kl_update(beta, current_kl, target_kl, n_steps, horizon):
    e = min(max(current_kl / target_kl - 1, -0.2), 0.2)
    return float(beta * (1 + e))
