"""Chapter 07's toy and the studies made with it.

The toy's plug-ins for the trainer (``course_lib.rl``), importing nothing from it:
- ``task``        the task interface and registry, two-digit addition (prompts, the verifiable 0/1 reward,
                  the imperfect warm-start data)
- ``scratchpad``  the long-answer addition task (chapter 11)
- ``policy``      a tiny decoder-only transformer, KV-cache sampling, the learner's log-probs
- ``tokens``      the toy's vocabulary
The studies, which run the trainer: ``experiments`` (stored comparisons), ``long_answers``, ``diagnosis``,
``fingerprint``, ``scaling``, and ``curves`` (presentation: plots of Histories and result files).
"""
