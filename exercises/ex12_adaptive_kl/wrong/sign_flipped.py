"""Known-wrong: beta decreases when the KL is above target."""
HINT = ("Your beta moves the wrong way. Check what your update does when the measured KL is above its target: "
        "should the penalty get stronger or weaker?")


def adaptive_kl_update(beta, current_kl, target_kl, n_steps, horizon):
    e = min(max(1 - current_kl / target_kl, -0.2), 0.2)
    return float(beta * (1 + e * n_steps / horizon))
