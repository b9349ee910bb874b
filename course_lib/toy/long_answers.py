"""Comparisons on the long-answer task (``toy.scratchpad``, size "long"), where a response has room
to change its length under RL. ``benchmarks/toy_results.py --only NAME`` stores them as
notebooks/data/toy_NAME.json like chapter 07's."""
from __future__ import annotations

from .config import SIZES
from .experiments import Comparison

LONG = {k: v for k, v in SIZES["long"].items() if k != "steps"}      # a Comparison sets the steps

LONG_COMPARISONS: dict[str, Comparison] = {
    "long_aggregation": Comparison(
        claim="With the per-response mean (GRPO) a long wrong answer is penalised less per token than "
              "with the token mean (DAPO) or Dr. GRPO's constant, so wrong answers grow longer "
              "(Dr. GRPO, Liu et al. 2025; DAPO §3.3).",
        metric="len/wrong",
        keys=("len/wrong", "len/correct", "acc/heldout", "len/truncated_frac", "entropy/mean"),
        base=dict(LONG, loss="grpo"),
        variants={"seq-mean-token-mean (GRPO)": dict(agg="seq-mean-token-mean"),
                  "token-mean (DAPO)": dict(agg="token-mean"),
                  "Dr. GRPO (constant, no std)": dict(loss="dr_grpo")}),
    "long_clip_higher": Comparison(
        claim="With several updates per batch, Clip-Higher (eps_high 0.28) keeps the policy's entropy "
              "higher than the symmetric clip 0.2 (DAPO §3.1, its entropy figure).",
        metric="entropy/mean",
        keys=("entropy/mean", "acc/heldout", "clip/high_frac", "clip/low_frac", "len/all"),
        base=dict(LONG, loss="ppo", minibatches=4, lr=5e-4),
        variants={"symmetric 0.2 / 0.2": dict(eps_high=0.2),
                  "Clip-Higher 0.2 / 0.28": dict(eps_high=0.28)}),
}
