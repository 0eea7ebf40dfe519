"""optbench.watch: parity of a user's real training loop through step hooks, with mutants it must catch."""

from __future__ import annotations

import pytest
import torch

import optbench
from optbench.mutants.adamw import CoupledWeightDecayAdamW, LateBugAdamW
from optbench.mutants.sgd import CorrectSGD


def train(optimizer_class, steps=25, dtype=torch.float32, **watch_options):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dtype)
    options = {"momentum": 0.9} if issubclass(optimizer_class, torch.optim.SGD) else {}
    opt = optimizer_class(model.named_parameters(), lr=1e-2, weight_decay=0.1, **options)
    watch = optbench.watch(opt, **watch_options)
    x, y = torch.randn(256, 16, dtype=dtype), torch.randn(256, 4, dtype=dtype)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return watch


@pytest.mark.parametrize("cls, dtype", [(torch.optim.AdamW, torch.float32), (torch.optim.AdamW, torch.bfloat16),
                                        (torch.optim.SGD, torch.float32), (CorrectSGD, torch.float32),
                                        (torch.optim.Adafactor, torch.float32)])
def test_a_correct_optimizer_trains_without_divergence(cls, dtype):
    watch = train(cls, dtype=dtype)
    assert watch.first_divergence is None, watch.summary()
    assert watch.steps_checked == 25 and set(watch.watched) == {"0.weight", "0.bias", "2.weight", "2.bias"}


def test_a_wrong_optimizer_is_caught_at_its_first_wrong_step_by_name():
    found = train(CoupledWeightDecayAdamW).first_divergence
    assert (found.step, found.fqn, found.tensor) == (1, "0.weight", "param") and found.err_eps > found.tol_eps
    late = train(LateBugAdamW).first_divergence  # wrong from step 21 only
    assert late.step == 21
    with pytest.raises(optbench.Divergence, match="step 1: 0.weight"):
        train(CoupledWeightDecayAdamW, strict=True)


def test_sampling_every_and_remove_bound_the_cost():
    watch = train(torch.optim.AdamW, steps=10, every=3, max_tensors=2, max_numel=64)
    assert watch.steps_checked == 4 and len(watch.watched) == 2  # steps 1, 4, 7, 10; tensors of <= 64 elements
    assert all(p.numel() <= 64 for p in watch.watched.values())
    watch.remove()
    assert not watch.optimizer._optimizer_step_pre_hooks and not watch.optimizer._optimizer_step_post_hooks
    with pytest.raises(ValueError, match="closure-driven"):
        optbench.watch(torch.optim.LBFGS([torch.nn.Parameter(torch.zeros(2))]))
