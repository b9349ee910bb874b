"""The trainer's seam on the policy side (``rl.policy.Policy``): every hook the trainer calls is declared there with
its default, the policies subclass it, and a policy that leaves out what has no default is told which."""
import pytest
import torch

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
