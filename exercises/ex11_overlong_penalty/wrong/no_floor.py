"""Known-wrong: the line keeps going below -1 beyond max_len."""
HINT = ("Beyond max_len your penalty keeps decreasing; it must stay at its value at max_len, "
        "however long the response.")


def overlong_penalty(lengths, max_len, cache_len):
    return (((max_len - cache_len) - lengths.float()) / cache_len).clamp(max=0.0)
