"""course_lib: the tested library behind the notebooks of
"RL for LLMs by numerical experiment".

Modules, by concept (dependencies point down the list):

- ``masking``      validation of [B, T] inputs, NaN-safe masked reductions
- ``advantages``   rewards [B] -> advantages [B]: GRPO, Dr. GRPO, RLOO; DAPO's signal filter; GAE
- ``rewards``      reward shaping: DAPO's soft overlong punishment
- ``aggregation``  per-token loss [B, T] + mask -> scalar, and the per-token weight each mode gives
- ``kl``           k1 / k2 / k3 estimators, exact categorical KL, the adaptive KL controller
- ``ratios``       log-ratio, the clipped surrogate, clip statistics
- ``corrections``  TIS weights and MIS masks (train/inference mismatch)
- ``losses``       registry of policy losses: PPO/GRPO, DAPO, Dr. GRPO, GSPO, CISPO, SAPO;
                   per-token gradient coefficient c(r, A) by autograd
- ``ranks``        the gloo process launcher (several CPU processes, one torch.distributed group)
- ``lm.model``     the real model (SmolLM2-135M-Instruct, offline): load, chat prompts, sampling, scoring
                   (``lm``, the real model's package, re-exports it)
- ``toy``          the toy's policy and tasks (the trainer's plug-ins); its studies (experiments, curves,
                   diagnosis, long answers) run ``rl``
- ``lm.policy``, ``lm.task``  the real model's policy and chat task for the trainer
- ``rl``           the trainer for any policy and task: config, train, split (every aggregation under
                   micro-batches and ranks), distributed (the split run on torch.distributed)
- ``lm.tokens``, ``lm.runs``  chapter 12's measurements on the real model's replies, chapter 13's stored runs
- ``metrics``      the glossary: every metric key the trainer logs, defined once
- ``judge``        the exercise judge behind ``python judge.py`` and the in-notebook ``check``
- ``display``, ``plots``, ``widgets``  presentation only; no algorithm code imports them

Tensor names mean the same thing everywhere: ``logp``, ``old_logp``, ``ref_logp``,
``rollout_logp`` [B, T]; ``mask`` (bool) [B, T]; ``rewards``, ``adv`` [B].
B = P * G with contiguous groups: rows g*G ... g*G+G-1 share a prompt.
"""

__version__ = "0.1.0"
