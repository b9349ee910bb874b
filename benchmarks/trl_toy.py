"""The toy trained by TRL's own GRPOTrainer, beside the course's trainer: chapter 09's side-by-side.

    .venv-peers/bin/python benchmarks/trl_toy.py                  # writes notebooks/data/trl_toy.json
    .venv-peers/bin/python benchmarks/trl_toy.py --steps 20 --out /tmp/x.json   # a quick look

Runs in the peers environment (`make peers-venv`: TRL 1.16.0 and course_lib); offline, on the CPU, no vLLM.
Both trainers start from the course's warm start of the smoke config and run the same number of RL steps
on the same batch (64 prompts x G = 8), budget (6 new tokens), learning rate and thread count, one after
the other in one process:

- the course: ``course_lib.rl.trainer.train``;
- TRL: ``trl.GRPOTrainer`` with ``GRPOConfig(**frameworks.to_trl(cfg))`` plus the machine's settings
  (CPU, bf16 off, no vLLM, no checkpoints), on a ``transformers.GPT2LMHeadModel`` built from a config that
  has the toy's shape and carries its warm-start weights (``to_gpt2``: same forward, same log-probs), a
  word-level tokenizer over the toy's 13 tokens built here, and the course's verifier as the reward.

The two trainers run alternately ``--repeats`` times (each repeat learns the same, both are deterministic
on one thread). Recorded per trainer: the mean sampled reward of every step, the greedy held-out accuracy
every ``--eval-every`` steps (both measured with course_lib's greedy decoder on the same 500 held-out
prompts; TRL's weights are copied back into a TinyGPT for it, outside the timed steps), the wall time of
every step and of each phase of it, and end-to-end tokens/s (response tokens sampled per second of whole
steps). Printed: the ratio TRL / course of the median step time, per repeat and over all repeats, of the
10th percentile too (a busy machine only slows steps down), and where each trainer's step time goes.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_lib import frameworks as fw                       # noqa: E402
from course_lib.rl.config import make_config                 # noqa: E402
from course_lib.rl.history import config_record, cpu_model   # noqa: E402
from course_lib.toy.task import EOS, PAD, PROMPT_LEN, AdditionTask, correctness, to_text   # noqa: E402
from course_lib.rl import build_model, heldout_accuracy, train   # noqa: E402
from course_lib.toy.warm_start import warm_start                        # noqa: E402

# The toy's token ids 0..12 as text; PAD (13) is left out: the toy's policy can never emit it (its logit
# bias is -1e4), so a 13-token vocabulary gives the same softmax, and TRL pads with EOS after the first EOS.
VOCAB = [str(d) for d in range(10)] + ["+", "=", "<eos>"]
HF_VOCAB = len(VOCAB)
assert VOCAB.index("<eos>") == EOS and HF_VOCAB == PAD
# What the machine adds to to_trl's settings: a CPU without vLLM or bf16, no files, one log row a step.
MACHINE = {"use_cpu": True, "bf16": False, "use_vllm": False, "report_to": [], "save_strategy": "no",
           "logging_steps": 1, "disable_tqdm": True, "gradient_checkpointing": False,
           "dataloader_num_workers": 0}


# ----------------------------------------------------------------------------------------------
# the toy as a transformers model and tokenizer
# ----------------------------------------------------------------------------------------------
def tokenizer():
    """A word-level tokenizer over the toy's tokens, one character (or <eos>) per token; EOS pads."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.WordLevel({s: i for i, s in enumerate(VOCAB)}, unk_token="<eos>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("<eos>|."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<eos>",
                                   padding_side="left")


def gpt2_config(cfg):
    """GPT-2's config with the toy policy's shape: pre-LayerNorm blocks, learned positions, exact GELU,
    an untied head, no dropout."""
    from transformers import GPT2Config
    return GPT2Config(vocab_size=HF_VOCAB, n_positions=PROMPT_LEN + cfg.max_new_tokens, n_embd=cfg.d_model,
                      n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=4 * cfg.d_model,
                      activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      layer_norm_epsilon=1e-5, tie_word_embeddings=False, bos_token_id=EOS,
                      eos_token_id=EOS, pad_token_id=EOS)


def _pairs(cfg):
    """(TinyGPT name, GPT-2 name, transposed?) for every weight; GPT-2's Conv1D stores W^T."""
    out = [("tok.weight", "transformer.wte.weight", False), ("pos.weight", "transformer.wpe.weight", False),
           ("ln_f.weight", "transformer.ln_f.weight", False), ("ln_f.bias", "transformer.ln_f.bias", False),
           ("head.weight", "lm_head.weight", False)]
    for i in range(cfg.n_layer):
        t, h = f"blocks.{i}.", f"transformer.h.{i}."
        for a, b in (("ln1", "ln_1"), ("ln2", "ln_2")):
            out += [(t + a + ".weight", h + b + ".weight", False), (t + a + ".bias", h + b + ".bias", False)]
        for a, b in (("qkv", "attn.c_attn"), ("proj", "attn.c_proj"), ("mlp.0", "mlp.c_fc"),
                     ("mlp.2", "mlp.c_proj")):
            out += [(t + a + ".weight", h + b + ".weight", True), (t + a + ".bias", h + b + ".bias", False)]
    return out


def _cut(name: str, v):
    """A TinyGPT tensor without its PAD row (the token embedding and the head have one)."""
    return v[:HF_VOCAB] if name in ("tok.weight", "head.weight") else v


def tiny_to_gpt2(tensors: dict, cfg) -> dict:
    """TinyGPT weights (or gradients) -> the same under GPT-2's names and layout."""
    return {h: (_cut(t, tensors[t]).T if tr else _cut(t, tensors[t])).contiguous() for t, h, tr in _pairs(cfg)}


def to_gpt2(state: dict, cfg, dtype=torch.float32):
    """A GPT2LMHeadModel that computes what the TinyGPT with ``state`` computes, on the 13 tokens."""
    from transformers import GPT2LMHeadModel
    model = GPT2LMHeadModel(gpt2_config(cfg)).to(dtype)
    missing, unexpected = model.load_state_dict(tiny_to_gpt2(state, cfg), strict=False)
    assert not unexpected and all(".attn.bias" in m or "masked_bias" in m for m in missing), (missing, unexpected)
    model.generation_config.pad_token_id = EOS
    return model


def to_tiny(model, cfg, like: dict) -> dict:
    """The GPT-2 model's weights back in a TinyGPT state dict (PAD rows as in ``like``)."""
    sd = model.state_dict()
    out = {k: v.clone() for k, v in like.items()}
    for t, h, tr in _pairs(cfg):
        w = sd[h].T if tr else sd[h]
        if t in ("tok.weight", "head.weight"):
            out[t][:HF_VOCAB] = w
        else:
            out[t] = w.clone()
    return out


def prompt_text(prompts) -> list[str]:
    return [to_text(p) for p in prompts]


def course_reward(prompts, completions, completion_ids, **_):
    """The course's verifier (task.correctness) on TRL's completions: prompt text -> tokens, the
    completion's ids (up to its first EOS) padded with the toy's PAD."""
    p = torch.tensor([[VOCAB.index(c) for c in text] for text in prompts])
    T = max(len(ids) for ids in completion_ids)
    r = torch.tensor([list(ids) + [PAD] * (T - len(ids)) for ids in completion_ids])
    return correctness(p, r).tolist()


def trl_settings(cfg, steps: int, seed: int, output_dir: str) -> dict:
    """GRPOConfig keywords: to_trl's translation of ``cfg`` and the machine's settings."""
    kw = {k: v for k, v, _ in fw.to_trl(cfg) if not k.startswith("#")}
    return {**kw, **MACHINE, "max_steps": steps, "seed": seed, "output_dir": output_dir}


def trl_trainer(cfg, state: dict, steps: int, output_dir: str, callbacks=(), dtype=torch.float32):
    """TRL's GRPOTrainer on the toy: the warm-start weights in GPT-2, the training prompts as text."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    prompts = AdditionTask(heldout_questions=cfg.heldout_questions).prompts("train")
    data = Dataset.from_dict({"prompt": prompt_text(prompts)})
    args = GRPOConfig(**trl_settings(cfg, steps, cfg.seed, output_dir))
    trainer = GRPOTrainer(model=to_gpt2(state, cfg, dtype), reward_funcs=course_reward, args=args,
                          train_dataset=data, processing_class=tokenizer(), callbacks=list(callbacks))
    trainer.remove_callback(PrinterCallback)                    # its log lines; the record keeps them
    return trainer


# ----------------------------------------------------------------------------------------------
# the two runs
# ----------------------------------------------------------------------------------------------
def _timed(fn, phases: dict, key: str):
    """fn, adding its wall time to the current step's entry phases[key][-1]."""
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        result = fn(*a, **k)
        phases[key][-1] += time.perf_counter() - t0
        return result
    return wrapper


class PhaseClock(TrainerCallback):
    """Times TRL's steps: ``phases`` holds, per phase, each step's seconds, ``begin`` each step's start time
    (the end of training closes the last step). From TRL's gradient clipping through the optimiser step counts
    as "backward + optimiser"; ``wrap(trainer)`` times the trainer's other phases."""

    def __init__(self):
        self.phases = {"sample": [], "score": [], "loss forward": [], "backward + optimiser": []}
        self.begin = []

    def on_step_begin(self, args, st, control, **kw):
        for v in self.phases.values():
            v.append(0.0)
        self.begin.append(time.perf_counter())

    def on_pre_optimizer_step(self, args, st, control, **kw):
        self.t_opt = time.perf_counter()

    def on_optimizer_step(self, args, st, control, **kw):
        self.phases["backward + optimiser"][-1] += time.perf_counter() - self.t_opt

    def on_train_end(self, args, st, control, **kw):
        self.begin.append(time.perf_counter())

    def wrap(self, trainer) -> None:
        """Where a step's time goes: generation, scoring (decoding, rewards, advantages, padding, metrics;
        ``finish`` takes generation out of it), the loss's forward, its backward and the optimiser."""
        ph = self.phases
        trainer._generate_single_turn = _timed(trainer._generate_single_turn, ph, "sample")
        trainer._generate_and_score_completions = _timed(trainer._generate_and_score_completions, ph, "score")
        trainer.compute_loss = _timed(trainer.compute_loss, ph, "loss forward")
        trainer.accelerator.backward = _timed(trainer.accelerator.backward, ph, "backward + optimiser")

    def finish(self, step_s: list[float]) -> dict:
        """The phases, scoring less generation, and "other" (the Trainer's own bookkeeping) from ``step_s``."""
        ph = self.phases
        ph["score"] = [a - b for a, b in zip(ph["score"], ph["sample"])]
        ph["other"] = [t - sum(v[i] for v in ph.values()) for i, t in enumerate(step_s)]
        return ph


def run_course(cfg) -> dict:
    import course_lib.rl.trainer as toy
    # two pieces of the step timed from outside: the no-gradient recompute of pi_old and pi_ref
    # (trainer.targets) and the loss's forward (the learner's forward with gradient, trainer.learner_logp,
    # and the loss on it, trainer.policy_loss); train() looks them up at call time
    timers = {"pi_old + pi_ref": [], "loss forward": []}
    originals = toy.targets, toy.policy_loss, toy.collect, toy.learner_logp
    toy.targets = _timed(toy.targets, timers, "pi_old + pi_ref")
    toy.policy_loss = _timed(toy.policy_loss, timers, "loss forward")
    timed_forward = _timed(originals[3], timers, "loss forward")
    toy.learner_logp = lambda *a, **k: (timed_forward if torch.is_grad_enabled() else originals[3])(*a, **k)

    def collect(*a, **k):                                  # a step starts with its sampling
        for v in timers.values():
            v.append(0.0)
        return originals[2](*a, **k)
    toy.collect = collect
    try:
        hist = train(cfg, progress=False)
    finally:
        toy.targets, toy.policy_loss, toy.collect, toy.learner_logp = originals
    rows = hist.rows[1:]
    evals = [(r["step"], r["acc/heldout"]) for r in hist.rows if "acc/heldout" in r]
    step_s = [r["time/step_s"] for r in rows]
    tokens = [r["len/all"] * r["samples/step"] for r in rows]
    phases = {"sample": [r["time/sample_s"] for r in rows], **timers}
    phases["backward + optimiser"] = [r["time/learn_s"] - f for r, f in zip(rows, timers["loss forward"])]
    phases["other"] = [t - sum(v[i] for v in phases.values()) for i, t in enumerate(step_s)]
    return {"reward": [r["reward/mean"] for r in rows], "heldout": evals, "step_s": step_s,
            "tokens": tokens, "eval_steps": [s for s, _ in evals[1:]], "phases": phases}


def run_trl(cfg, state: dict) -> dict:
    held = AdditionTask(heldout_questions=cfg.heldout_questions).prompts("heldout")
    tiny = build_model(cfg)
    out = {"reward": [], "heldout": [], "step_s": [], "tokens": [], "eval_steps": []}

    def evaluate(model):
        tiny.load_state_dict(to_tiny(model, cfg, state))
        return heldout_accuracy(tiny, held, cfg.max_new_tokens, cfg.precision, correctness)

    eval_s = []

    class Clock(PhaseClock):
        """A step's time runs from one step's start to the next one's (so it includes the Trainer's
        logging after the step), less the evaluation, which only this script does."""
        def on_step_begin(self, args, st, control, **kw):
            super().on_step_begin(args, st, control, **kw)
            eval_s.append(0.0)

        def on_step_end(self, args, st, control, model=None, **kw):
            if st.global_step % cfg.eval_every == 0 or st.global_step == cfg.steps:
                t0 = time.perf_counter()
                out["heldout"].append((st.global_step, evaluate(model)))
                out["eval_steps"].append(st.global_step)
                eval_s[-1] = time.perf_counter() - t0

        def on_log(self, args, st, control, logs=None, **kw):
            if logs and "reward" in logs:
                out["reward"].append(logs["reward"])
                out["tokens"].append(logs["completions/mean_length"] * cfg.batch_size)

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = trl_trainer(cfg, state, cfg.steps, tmp, callbacks=[clock])
        clock.wrap(trainer)
        out["heldout"].append((0, evaluate(trainer.model)))
        trainer.train()
    out["step_s"] = [b - a - e for a, b, e in zip(clock.begin, clock.begin[1:], eval_s)]
    out["phases"] = clock.finish(out["step_s"])
    return out


def _timed_steps(run: dict) -> list[int]:
    """Indices of the steps after the first (it carries set-up) that hold no evaluation (the course's
    trainer evaluates inside its step)."""
    return [i for i in range(1, len(run["step_s"])) if i + 1 not in run["eval_steps"]]


def summary(runs: list) -> dict:
    """Step time (median and 10th percentile: a loaded machine only ever slows a step down), the median
    of each phase, and tokens/s end to end, over the timed steps of one or more runs of one trainer."""
    steps = [(run, i) for run in runs for i in _timed_steps(run)]
    s = [run["step_s"][i] for run, i in steps]
    tok = [run["tokens"][i] for run, i in steps]
    first = runs[0]
    return {"median_step_s": statistics.median(s), "p10_step_s": statistics.quantiles(s, n=10)[0],
            "timed_steps": len(s),
            "median_phase_s": {k: statistics.median(run["phases"][k][i] for run, i in steps) for k in first["phases"]},
            "tokens_per_s": sum(tok) / sum(s), "final_heldout": first["heldout"][-1][1],
            "start_heldout": first["heldout"][0][1], "mean_reward_last10": statistics.fmean(first["reward"][-10:])}


def environment(threads: int) -> dict:
    import accelerate
    import transformers
    import trl
    return {"machine": platform.machine(), "cpu": cpu_model(), "cpus": os.cpu_count(), "threads": threads,
            "torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(),
            "trl": trl.__version__, "transformers": transformers.__version__,
            "accelerate": accelerate.__version__, "python": platform.python_version(),
            "load_average_start": round(os.getloadavg()[0], 2),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def write_record(record: dict, out: str) -> None:
    """The run's record as indented JSON at ``out``, said on stdout."""
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(f"wrote {out}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="runs of each trainer, alternating")
    p.add_argument("--out", default=str(ROOT / "notebooks" / "data" / "trl_toy.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    cfg = make_config("smoke", steps=a.steps, eval_every=a.eval_every, seed=a.seed, device="cpu",
                      num_threads=a.threads)
    env = environment(a.threads)
    state, warm_s = warm_start(cfg)
    print(f"{env['date']}: {env['machine']}, {env['cpus']} CPUs, {a.threads} thread(s), torch {env['torch']}, "
          f"TRL {env['trl']}; load average {env['load_average_start']}; warm start {warm_s:.1f} s", flush=True)
    runs, repeats = {"course": [], "TRL": []}, []
    for rep in range(a.repeats):                     # the two trainers alternate: both see the same load
        pair = {}
        for name, fn in (("course", lambda: run_course(cfg)), ("TRL", lambda: run_trl(cfg, state))):
            t0 = time.perf_counter()
            run = fn()
            run["wall_s"] = time.perf_counter() - t0
            runs[name].append(run)
            pair[name] = s = summary([run])
            ph = ", ".join(f"{k} {v:.4f}" for k, v in s["median_phase_s"].items())
            print(f"[{rep + 1}/{a.repeats}] {name:>6}: {a.steps} steps in {run['wall_s']:.1f} s; median step "
                  f"{s['median_step_s']:.4f} s ({ph}), {s['tokens_per_s']:,.0f} tok/s end to end; greedy "
                  f"held-out {s['start_heldout']:.3f} -> {s['final_heldout']:.3f}", flush=True)
        pair["ratio"] = pair["TRL"]["median_step_s"] / pair["course"]["median_step_s"]
        pair["load_average"] = round(os.getloadavg()[0], 2)
        repeats.append(pair)
        print(f"[{rep + 1}/{a.repeats}] TRL / course, median step time: {pair['ratio']:.2f}x", flush=True)
    pooled = {name: summary(rs) for name, rs in runs.items()}
    ratio = pooled["TRL"]["median_step_s"] / pooled["course"]["median_step_s"]
    ratio_p10 = pooled["TRL"]["p10_step_s"] / pooled["course"]["p10_step_s"]
    for name, s in pooled.items():
        print(f"{name:>6}, all {a.repeats} repeats: median step {s['median_step_s']:.4f} s, 10th percentile "
              f"{s['p10_step_s']:.4f} s; " + ", ".join(f"{k} {v:.4f}" for k, v in s["median_phase_s"].items()))
    print(f"TRL / course over all repeats: median step {ratio:.2f}x, 10th percentile {ratio_p10:.2f}x")
    for name, rs in runs.items():                    # the curves: the first run (the others repeat it)
        curves = rs[0]
        assert all(r["heldout"] == curves["heldout"] for r in rs), f"{name}: repeats learned differently"
        runs[name] = {**curves, "summary": pooled[name],
                      "step_s_all": [r["step_s"] for r in rs], "phases_all": [r["phases"] for r in rs]}
    env["load_average_end"] = round(os.getloadavg()[0], 2)
    record = {"config": config_record(cfg), "trl_config": fw.trl_text(cfg),
              "trl_machine": {k: v for k, v in MACHINE.items()}, "environment": env,
              "warm_start_s": warm_s, "runs": runs, "repeats": repeats, "step_time_ratio": ratio,
              "step_time_ratio_p10": ratio_p10}
    write_record(record, a.out)


if __name__ == "__main__":
    main()
