"""LoRA on the real model (lm.lora): the wrapped model starts as the pretrained one, only its adapters train, pi_ref
is the same model with the adapters off, a rank that does not fit names the limit, and the trainer runs it by name."""
from dataclasses import replace

import pytest
import torch

from course_lib.lm.lora import AdaptersOff, LoraChatPolicy, rank_limit, targeted_linears
from course_lib.lm.model import prompt_tensor
from course_lib.lm.policy import build_policy
from course_lib.lm.task import SYSTEM, ChatAdditionTask
from course_lib.rl.config import make_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def base():
    return build_policy()


def batch(policy):
    q = ChatAdditionTask().questions("heldout")
    prompts = prompt_tensor([policy.chat.chat_ids(t, SYSTEM) for t in q.texts[:2]])
    return prompts, torch.tensor([[30, 31, 32, 33], [40, 41, 42, 43]])


def test_a_fresh_adapter_is_the_pretrained_model_and_only_the_adapters_train(base):
    lora = LoraChatPolicy(build_policy().chat, rank=2)
    prompts, cont = batch(base)
    with torch.no_grad():
        assert torch.equal(lora(prompts, continuation=cont), base(prompts, continuation=cont))    # B = 0
        a = lora.rollout(prompts, 6, greedy=True)
        b = base.rollout(prompts, 6, greedy=True)
    assert torch.equal(a.responses, b.responses)
    trainable = {n for n, p in lora.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    want = sum(2 * (m.in_features + m.out_features) for m in targeted_linears(base.chat.model, ("all-linear",)).values())
    assert sum(p.numel() for p in lora.trainable_parameters()) == want          # rank x (in + out) per layer
    assert sum(p.numel() for p in lora.trainable_parameters()) == 2 * 305_280   # 30 layers x 7 linears, rank 2


def test_the_adapters_draw_is_the_seeds_alone_so_a_run_repeats_in_any_process():
    def a_weights(policy):
        return {n: p.detach().clone() for n, p in policy.named_parameters() if ".lora_A." in n}
    cfg = make_config("real", policy="smollm2_lora", lora_rank=1, seed=3)
    first = a_weights(LoraChatPolicy.for_config(cfg, torch.float32, torch.device("cpu")))
    torch.manual_seed(12345)
    torch.rand(1000)                                                    # the process drew something else before
    state = torch.get_rng_state()
    again = a_weights(LoraChatPolicy.for_config(cfg, torch.float32, torch.device("cpu")))
    assert torch.equal(torch.get_rng_state(), state)                    # and the caller's generator is untouched
    assert first.keys() == again.keys() and all(torch.equal(first[n], again[n]) for n in first)
    other = a_weights(LoraChatPolicy.for_config(replace(cfg, seed=4), torch.float32, torch.device("cpu")))
    assert not any(torch.equal(first[n], other[n]) for n in first)      # another seed, another draw


def test_a_step_moves_the_adapters_alone_and_the_reference_stays_pretrained(base):
    lora = LoraChatPolicy(build_policy().chat, rank=1)
    frozen = {n: p.detach().clone() for n, p in lora.named_parameters() if not p.requires_grad}
    prompts, cont = batch(base)
    opt = torch.optim.AdamW(lora.trainable_parameters(), lr=1e-3)
    logits = lora(prompts, continuation=cont[:, :-1])
    loss = -torch.log_softmax(logits, -1).gather(2, cont[..., None]).mean()
    loss.backward()
    assert base.chat.model.get_input_embeddings().weight.grad is None
    assert all(p.grad is None for n, p in lora.named_parameters() if not p.requires_grad)   # no base gradient
    opt.step()
    assert len(opt.state) == len(lora.trainable_parameters())                                # adapters' state only
    assert all(torch.equal(p, frozen[n]) for n, p in lora.named_parameters() if not p.requires_grad)
    ref = lora.reference()
    assert isinstance(ref, AdaptersOff) and ref.state_dict() == {}
    with torch.no_grad():
        after, pretrained = lora(prompts, continuation=cont), base(prompts, continuation=cont)
        assert not torch.equal(after, pretrained)
        assert torch.equal(ref(prompts, continuation=cont), pretrained)
        assert torch.equal(lora(prompts, continuation=cont), after)              # the switch comes back on


def test_a_rank_or_target_that_does_not_fit_names_the_limit(base):
    assert rank_limit(base.chat.model, ("all-linear",)) == (192, "model.layers.0.self_attn.k_proj")
    assert rank_limit(base.chat.model, ("q_proj", "o_proj"))[0] == 576
    with pytest.raises(ValueError, match=r"lora_rank=193 does not fit.*k_proj maps 192.*use 1 \.\. 192"):
        LoraChatPolicy(base.chat, rank=193)
    with pytest.raises(ValueError, match=r"names no linear layer.*'q_proj'"):
        LoraChatPolicy(base.chat, targets=("qproj",))
    with pytest.raises(ValueError, match="lora_rank must be an int >= 1"):
        LoraChatPolicy(base.chat, rank=0)


def test_the_config_names_the_lora_policy_and_its_fields_and_no_other_policy_reads_them():
    cfg = make_config("real", policy="smollm2_lora", lora_rank=4, lora_targets=("q_proj", "v_proj"))
    assert {"lora_rank", "lora_alpha", "lora_targets"} <= set(cfg.stored_fields())
    assert "lora_rank" not in make_config("real").stored_fields()
    with pytest.raises(ValueError, match="lora_rank=4 is read by neither the policy 'smollm2'"):
        make_config("real", lora_rank=4)


def test_the_trainer_trains_a_lora_policy_by_name():
    from course_lib.rl import train
    cfg = make_config("real", policy="smollm2_lora", lora_rank=1, steps=1, prompts_per_step=2, group_size=4,
                      micro_batches=1, max_new_tokens=8, lr=1e-3, warmup_steps=1, num_threads=1,
                      verifier="random", format_weight=0.0)              # coins: every group has a signal
    hist = train(cfg, progress=False)
    state = hist.final_state
    base = build_policy().state_dict()
    moved = [k for k in state if ".lora_B." in k and state[k].abs().max() > 0]
    assert moved                                                                  # the adapters learned
    assert hist.rows[1]["groups/zero_signal_frac"] < 1
    for k, v in base.items():                                                    # every base weight as it was
        key = next(x for x in (k, k.replace(".weight", ".base_layer.weight")) if x in state)
        assert torch.equal(state[key], v), k


def test_the_lora_sweep_is_chapter_13s_run_with_adapters_and_its_full_arms_are_chapter_13s_config():
    import importlib.util
    import json
    from pathlib import Path
    from course_lib.rl.history import config_record
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("real_lm_lora", root / "benchmarks" / "real_lm_lora.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for arm in script.ARMS:
        cfg = script.arm_config(arm, seed=0)
        assert set(cfg.diff(make_config("real", num_threads=2))) <= {"lr", "policy", "lora_rank", "lora_alpha",
                                                                     "lora_targets"}
        assert (cfg.policy == "smollm2_lora") == arm.startswith("r1_")
    assert min(script.LORA_LRS) == make_config("real").lr                   # full fine-tuning's rate, copied over
    ch13 = json.loads((root / "notebooks" / "data" / "real_lm_grpo.json").read_text())["runs"]
    full = script.arm_config("full_lr1e-05", seed=0)
    for key, lr in (("grpo/0", 2e-5), ("lr_5e-6/0", 5e-6), ("lr_5e-5/0", 5e-5)):       # read, not trained again
        assert ch13[key]["config"] == config_record(replace(full, lr=lr)), key
    stored = json.loads(script.OUT.read_text())["runs"]                     # each stored run is the script's own
    assert stored
    for key, run in stored.items():
        arm, seed = key.split("/")
        assert run["config"] == config_record(script.arm_config(arm, int(seed))), key
    with pytest.raises(ValueError, match="arm must be one of"):
        script.arm_config("r2_lr1e-04", seed=0)


def test_the_stored_lora_step_is_the_full_steps_size_with_rank_1_adapters():
    """notebooks/data/real_lm_step_lora.json (benchmarks/real_lm_step.py --lora-rank 1) is the step of
    real_lm_step.json's size with adapters, and its parts add up to its median step."""
    import json
    from pathlib import Path
    data = Path(__file__).resolve().parents[1] / "notebooks" / "data"
    lora, full = (json.loads((data / name).read_text()) for name in ("real_lm_step_lora.json", "real_lm_step.json"))
    assert lora["lora_rank"] == 1 and full.get("lora_rank") is None
    assert lora["sizes"] == full["sizes"]
    assert sum(lora["median_s"].values()) == pytest.approx(lora["median_step_s"], rel=0.05)
    assert lora["median_s"]["optimizer"] < full["median_s"]["optimizer"]     # 0.3M parameters' state, not 135M
