"""Known-wrong: the line keeps going below -1 beyond max_len."""
HINT = ("Beyond max_len your penalty keeps decreasing. Check what your penalty does past max_len: should it "
        "go on falling however long the response, or stay at its value at max_len?")


def overlong_penalty(lengths, max_len, cache_len):
    return (((max_len - cache_len) - lengths.float()) / cache_len).clamp(max=0.0)
