"""Known-wrong: the penalty is positive (a bonus for long answers)."""
HINT = ("Your penalty has the right size but the wrong sign. Check how it is used: it is added to the reward, "
        "so which sign discourages overlong answers?")


def overlong_penalty(lengths, max_len, cache_len):
    return (-((max_len - cache_len) - lengths.float()) / cache_len).clamp(0.0, 1.0)
