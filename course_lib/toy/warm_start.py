"""The toy's warm start: supervised steps on deliberately imperfect answers before RL, so that RL starts from a
policy that is right a fraction of the time (``TinyGPT.initial`` runs it). Cached per process."""
from __future__ import annotations

import time

import torch

from ..rl.config import RunConfig
from ..rl.device import to_device
from ..rl.model import build_model, heldout_accuracy
from ..rl.policy import compute_precision, full_precision
from ..rl.progress import progress_bar
from ..rl.registry import make_task
from .tokens import PAD

_WARM_CACHE: dict = {}


def warm_start(cfg: RunConfig, device: torch.device | None = None, *, progress: bool = False,
               dtype: torch.dtype = torch.float32) -> tuple[dict, float]:
    """Supervised warm start on deliberately imperfect answers -> (state_dict on CPU, seconds).

    Cached per process by the fields it depends on, so runs that differ only in RL knobs start
    from the same policy and pay for it once.
    """
    device = device or cfg.resolved_device()
    key = (cfg.task, cfg.n_layer, cfg.d_model, cfg.n_head, cfg.max_new_tokens, cfg.warm_steps, cfg.warm_batch,
           cfg.warm_lr, cfg.warm_noise, cfg.warm_target, cfg.warm_seed, cfg.heldout_questions, device.type, dtype,
           cfg.precision)
    if key in _WARM_CACHE:
        return _WARM_CACHE[key]
    t0 = time.perf_counter()
    torch.manual_seed(cfg.warm_seed)
    model = build_model(cfg, dtype).to(device)
    g = torch.Generator().manual_seed(cfg.warm_seed)
    task = make_task(cfg)
    train_prompts = task.prompts("train")
    probe = train_prompts[:512].to(device)          # training prompts: the held-out set stays unseen
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warm_lr, weight_decay=0.0)
    target = "" if cfg.warm_target is None else f" to greedy acc {cfg.warm_target}"
    bar = progress_bar(cfg.warm_steps, f"warm start{target}", progress and cfg.warm_steps > 0)
    for step in range(cfg.warm_steps):
        if cfg.warm_target is not None and step % 10 == 0:
            acc = heldout_accuracy(model, probe, cfg.max_new_tokens, cfg.precision, task.verifiers["exact"])
            bar.set_postfix_str(f"greedy acc {acc:.3f}", refresh=False)
            if acc >= cfg.warm_target:
                bar.total = step                    # reached: the bar ends full, not stalled
                break
        for group in opt.param_groups:
            group["lr"] = cfg.warm_lr * min(1.0, (step + 1) / 10)
        idx = torch.randint(len(train_prompts), (cfg.warm_batch,), generator=g)
        prompts = train_prompts[idx]
        answers = task.warm_answers(prompts, cfg.warm_noise, g, cfg.max_new_tokens)
        seq = to_device(torch.cat([prompts, answers], dim=1), device)          # [N, Lp + T]
        with compute_precision(cfg.precision, device):
            logits = full_precision(model(seq[:, :-1])[:, task.prompt_len - 1:])  # [N, T, V]
        target_tok = seq[:, task.prompt_len:]                                     # [N, T]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 target_tok.reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.update(1)
    bar.close()
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    _WARM_CACHE[key] = (state, time.perf_counter() - t0)
    return _WARM_CACHE[key]
