"""Known-wrong: the step is not scaled by n_steps / horizon."""
HINT = ("Your beta moves by the wrong amount: each update must be scaled by how many samples the "
        "batch covers relative to the controller's horizon (a batch is usually a small fraction "
        "of the horizon).")


def adaptive_kl_update(beta, current_kl, target_kl, n_steps, horizon):
    e = min(max(current_kl / target_kl - 1, -0.2), 0.2)
    return float(beta * (1 + e))
