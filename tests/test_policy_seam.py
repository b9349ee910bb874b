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
    from course_lib.rl.config import ToyConfig
    cfg = ToyConfig(steps=2, prompts_per_step=4, group_size=4, n_layer=1, d_model=16, n_head=2, warm_steps=0,
                    warm_target=None, n_heldout=16, eval_every=2, device="cpu", kl_coef=0.1, minibatches=2)
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
