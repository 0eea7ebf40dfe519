"""optbench.watch: parity of a user's real training loop through step hooks, with mutants it must catch."""

from __future__ import annotations

import logging

import pytest
import torch

import optbench
from optbench.mutants.adamw import CoupledWeightDecayAdamW, LateBugAdamW
from optbench.mutants.sgd import CorrectSGD


@pytest.fixture(autouse=True)
def watch_logger_enabled():
    """An earlier test's Hydra run (logging.config with disable_existing_loggers) may have disabled the logger."""
    logging.getLogger("optbench.watch").disabled = False


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


def test_every_parameter_is_watched_by_default_large_ones_in_full_every_large_every_steps(caplog):
    big = train(CoupledWeightDecayAdamW, max_numel=64).first_divergence  # 0.weight: 512 elements
    assert (big.step, big.fqn, big.tensor) == (1, "0.weight", "param")
    assert train(LateBugAdamW, max_numel=1, large_every=10).first_divergence.step == 21  # steps 1, 11, 21
    assert train(LateBugAdamW, max_numel=1, large_every=7).first_divergence.step == 22  # steps 1, 8, 15, 22
    caplog.clear()
    with caplog.at_level("WARNING", logger="optbench.watch"):
        found = train(LateBugAdamW).first_divergence
    assert caplog.messages == [f"optbench.watch: {found}"]  # logged when found, not only in summary()
    nothing = optbench.watch(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1))
    assert nothing.summary() == "optbench.watch: nothing checked (0 steps over 1 tensors): no verdict"


def test_steps_are_the_optimizers_own_after_a_checkpoint():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = CoupledWeightDecayAdamW(model.named_parameters(), lr=1e-2, weight_decay=0.1)
    x = torch.randn(32, 8)
    for attached in (False, True):
        watch = optbench.watch(opt) if attached else None
        for _ in range(5):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    assert watch.first_divergence.step == 6 and watch.steps_checked == 5


def test_a_wrong_optimizer_is_caught_at_its_first_wrong_step_by_name():
    found = train(CoupledWeightDecayAdamW).first_divergence
    assert (found.step, found.fqn, found.tensor) == (1, "0.weight", "param") and found.err_eps > found.tol_eps
    late = train(LateBugAdamW).first_divergence  # wrong from step 21 only
    assert late.step == 21
    with pytest.raises(optbench.Divergence, match="step 1: 0.weight"):
        train(CoupledWeightDecayAdamW, strict=True)


def test_sampling_every_and_remove_bound_the_cost(caplog):
    with caplog.at_level("WARNING", logger="optbench.watch"):
        watch = train(torch.optim.AdamW, steps=10, every=3, max_tensors=2)
    assert watch.steps_checked == 4 and len(watch.watched) == 2  # steps 1, 4, 7, 10
    left = [n for n in ("0.weight", "0.bias", "2.weight", "2.bias") if n not in watch.watched]
    assert caplog.messages == [f"optbench.watch: max_tensors=2 leaves 2 of 4 parameters unwatched ({', '.join(left)})"]
    watch.remove()
    assert not watch.optimizer._optimizer_step_pre_hooks and not watch.optimizer._optimizer_step_post_hooks
    with pytest.raises(ValueError, match="closure-driven"):
        optbench.watch(torch.optim.LBFGS([torch.nn.Parameter(torch.zeros(2))]))


class SplitBetasLion(torch.optim.Optimizer):
    """A third-party Lion that spells its betas beta1, beta2 (not a torch.optim class, no torch subclass)."""

    def __init__(self, params, lr=1e-4, beta1=0.9, beta2=0.99, weight_decay=0.0):
        super().__init__(params, {"lr": lr, "beta1": beta1, "beta2": beta2, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.add_(m.lerp(p.grad, 1 - group["beta1"]).sign_(), alpha=-group["lr"])
                    m.lerp_(p.grad, 1 - group["beta2"])


@pytest.mark.slow  # (slow tier; CI keeps watch's other cases)
def test_a_third_party_class_gets_no_guessed_reference_and_names_its_own():
    from tests.byo.lion import Lion, LionWithoutDecoupledDecay

    model = torch.nn.Linear(4, 2)
    for cls in (Lion, SplitBetasLion):  # named like no torch class, or subclassing only torch.optim.Optimizer
        with pytest.raises(ValueError, match=r"is not a torch.optim optimizer .* pass reference="):
            optbench.watch(cls(model.named_parameters()))
    with pytest.raises(ValueError, match="reference 'no_such_module' cannot be loaded"):
        optbench.watch(Lion(model.named_parameters()), reference="no_such_module")
    # the reference's options spelled otherwise: one line at watch(), not a KeyError inside step()
    with pytest.raises(ValueError, match=r"needs option 'betas', which param group 0 does not hold \(it holds lr, "
                                         r"beta1, beta2, weight_decay\): pass hparams="):
        optbench.watch(SplitBetasLion(model.named_parameters()), reference="tests.byo.lion_reference")

    def betas(group):
        return {"lr": group["lr"], "betas": (group["beta1"], group["beta2"]), "weight_decay": group["weight_decay"]}

    def lion_run(cls, **options):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        opt = cls(net.named_parameters(), lr=1e-3, weight_decay=0.1)
        w = optbench.watch(opt, reference="tests.byo.lion_reference", **options)
        x, y = torch.randn(256, 16), torch.randn(256, 4)
        for _ in range(10):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        return w

    assert lion_run(Lion).first_divergence is None
    assert lion_run(SplitBetasLion, hparams=betas).first_divergence is None
    wrong = lion_run(LionWithoutDecoupledDecay).first_divergence
    assert wrong is not None and wrong.step == 1


def test_a_step_that_raises_does_not_stop_the_watch():
    class FlakyAdamW(torch.optim.AdamW):
        calls = 0

        def step(self, closure=None):
            FlakyAdamW.calls += 1
            if FlakyAdamW.calls == 2:
                raise RuntimeError("flaky")
            return super().step(closure)  # nested in torch's hooks: only the outer step is counted

    model = torch.nn.Linear(4, 2)
    opt = FlakyAdamW(model.named_parameters())
    w = optbench.watch(opt)
    for _ in range(4):
        model(torch.randn(8, 4)).sum().backward()
        try:
            opt.step()
        except RuntimeError:
            pass
    assert w.steps_checked == 3 and w.first_divergence is None


REPO_SPEC = "tests/thirdparty/other_adam.yaml"


def train_other_adam(steps=8, **watch_options):
    from tests.thirdparty.other_adam import OtherAdam

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    opt = OtherAdam(model.named_parameters(), lr=1e-2, wd=0.1)
    watch = optbench.watch(opt, **watch_options)
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return watch


def test_a_candidate_spec_reads_a_third_party_class_as_the_reference(monkeypatch):
    """The spec ``candidate=`` takes (wd spelled for weight_decay, nested moments, its own step key) makes its
    steps the adam reference's; without it, its L2 decay goes unread and the watch says the step departs."""
    from pathlib import Path

    from optbench.adapters.spec import load_spec_file

    monkeypatch.chdir(Path(__file__).parents[1])
    for adapter in (REPO_SPEC, load_spec_file(Path(REPO_SPEC))):
        watch = train_other_adam(reference="adam", adapter=adapter)
        assert watch.steps_checked == 8 and watch.first_divergence is None, watch.summary()
    assert train_other_adam(reference="adam", hparams={"weight_decay": 0.0}).first_divergence is not None


def test_a_class_a_suite_adapts_is_watched_with_that_adapter_and_unmodelled_options_are_named(caplog):
    """pytorch-optimizer's Lion needs no reference=: suite lion's candidates adapt it. An option it sets other than
    its default that the reference never reads (cautious, use_gc) is named at attach; its defaults, and torch's own
    AdamW (whose group holds decoupled_weight_decay), are not."""
    po = pytest.importorskip("pytorch_optimizer")
    model = torch.nn.Linear(8, 4)
    with caplog.at_level(logging.WARNING, logger="optbench.watch"):
        plain = optbench.watch(po.Lion(model.parameters(), lr=1e-3, weight_decay=0.1))
        optbench.watch(torch.optim.AdamW(model.parameters(), lr=1e-3))
    assert plain.reference.__name__.endswith(".lion") and not caplog.records
    with caplog.at_level(logging.WARNING, logger="optbench.watch"):
        optbench.watch(po.Lion(model.parameters(), lr=1e-3, cautious=True, use_gc=True))
    assert len(caplog.records) == 1 and "cautious=True, use_gc=True" in caplog.records[0].getMessage()
    for _ in range(4):
        model(torch.randn(3, 8)).sum().backward()
        plain.optimizer.step()
        plain.optimizer.zero_grad()
    assert plain.steps_checked == 4 and plain.first_divergence is None, plain.summary()
