"""Known-wrong: integer arithmetic (floor division) on the integer lengths."""
HINT = ("Your penalty comes back as integers: dividing integer lengths with // (or keeping them as "
        "integers) loses the fractional part that makes the penalty soft.")


def overlong_penalty(lengths, max_len, cache_len):
    return (((max_len - cache_len) - lengths) // cache_len).clamp(-1, 0)
