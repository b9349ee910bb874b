"""The metric glossary: every key the toy trainer logs (or a loss reports), defined once.

Keys are namespaced ``group/name``. Losses return their statistics under these names
(``ratios.clip_stats``); the trainer merges them into one row per step of a ``History``, and
refuses to log a key that is not defined here. Chapter 07 prints the glossary.
"""
from __future__ import annotations

METRICS: dict[str, str] = {
    # outcome
    "reward/mean": "Mean shaped reward of every response drawn this step (the verifier's 0/1 plus any overlong penalty or length bonus).",
    "acc/sampled": "Share of the responses drawn this step that are correct by the exact check, whatever verifier the reward uses (sampled at the training temperature).",
    "acc/heldout": "Greedy-decoding accuracy on the fixed held-out prompts (logged every eval_every steps, NaN otherwise).",
    # reply categories (a task that sorts its replies: the real model's chat addition, lm.task.categories)
    "replies/finished": "Share of the responses drawn this step that end with an end-of-answer token within the budget (1 - len/truncated_frac).",
    "replies/formatted": "Share of the responses drawn this step that state their answer as the task asks ('Answer: <n>'), right or wrong.",
    "replies/exact": "Share of the responses drawn this step whose last stated integer is the answer (the exact verdict; equals acc/sampled).",
    "replies/right_sum": "Share of the responses drawn this step that state the right answer anywhere, as any of their integers (outside a restated 'a + b').",
    "replies/no_sum": "Share of the responses drawn this step that state no integer at all (outside a restated 'a + b').",
    # policy shape
    "entropy/mean": "Mean per-token entropy (nats) of the policy at the sampling temperature over the valid tokens of the batch, before the update.",
    "entropy/t1": "Mean per-token entropy (nats) of the same policy at temperature 1 over the valid tokens of the batch, before the update: equal to entropy/mean when the sampler runs at T = 1; apart from it, it tells a colder sampler from a policy that lost its own entropy.",
    "len/truncated_frac": "Share of the responses drawn this step that reached the length budget without an end-of-answer token (truncated).",
    "len/all": "Mean response length in tokens, EOS included, over the responses drawn this step.",
    "len/correct": "Mean response length of the correct responses drawn this step (NaN if none).",
    "len/wrong": "Mean response length of the wrong responses drawn this step (NaN if none).",
    "kl/ref": "Exact mean per-token KL(pi_theta || pi_ref) in nats over the valid tokens of the batch, before the update; pi_ref is the warm-start policy.",
    "kl/penalty": "The KL term's estimate aggregate(kl_estimate(logp, ref_logp, mask, kind)) before multiplying by beta, averaged over the step's optimiser steps (0 when beta = 0).",
    # ratios and clipping (from the loss's stats, averaged over the step's optimiser steps)
    "clip/low_frac": "Share of valid tokens with A < 0 and ratio < 1 - eps_low: the lower clip binds (PPO-style losses give such a token no gradient; CISPO gives it one weighted by the clipped ratio).",
    "clip/high_frac": "Share of valid tokens with A > 0 and ratio > 1 + eps_high: the upper clip binds (PPO-style losses give such a token no gradient; CISPO gives it one weighted by the clipped ratio).",
    "clip_seq/low_frac": "GSPO: share of sequences with A < 0 and sequence ratio s < 1 - eps_low (the whole sequence is clipped).",
    "clip_seq/high_frac": "GSPO: share of sequences with A > 0 and sequence ratio s > 1 + eps_high (the whole sequence is clipped).",
    "ratio/outside_frac": "Share of valid tokens (sequences for GSPO) whose ratio lies outside [1 - eps_low, 1 + eps_high], whatever the sign of A.",
    "ratio/mean": "Mean of the policy ratio pi_theta / pi_old over valid tokens (sequence ratios for GSPO), averaged over the step's optimiser steps.",
    "ratio/max": "Largest policy ratio over valid tokens (sequence ratios for GSPO) in any of the step's optimiser steps.",
    # signal
    "groups/zero_signal_frac": "Share of the groups drawn this step whose G rewards are all equal, so every advantage in them is 0.",
    "reward/group_std": "Mean over the groups drawn this step of the standard deviation of their G rewards (unbiased, divisor G - 1): 0 in a group without signal.",
    "adv/pos_token_frac": "Share of the valid tokens used for the update whose advantage is > 0.",
    "samples/step": "Responses sampled this step, including groups that dynamic sampling discarded.",
    "samples/drawn": "Responses sampled since the start of RL (cumulative samples/step).",
    # sampler / learner mismatch
    "mismatch/abs_logratio_p99": "99th percentile over valid tokens of |log pi_learner - log pi_sampler| for the sampled tokens (0 when they agree).",
    "mismatch/abs_logratio_max": "Largest |log pi_learner - log pi_sampler| over the valid tokens of the batch.",
    "is/weight_mean": "Mean TIS/MIS correction weight over valid tokens (1 when there is no correction).",
    "is/zero_frac": "Share of valid tokens whose correction weight is 0 (MIS dropped them).",
    # optimisation
    "loss/policy": "The policy loss the loss function returned, averaged over the step's optimiser steps.",
    "loss/total": "Policy loss, minus entropy_coef times the entropy bonus, plus beta times the KL term, averaged over the step's optimiser steps (what was minimised).",
    "loss/entropy_bonus": "The policy's entropy aggregated like the policy loss (the term entropy_coef weighs), averaged over the step's optimiser steps; logged only when entropy_coef > 0.",
    "grad/norm": "Gradient norm before clipping, averaged over the step's optimiser steps.",
    "lr": "Learning rate of the step's last optimiser step (after warm-up and schedule).",
    # cost
    "time/sample_s": "Seconds spent sampling this step (all rounds).",
    "time/learn_s": "Seconds spent in the learner's forward/backward/optimiser passes this step.",
    "time/targets_s": "Seconds spent on the batch's constants before the loss: the no-grad forwards (pi_old when it is recomputed, pi_ref when it runs), advantages, correction weights and their monitors.",
    "time/step_s": "Wall-clock seconds of the whole step (sampling, rewards, recomputing log-probs, learning, evaluation).",
    "time/elapsed_s": "Wall-clock seconds since the start of RL (warm start excluded).",
    "time/elapsed_cpu_s": "CPU seconds used by this process since the start of RL (all threads): on a shared machine a steadier cost measure than wall time.",
    "speed/sample_tok_s": "Sampled response tokens per second of sampling time.",
    "speed/learn_tok_s": "Token positions (prompt + response) per second through the learner's forward and backward passes.",
    "flops/sample": "Model FLOPs of this step's sampling, counted as if each token were computed once (KV cache).",
    "flops/learn": "Model FLOPs of this step's learner passes (forward + backward, 6N rule plus attention).",
    "flops/targets": "Model FLOPs of this step's forwards without gradient: the pi_old recompute (none when pi_old is the loss forward's own log-probs) and the reference forward (when a KL term or a monitor needs it).",
}


def check_keys(keys) -> None:
    """Raise KeyError naming every key that has no definition in METRICS."""
    unknown = sorted(set(keys) - set(METRICS))
    if unknown:
        raise KeyError(f"metric keys without a definition in metrics.METRICS: {unknown}")


def _cell(text: str) -> str:
    """Text for a markdown table cell: a bare | would end the cell (KL(p || q)), so escape it."""
    return text.replace("|", "\\|")


def glossary_markdown(keys=None) -> str:
    """A markdown table (key | definition) of the given keys, or of all of them."""
    keys = list(METRICS) if keys is None else list(keys)
    check_keys(keys)
    rows = [f"| `{_cell(k)}` | {_cell(METRICS[k])} |" for k in keys]
    return "\n".join(["| key | definition |", "|---|---|", *rows])
