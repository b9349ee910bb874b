"""Known-wrong: leave-one-out over the whole batch instead of the group."""
HINT = ("Your advantages are right when the batch holds one group but wrong with several: the "
        "baseline must come from the responses to the same prompt only.")


def rloo_advantages(rewards, group_size):
    n = rewards.numel()
    return rewards - (rewards.sum() - rewards) / (n - 1)
