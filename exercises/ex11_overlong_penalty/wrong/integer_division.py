"""Known-wrong: integer arithmetic (floor division) on the integer lengths."""
HINT = ("Your penalty comes back as integers. Check the dtype at each step of your computation: where is the "
        "fractional part that makes the penalty soft lost?")


def overlong_penalty(lengths, max_len, cache_len):
    return (((max_len - cache_len) - lengths) // cache_len).clamp(-1, 0)
