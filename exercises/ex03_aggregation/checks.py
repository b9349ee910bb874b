"""Cases for ex03."""
import torch

from course_lib.judge.cases import Case, gen, lengths_mask, poison, random_mask

FN = "aggregate"
MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def _book():
    """rlhf-book ch. 6: token losses [1,1,1,1,10] and [1 x 9, 10], padded to T = 12."""
    loss = torch.zeros(2, 12)
    loss[0, :5] = torch.tensor([1.0, 1, 1, 1, 10])
    loss[1, :10] = torch.tensor([1.0] * 9 + [10.0])
    return loss, lengths_mask([5, 10], 12)


def cases():
    out = []
    loss, mask = _book()
    for mode, kw, want in (("token-mean", {}, 33 / 15), ("seq-mean-token-mean", {}, 2.35),
                           ("seq-mean-token-sum", {}, 16.5),
                           ("seq-mean-token-sum-norm", {"max_len": 10}, 1.65),
                           ("seq-mean-token-sum-norm", {}, 16.5 / 12)):
        extra = f", max_len={kw['max_len']}" if kw else ", max_len=None (T=12)"
        out.append(Case(f"fixed: rlhf-book's two answers, {mode}{extra if 'norm' in mode else ''}"
                        f" = {want:.4g}", FN, {"loss_tok": loss, "mask": mask, "mode": mode}, kw,
                        kind="fixed", sample=mode != "seq-mean-token-sum-norm" or bool(kw),
                        expected=torch.tensor(want, dtype=torch.float32)))
    # per-token weights (the gradient) for the chapter's lengths 200, 50, 2000, 400
    lengths = torch.tensor([200, 50, 2000, 400])
    m = lengths_mask(lengths, 2000)
    x = torch.zeros(4, 2000, dtype=torch.float64)
    for mode, alpha in (("seq-mean-token-mean", 1.0 / (4 * lengths.double())),
                        ("token-mean", torch.full((4,), 1.0 / 2650, dtype=torch.float64))):
        want = torch.where(m, alpha[:, None].expand(4, 2000), torch.zeros(4, 2000, dtype=torch.float64))
        out.append(Case(f"fixed: token weights d loss/d loss_tok for lengths 200/50/2000/400, {mode}",
                        FN, {"loss_tok": x, "mask": m, "mode": mode}, kind="grad",
                        grad_wrt="loss_tok", expected_grad=want, out_grad="required",
                        grad_atol=1e-10))
    g = gen(3)
    # an empty row in the middle: it must not count as a sequence
    mask_e = random_mask(g, 5, 7)
    mask_e[2] = False
    loss_e = torch.randn(5, 7, generator=g)
    for mode in MODES:
        out.append(Case(f"edge: an empty response (row 2) is not counted, {mode}", FN,
                        {"loss_tok": loss_e, "mask": mask_e, "mode": mode}, kind="edge",
                        sample=mode == "seq-mean-token-mean"))
    empty = torch.zeros(3, 4, dtype=torch.bool)
    for mode in MODES:
        out.append(Case(f"edge: no valid token at all gives 0, {mode}", FN,
                        {"loss_tok": torch.randn(3, 4, generator=g), "mask": empty, "mode": mode},
                        kind="edge", expected=torch.tensor(0.0)))
    mask_p = random_mask(g, 6, 9)
    loss_p = poison(torch.randn(6, 9, generator=g, dtype=torch.float64), mask_p, float("nan"))
    for mode in MODES:
        out.append(Case(f"edge: NaN in the padding changes neither value nor gradient, {mode}", FN,
                        {"loss_tok": loss_p, "mask": mask_p, "mode": mode}, kind="grad",
                        grad_wrt="loss_tok", out_grad="required", atol=1e-6))
    ones = torch.zeros(4, 5, dtype=torch.bool)
    ones[:, 0] = True
    for mode in MODES:
        out.append(Case(f"edge: one-token responses, {mode}", FN,
                        {"loss_tok": torch.randn(4, 5, generator=g), "mask": ones, "mode": mode},
                        kind="edge"))
    for mode in MODES:
        B, T = 8, 16
        mk = random_mask(g, B, T)
        out.append(Case(f"random: values, {mode}", FN,
                        {"loss_tok": torch.randn(B, T, generator=g), "mask": mk, "mode": mode},
                        {"max_len": 32} if "norm" in mode else {}, kind="random"))
        mk = random_mask(g, B, T)
        out.append(Case(f"random: token weights (gradient), {mode}", FN,
                        {"loss_tok": torch.randn(B, T, generator=g, dtype=torch.float64),
                         "mask": mk, "mode": mode}, kind="grad", grad_wrt="loss_tok",
                        out_grad="required"))
    return out
