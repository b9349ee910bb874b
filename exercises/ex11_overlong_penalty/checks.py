"""Cases for ex11."""
import torch

from course_lib.judge.cases import Case, gen

FN = "overlong_penalty"


def cases():
    g = gen(11)
    out = [
        Case("fixed: DAPO's 20480 / 4096, lengths 100 ... 30000", FN,
             {"lengths": torch.tensor([100, 16384, 16385, 18432, 20480, 20481, 30000]),
              "max_len": 20480, "cache_len": 4096}, kind="fixed", sample=True, atol=1e-7,
             expected=torch.tensor([0.0, 0.0, -1 / 4096, -0.5, -1.0, -1.0, -1.0])),
        Case("fixed: max_len 10, cache 4, every length from 0 to 12", FN,
             {"lengths": torch.arange(13), "max_len": 10, "cache_len": 4}, kind="fixed",
             sample=True, expected=torch.tensor([0.0] * 7 + [-0.25, -0.5, -0.75, -1.0, -1.0, -1.0])),
        Case("edge: the cache is the whole budget (cache_len == max_len)", FN,
             {"lengths": torch.tensor([0, 1, 5, 8, 9]), "max_len": 8, "cache_len": 8}, kind="edge",
             expected=torch.tensor([0.0, -0.125, -0.625, -1.0, -1.0])),
        Case("edge: int32 lengths", FN,
             {"lengths": torch.tensor([3, 60, 95, 100, 130], dtype=torch.int32), "max_len": 100,
              "cache_len": 20}, kind="edge"),
    ]
    for max_len, cache_len in ((512, 128), (1000, 1), (64, 63)):
        out.append(Case(f"random: lengths up to 2 x max_len, max_len={max_len}, cache={cache_len}",
                        FN, {"lengths": torch.randint(0, 2 * max_len, (50,), generator=g),
                             "max_len": max_len, "cache_len": cache_len}))
    return out
