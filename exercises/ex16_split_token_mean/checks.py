"""Cases for ex16: the reader's micro_batch_loss, run on every piece of a split batch and added up as
gradient accumulation and DDP's average do, against the whole batch's token-mean (course_lib's
aggregate and token_weights give the expected value and gradient)."""
import torch

from course_lib.aggregation import aggregate, token_weights
from course_lib.judge.cases import Case, gen, lengths_mask, poison
from course_lib.rl.split import random_split, split_from_sizes

FN = "micro_batch_loss"


def accumulated(sizes):
    """call(fn, loss_tok, mask): (1/R) sum_r sum_m fn(piece), the loss DDP's averaged gradient is of."""
    split = split_from_sizes(sizes)

    def call(fn, loss_tok, mask):
        n_tokens, R, M = int(mask.sum()), split.world_size, split.n_micro
        total = loss_tok.new_zeros(())
        for rank in split.rows:
            for rows in rank:
                total = total + fn(loss_tok[rows], mask[rows], n_tokens, R, M)
        return total / R
    return call


def _split_case(name, loss_tok, mask, sizes, *, sample=False):
    return Case(name, FN, {"loss_tok": loss_tok, "mask": mask}, kind="grad", sample=sample,
                call=accumulated(sizes), expected=aggregate(loss_tok, mask, "token-mean"),
                expected_grad=token_weights(mask, "token-mean"), grad_wrt="loss_tok",
                out_grad="required", atol=1e-10, rtol=1e-9, grad_atol=1e-12)


def _batch(g, B, T, lengths=None):
    lengths = torch.randint(1, T + 1, (B,), generator=g) if lengths is None else torch.tensor(lengths)
    mask = lengths_mask(lengths, T)
    return poison(torch.randn(B, T, generator=g, dtype=torch.float64), mask, float("nan")), mask


def cases():
    g = gen(16)
    # one micro-batch: three valid tokens of loss 1, 12 tokens in the batch, 2 ranks -> 2 * 3 / 12
    one = torch.ones(2, 4)
    m1 = lengths_mask([2, 1], 4)
    out = [Case("fixed: one micro-batch of 3 valid tokens (loss 1 each), n_tokens=12, world_size=2",
                FN, {"loss_tok": one, "mask": m1, "n_tokens": 12, "world_size": 2, "n_micro": 3},
                kind="fixed", sample=True, expected=torch.tensor(0.5))]
    # two micro-batches on one rank, lengths 1 and 4+4: each token weighs 1/9, not 1/2 vs 1/16
    loss, mask = _batch(g, 3, 4, [1, 4, 4])
    out.append(_split_case("fixed: 1 rank, micro-batches of 1 and 8 valid tokens",
                           loss, mask, [[1, 2]], sample=True))
    loss, mask = _batch(g, 8, 6, [6] * 8)
    out.append(_split_case("fixed: 2 ranks x 2 micro-batches, equal lengths (a constant factor shows here)",
                           loss, mask, [[2, 2], [2, 2]], sample=True))
    loss, mask = _batch(g, 8, 6, [6] * 8)
    out.append(_split_case("fixed: 4 ranks x 1 micro-batch, equal lengths", loss, mask, [[2], [2], [2], [2]]))
    loss, mask = _batch(g, 6, 5)
    mask[2:4] = False                                  # a micro-batch with no valid token
    out.append(_split_case("edge: a micro-batch of two empty responses contributes nothing", loss, mask,
                           [[2, 2, 2]]))
    loss, mask = _batch(g, 4, 5)
    out.append(_split_case("edge: empty micro-batches (no rows) on an uneven split", loss, mask,
                           [[0, 3, 0], [1, 0, 0]]))
    out.append(Case("edge: no valid token in the whole batch (n_tokens = 0) gives 0", FN,
                    {"loss_tok": torch.randn(3, 4, generator=g), "mask": torch.zeros(3, 4, dtype=torch.bool),
                     "n_tokens": 0, "world_size": 2, "n_micro": 2}, kind="edge", expected=torch.tensor(0.0)))
    for i, (R, M) in enumerate(((1, 3), (2, 1), (2, 4), (3, 2), (4, 3), (4, 4))):
        loss, mask = _batch(g, 16, 10)
        sizes = random_split(16, R, M, g).sizes()
        out.append(_split_case(f"random: {R} rank(s) x {M} micro-batches, uneven sizes {sizes}", loss, mask,
                               sizes, sample=i == 2))
    return out
