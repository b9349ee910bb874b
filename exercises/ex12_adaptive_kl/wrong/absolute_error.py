"""Known-wrong: the error is current - target instead of current / target - 1."""
HINT = ("Your error is measured in the units of the KL. Check how your error compares the KL with its target: "
        "would your controller behave the same for small and large targets?")


def adaptive_kl_update(beta, current_kl, target_kl, n_steps, horizon):
    e = min(max(current_kl - target_kl, -0.2), 0.2)
    return float(beta * (1 + e * n_steps / horizon))
