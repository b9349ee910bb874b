"""Known-wrong: the sum of the others divided by G instead of G - 1."""
HINT = ("Your baseline is too small in magnitude: you sum the right rewards but divide by the wrong "
        "count. How many other responses does a group of G have?")


def rloo_advantages(rewards, group_size):
    r_grp = rewards.view(-1, group_size)
    others = (r_grp.sum(dim=1, keepdim=True) - r_grp) / group_size
    return (r_grp - others).reshape(-1)
