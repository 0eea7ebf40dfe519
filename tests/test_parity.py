"""Parity engine: error metric, determinism, and torch's own implementations passing it."""

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module

from optbench.kernels import torch_implementations
from optbench.kernels.torch_variants import optimizer_class
from optbench.parity import cross_error, err_eps, run_parity, snapshot, tolerance_eps
from optbench.suite import DTYPES, Suite
from optbench.workload import generate

CPU = torch.device("cpu")


def suite(name: str) -> Suite:
    with initialize_config_module(config_module="optbench.suites", version_base="1.3"):
        return Suite.from_config(compose(config_name="config", overrides=[f"suite={name}"]).suite)


def test_err_eps_units_and_non_finite():
    eps = 2.0**-52
    assert err_eps(np.array([1.0 + 4 * eps]), np.array([1.0]), eps) == pytest.approx(4.0)
    assert err_eps(np.array([np.nan]), np.array([np.nan]), eps) == 0.0
    assert err_eps(np.array([np.nan, 1.0]), np.array([1.0, 1.0]), eps) == float("inf")
    assert err_eps(np.zeros(2), np.zeros(3), eps) == float("inf")
    assert err_eps(np.array([0.5 + eps]), np.array([0.5]), eps, scale=1.0) == pytest.approx(1.0)


def test_workload_is_deterministic_and_varied():
    a, b = generate(seed=3, steps=4), generate(seed=3, steps=4)
    for step_a, step_b in zip(a.grads, b.grads):
        assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(step_a.values(), step_b.values()))
    scales = [np.abs(g).max() for s in a.grads for g in s.values() if g is not None and g.size]
    assert max(scales) / min(scales) > 1e6  # gradient scales span many orders of magnitude
    kinds = {s.kind for s in a.specs}
    assert {"frozen", "noncontiguous", "sometimes_none"} <= kinds
    assert a.specs[-1].numel == 0 and any(s.shape == () for s in a.specs)
    p = a.materialize(torch.float32, CPU)
    assert not p["adapter.lora_b.weight"].is_contiguous()


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd", "sparseadam", "adafactor"])
def test_torch_for_loop_passes_against_reference(name):
    s = suite(name)
    wl = generate(seed=0, steps=12, sparse=s.sparse).restricted(lambda n: n not in {k.fqn for k in s.known_failures})
    impl = torch_implementations(optimizer_class(s.optimizer))["for-loop"]
    compared = set()
    for dtype in ("float64", "float32"):
        for hset in s.hparams:
            errors = run_parity(impl, s, hset, wl, DTYPES[dtype], CPU).errors
            assert (errors.err_eps <= tolerance_eps(errors.step)).all(), (dtype, hset.name, errors.err_eps.max())
            compared |= set(errors.tensor)
    assert compared > {"param"}  # state is compared, not only params


def test_state_in_float32_fails_at_float64():
    """An implementation that rounds one state tensor to float32 is far outside float64 tolerance."""

    class Float32State(torch.optim.Adam):
        def step(self, closure=None):
            out = super().step(closure)
            for st in self.state.values():
                st["exp_avg_sq"].copy_(st["exp_avg_sq"].float())
            return out

    from optbench.kernels.implementation import Implementation

    s = suite("adam")
    errors = run_parity(Implementation("f32", Float32State), s, s.hparams[0], generate(seed=0, steps=3), torch.float64, CPU).errors
    assert errors.err_eps.max() > 1e6


def test_snapshots_are_copies_so_cross_checks_see_every_step():
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=0.1)
    snap = snapshot(opt, {"w": p})
    with torch.no_grad():
        p.add_(1.0)
    assert np.array_equal(snap[("w", "param")], np.ones(3))
    assert cross_error([snap], [snapshot(opt, {"w": p})], 2.0**-52) > 1e10


def test_materialized_params_never_alias_the_workload():
    wl = generate(seed=0, steps=1)
    before = wl.init["embed.weight"].copy()
    with torch.no_grad():
        wl.materialize(torch.float64, CPU)["embed.weight"].add_(1.0)
    assert np.array_equal(wl.init["embed.weight"], before)
