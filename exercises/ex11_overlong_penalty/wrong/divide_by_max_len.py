"""Known-wrong: the slope uses max_len instead of cache_len."""
HINT = ("Inside the cache your penalty falls at the wrong speed. Check the length over which your penalty "
        "goes from 0 to its floor: starting from 0 where the cache begins, does it reach -1 exactly at "
        "max_len?")


def overlong_penalty(lengths, max_len, cache_len):
    return (((max_len - cache_len) - lengths.float()) / max_len).clamp(-1.0, 0.0)
