"""The trainer's seam on the policy side (``rl.policy.Policy``): every hook the trainer calls is declared there with
its default, the policies subclass it, and a policy that leaves out what has no default is told which."""
import pytest
import torch

from course_lib import rl
from course_lib.rl.policy import Policy
from course_lib.toy.policy import TinyGPT


def test_a_policy_that_sets_nothing_gets_each_hooks_default():
    model = TinyGPT(n_layer=1, d_model=8, n_head=2, block_size=8)
    assert isinstance(model, Policy) and model.returns_freed_memory is False and model.score_rows is None
    ref = model.reference()
    assert ref is not model and not any(p.requires_grad for p in ref.parameters())
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), ref.parameters()))
    assert all(p.requires_grad for p in model.parameters())          # the policy itself still trains
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert not torch.equal(next(model.parameters()), next(ref.parameters()))   # a copy, not a view
    assert ref.release() is None


@pytest.mark.parametrize("call", ["forward", "rollout", "flops_per_token"])
def test_a_policy_without_a_required_method_names_it_and_itself(call):
    class Bare(Policy):
        eos_id, pad_id = 1, 2
    args = {"forward": (torch.zeros(1, 2, dtype=torch.long),), "rollout": (torch.zeros(1, 2, dtype=torch.long), 3),
            "flops_per_token": (4.0,)}[call]
    with pytest.raises(NotImplementedError, match="Bare must implement"):
        getattr(Bare(), call)(*args)


def test_the_default_start_is_for_configs_policy_with_its_own_state():
    """A policy without a warm start (the real model) starts from ``for_config``'s weights, and the state it hands
    the trainer (what a stale sampler starts from) is those weights (planted: an empty or other state)."""
    class Plain(Policy):
        eos_id, pad_id = 1, 2

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(3, 2)

        @classmethod
        def for_config(cls, cfg, dtype, device):
            return cls().to(device=device, dtype=dtype)
    policy, state, seconds = Plain.initial(None, torch.device("cpu"), torch.float64)
    assert isinstance(policy, Plain) and seconds >= 0 and state.keys() == {"w.weight", "w.bias"}
    assert all(torch.equal(state[k], v) and v.dtype == torch.float64 for k, v in policy.state_dict().items())


class Instrumented(TinyGPT):
    """A TinyGPT that asks for pi_ref, its release and its rows per forward without gradient through the hooks,
    and records what the trainer did with them."""
    score_rows = 3

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = []                            # shared with pi_ref, which is a deep copy made after this

    def reference(self):
        self.log.append("reference")
        ref = Instrumented(self.n_layer, self.d_model, self.blocks[0].n_head, self.block_size,
                           vocab_size=self.tok.num_embeddings)
        ref.load_state_dict(self.state_dict())
        ref.log = self.log
        ref.release = lambda: self.log.append("release")
        return ref.requires_grad_(False)

    def forward(self, prompts, cache=None, *, continuation=None):
        if continuation is not None and not torch.is_grad_enabled():
            self.log.append(len(prompts))        # a forward without gradient: how many rows
        return super().forward(prompts, cache, continuation=continuation)


def test_the_trainer_calls_each_hook_of_the_policy(monkeypatch):
    """pi_ref comes from the policy's ``reference``, is ``release``d after every step that scored with it, and
    the forwards without gradient take ``score_rows`` rows at a time; planting any of them ignored fails here."""
    from course_lib.rl import trainer
    from course_lib.rl.config import RunConfig
    cfg = RunConfig(steps=2, prompts_per_step=4, group_size=4, n_layer=1, d_model=16, n_head=2, warm_steps=0,
                    warm_target=None, heldout_questions=16, eval_every=2, device="cpu", kl_coef=0.1, minibatches=2)
    built = []

    def instrumented(cfg, device, dtype=torch.float32, *, progress=False):
        plain = rl.build_model(cfg)                               # the toy's sizes for this task
        model = Instrumented(cfg.n_layer, cfg.d_model, cfg.n_head, plain.block_size, vocab_size=plain.tok.num_embeddings)
        built.append(model)
        return model, model.state_dict(), 0.0

    monkeypatch.setattr(trainer, "initial_policy", instrumented)
    trainer.train(cfg, progress=False)
    log = built[0].log
    assert log.count("reference") == 1 and log.count("release") == cfg.steps, log
    rows = [x for x in log if isinstance(x, int)]
    assert rows and max(rows) == Instrumented.score_rows, rows       # 16 rows scored 3 at a time


def test_the_real_models_reference_has_no_state_for_a_checkpoint_to_keep():
    """It reloads the pretrained weights itself: a checkpoint stores nothing for it, and refuses to load
    weights into it."""
    from course_lib.lm.policy import PretrainedReference
    ref = PretrainedReference(torch.device("cpu"))
    assert ref.state_dict() == {} and ref.load_state_dict({}) is None and ref.policy is None
    with pytest.raises(ValueError, match="reloads its weights"):
        ref.load_state_dict({"w": torch.zeros(1)})


def test_the_real_models_reference_holds_its_weights_only_between_a_call_and_its_release():
    """A step scores with pi_ref, then releases it: its 135M weights leave memory until the next step that needs
    them (planted: a release that keeps them)."""
    from course_lib.lm.policy import PretrainedReference
    ref = PretrainedReference(torch.device("cpu"))
    ids = torch.ones(1, 2, dtype=torch.long)
    first = ref(ids, continuation=ids[:, :1])
    assert ref.policy is not None and not any(p.requires_grad for p in ref.policy.parameters())
    ref.release()
    assert ref.policy is None
    torch.testing.assert_close(ref(ids, continuation=ids[:, :1]), first, rtol=0, atol=0)   # reloaded, the same


class FrozenEmbeddings(TinyGPT):
    """A TinyGPT whose token and position embeddings stay as they start: its ``trainable_parameters`` leave them
    out (the way an adapter-wrapped model offers only its adapters)."""

    def trainable_parameters(self):
        return [p for name, p in self.named_parameters() if not name.startswith(("tok.", "pos."))]


def test_the_optimiser_updates_the_policys_trainable_parameters_and_no_other(monkeypatch):
    """Every parameter still requires a gradient, so an optimiser built on ``parameters()`` (planted) moves the
    embeddings too and fails here."""
    from course_lib.rl import registry
    monkeypatch.setitem(registry.POLICIES, "tiny_gpt", FrozenEmbeddings)
    cfg = rl.RunConfig(steps=2, prompts_per_step=4, group_size=4, n_layer=1, d_model=16, n_head=2, warm_steps=0,
                       warm_target=None, heldout_questions=16, eval_every=2, device="cpu", lr=1e-2, warmup_steps=1,
                       length_bonus=0.5)                         # rewards that differ within a group
    model, start, _ = rl.initial_policy(cfg, torch.device("cpu"))
    clipped, clip = [], torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda ps, *a, **kw: clip(clipped.append(list(ps)) or
                                                                                      clipped[-1], *a, **kw))
    end = rl.train(cfg, progress=False).final_state
    frozen = [n for n in start if n.startswith(("tok.", "pos."))]
    assert frozen and all(torch.equal(start[n], end[n]) for n in frozen)
    assert not torch.equal(start["head.weight"], end["head.weight"])          # the rest trained
    shapes = [p.shape for p in model.trainable_parameters()]                 # the gradient norm: theirs alone
    assert len(clipped) == cfg.steps and all([p.shape for p in ps] == shapes for ps in clipped)


def test_a_run_stores_the_fields_that_apply_to_it_and_none_of_another_plug_ins():
    toy, real = rl.make_config("smoke"), rl.make_config("real")
    toy_rec, real_rec = rl.config_record(toy), rl.config_record(real)
    toys_own = set(TinyGPT.config_fields) | {"heldout_questions"}
    assert toys_own <= set(toy_rec) and "heldout_pairs" not in toy_rec
    assert not toys_own & set(real_rec) and real_rec["heldout_pairs"] == 10
    assert set(toy_rec) - toys_own == set(real_rec) - {"heldout_pairs"}         # every shared field, in both
    assert rl.RunConfig(**real_rec) == real and rl.RunConfig(**toy_rec) == toy  # a record rebuilds its config


@pytest.mark.parametrize("size, name, value", [("real", "d_model", 128), ("real", "warm_steps", 0),
                                               ("real", "heldout_questions", 100), ("smoke", "heldout_pairs", 5)])
def test_setting_a_field_another_plug_in_reads_is_an_error_naming_it(size, name, value):
    with pytest.raises(ValueError, match=rf"{name}={value!r} is read by neither the policy"):
        rl.make_config(size, **{name: value})


def test_a_plug_in_that_reads_a_field_the_config_lacks_is_told_which(monkeypatch):
    from course_lib.rl import registry

    class Wide(TinyGPT):
        config_fields = TinyGPT.config_fields + ("n_experts",)
    monkeypatch.setitem(registry.POLICIES, "tiny_gpt", Wide)
    with pytest.raises(ValueError, match=r"policy 'tiny_gpt' reads config fields \['n_experts'\], which RunConfig"):
        rl.make_config("smoke")
