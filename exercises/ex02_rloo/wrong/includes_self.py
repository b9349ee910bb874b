"""Known-wrong: the baseline includes the response itself (this is Dr. GRPO, not RLOO)."""
HINT = ("Your advantages point the right way but are too small, by a factor that depends on the group size. "
        "Check which rewards your baseline averages: whose reward is a response's baseline meant to leave "
        "out?")


def rloo_advantages(rewards, group_size):
    r_grp = rewards.view(-1, group_size)
    return (r_grp - r_grp.mean(dim=1, keepdim=True)).reshape(-1)
