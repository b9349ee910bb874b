"""Scratch: the code cells of chapter 08 (not committed)."""
LOAD = '''import torch
from IPython.display import Markdown, display

from course_lib import advantages, frameworks
from course_lib.claims import claim
from course_lib.display import table
from course_lib.toy import curves, diagnosis, make_config, train
from course_lib.toy.diagnosis import FAILURE, FAILURES, ONSETS, REWARD_GAP
from course_lib.toy.history import environment, load_results
from course_lib.toy.task import EOS, AdditionTask, contains_sum, correctness, to_text
from course_lib.widgets import gallery_panel

torch.set_num_threads(1)
meta, runs = load_results("data/toy_gallery.json")
runs = {name: [diagnosis.with_reward_gap(h) for h in hs] for name, hs in runs.items()}
H = runs["healthy"]
c0 = H[0].config
print(f"stored gallery ({meta['finished']}): {len(runs)} configs x seeds {meta['seeds']}, {meta['steps']} RL steps "
      f"of {c0['prompts_per_step']} prompts x G = {c0['group_size']}, logged every 2nd step; made by\\n  {meta['command']}")
print("healthy run: GRPO, lr 1e-3, T 1.0, exact verifier, 6-token budget, no KL term, one gradient step per batch\\n")
print(table([[f.label, ", ".join(f"{k} = {v}" for k, v in f.change.items()), ONSETS[f.label]] for f in FAILURES],
            ["failure", "what changes", "from step"], ["s", "s", "d"]))
'''

MONITOR_TABLE = '''def names(key, framework):
    m = frameworks.monitor_of(key)
    return "<br>".join(f"`{n}`" for n in m.settings()[framework]) if m and m.settings()[framework] else "—"


rows = []
for key, warns in diagnosis.MONITORS:
    start = sum(curves.window_mean(h, key, first=10) for h in H) / len(H)
    end = sum(curves.window_mean(h, key, last=20) for h in H) / len(H)
    rows.append(f"| `{key}` | {start:.3g} → {end:.3g} | {warns} | {names(key, 'verl')} | {names(key, 'TRL')} |")
gap_end = max(abs(curves.window_mean(h, REWARD_GAP, last=meta["steps"])) for h in H)
rows.append(f"| `{REWARD_GAP}` | {gap_end:.3g} at every step | any gap: the reward pays for something besides "
            "the exact answer | — | — |")
v = frameworks.VERSIONS
display(Markdown(f"| monitor | healthy: first 10 → last 20 steps (mean of 3 seeds) | a departure warns of | "
                 f"verl {v['verl']} | TRL {v['TRL']} |\\n|---|---|---|---|---|\\n" + "\\n".join(rows)))
display(Markdown("\\n".join(f"- **{m.concept}** (`{'`, `'.join(m.course)}`): {m.note}"
                            for m in frameworks.METRICS if m.note and set(m.course) & set(dict(diagnosis.MONITORS)))))
claim("the reward gap is exactly 0 at every logged step of every healthy run", gap_end == 0.0)
'''

DEPARTURES = '''KEYS = [REWARD_GAP, "reward/mean", "acc/sampled", "entropy/mean", "entropy/t1", "len/wrong",
        "len/truncated_frac", "kl/ref", "grad/norm", "groups/zero_signal_frac", "mismatch/abs_logratio_p99"]
SHORT = ["gap", "reward", "acc", "entropy", "ent T=1", "len/wrong", "truncated", "kl/ref", "grad norm",
         "zero-sig", "tail p99"]
lag = {f.label: diagnosis.lags(runs[f.label], H, KEYS, ONSETS[f.label]) for f in FAILURES}
cell = lambda v: "/".join("-" if x is None else str(x) for x in v)          # noqa: E731
print("steps after the onset at which each seed (0/1/2) leaves the healthy run of its seed (-: never)")
print(table([[f.label] + [cell(lag[f.label][k]) for k in KEYS] for f in FAILURES], ["failure"] + SHORT,
            ["s"] * (len(KEYS) + 1)))
print()
for f in FAILURES:
    count = diagnosis.first_movers(lag[f.label])
    every = [SHORT[KEYS.index(k)] for k, n in count.items() if n == len(H)]
    some = [f"{SHORT[KEYS.index(k)]} ({n} of {len(H)})" for k, n in count.items() if 0 < n < len(H)]
    print(f"{f.label:<16} first in every seed: {', '.join(every) or 'none'}"
          + (f"; first in some: {', '.join(some)}" if some else ""))
'''
