"""Known-wrong: the proportional error is not clipped."""
HINT = ("Your update is right when the KL is close to its target but too large when it is far. Check whether "
        "your controller limits how big a correction one batch can cause.")


def adaptive_kl_update(beta, current_kl, target_kl, n_steps, horizon):
    return float(beta * (1 + (current_kl / target_kl - 1) * n_steps / horizon))
