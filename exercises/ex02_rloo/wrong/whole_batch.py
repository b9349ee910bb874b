"""Known-wrong: leave-one-out over the whole batch instead of the group."""
HINT = ("Your advantages are right when the batch holds one group but wrong with several. Check which "
        "responses your baseline is taken from: which of them answered the same prompt?")


def rloo_advantages(rewards, group_size):
    n = rewards.numel()
    return rewards - (rewards.sum() - rewards) / (n - 1)
