"""Hand-computed checks of the AdEMAMix reference (pure NumPy)."""

import math

import numpy as np

from optbench.reference import ademamix
from optbench.reference.group_step import with_group_step

HP = {"lr": 0.01, "betas": (0.9, 0.999, 0.9999), "alpha": 5.0, "t_alpha_beta3": None, "eps": 1e-8,
      "weight_decay": 0.0, "weight_decouple": True, "fixed_decay": False, "maximize": False, "dtype_eps": 2.0**-52}


def test_first_steps_by_hand():
    p, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -3.0, 0.0])
    new, state = ademamix.update(p, g, ademamix.init(p, HP), HP)
    # m1 = 0.1 g (m1_hat = g), m2 = 1e-4 g (no bias correction), nu = 1e-3 g^2 (nu_hat = g^2)
    np.testing.assert_allclose(state["exp_avg"], 0.1 * g, rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_slow"], 1e-4 * g, rtol=1e-12)
    np.testing.assert_allclose(state["exp_avg_sq"], 1e-3 * g * g, rtol=1e-12)
    assert state["step"] == 1.0
    expected = p - 0.01 * (g + 5.0 * 1e-4 * g) / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(new, expected, rtol=1e-12)
    assert new[2] == 0.5  # a zero gradient: no step
    # step 2 with the same gradient: m1_hat = g and nu_hat = g^2 again; m2 = (1 - 0.9999^2) g
    new2, state2 = ademamix.update(new, g, state, HP)
    expected2 = new - 0.01 * (g + 5.0 * (1 - 0.9999**2) * g) / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(new2, expected2, rtol=1e-11)
    assert state2["step"] == 2.0


def test_weight_decay_decoupled_fixed_and_l2():
    p, g = np.array([2.0, -1.0]), np.array([0.25, 0.5])
    state = ademamix.init(p, HP)
    plain, _ = ademamix.update(p, g, state, HP)
    decoupled, _ = ademamix.update(p, g, state, {**HP, "weight_decay": 0.1})
    np.testing.assert_allclose(decoupled, plain - 0.01 * 0.1 * p, rtol=1e-14)  # theta - lr (u + wd theta)
    fixed, _ = ademamix.update(p, g, state, {**HP, "weight_decay": 0.1, "fixed_decay": True})
    np.testing.assert_allclose(fixed, plain - 0.1 * p, rtol=1e-14)
    l2, l2_state = ademamix.update(p, g, state, {**HP, "weight_decay": 0.1, "weight_decouple": False})
    np.testing.assert_allclose(l2_state["exp_avg"], 0.1 * (g + 0.1 * p), rtol=1e-15)  # the moments see g + wd p
    same, _ = ademamix.update(p, g + 0.1 * p, state, HP)
    np.testing.assert_allclose(l2, same, rtol=1e-15)


def test_schedulers_follow_the_paper():
    hp = {**HP, "t_alpha_beta3": 10}
    assert ademamix.schedule_alpha(0, hp) == 0.0
    assert math.isclose(ademamix.schedule_alpha(3, hp), 1.5)
    assert ademamix.schedule_alpha(10, hp) == ademamix.schedule_alpha(25, hp) == 5.0
    assert math.isclose(ademamix.schedule_beta3(0, hp), 0.9, rel_tol=1e-15)  # starts at beta1
    assert math.isclose(ademamix.schedule_beta3(10, hp), 0.9999, rel_tol=1e-15)
    assert ademamix.schedule_beta3(40, hp) == 0.9999  # capped at beta3 after the warmup
    # linear in the half-life: 1 / ln beta3(t) interpolates 1 / ln beta1 and 1 / ln beta3
    for t in (1, 4, 7):
        a = t / 10
        inv = (1 - a) / math.log(0.9) + a / math.log(0.9999)
        assert math.isclose(1 / math.log(ademamix.schedule_beta3(t, hp)), inv, rel_tol=1e-12)
    assert ademamix.schedule_alpha(3, HP) == 5.0 and ademamix.schedule_beta3(3, HP) == 0.9999  # no warmup
    zero = {**HP, "t_alpha_beta3": 0}  # a warmup of 0 steps: none (both schedulers' limit as T -> 0)
    assert ademamix.schedule_alpha(1, zero) == 5.0 and ademamix.schedule_beta3(1, zero) == 0.9999
    hp_limit = {**HP, "t_alpha_beta3": 1e-9}
    assert math.isclose(ademamix.schedule_beta3(1, hp_limit), 0.9999, rel_tol=1e-12)


def test_warmed_up_first_step_and_group_step():
    p, g = np.array([1.0, -1.0]), np.array([0.2, -0.4])
    hp = {**HP, "t_alpha_beta3": 4}
    new, state = ademamix.update(p, g, ademamix.init(p, hp), hp)
    beta3 = ademamix.schedule_beta3(1, hp)
    np.testing.assert_allclose(state["exp_avg_slow"], (1 - beta3) * g, rtol=1e-14)
    np.testing.assert_allclose(new, p - 0.01 * (g + 1.25 * (1 - beta3) * g) / (np.abs(g) + 1e-8), rtol=1e-13)
    # group_step: t is the group's count of step() calls (iteration), not this tensor's own count
    counted = with_group_step(ademamix, [{"group_step": True}])  # the harness's wrapper (reference/group_step.py)
    late, late_state = counted.update(p, g, ademamix.init(p, hp), {**hp, "group_step": True, "iteration": 3})
    assert late_state["step"] == 3.0
    bc1, bc2 = 1 - 0.9**3, 1 - 0.999**3
    m2 = (1 - ademamix.schedule_beta3(3, hp)) * g
    expected = p - 0.01 * (0.1 * g / bc1 + 3.75 * m2) / (np.sqrt(1e-3 * g * g / bc2) + 1e-8)
    np.testing.assert_allclose(late, expected, rtol=1e-13)
    own, _ = ademamix.update(p, g, ademamix.init(p, hp), {**hp, "iteration": 3})  # without group_step: its own
    np.testing.assert_array_equal(own, new)


def test_odd_shapes_maximize_and_inputs_untouched():
    hp = {**HP, "weight_decay": 0.1, "t_alpha_beta3": 5}
    for shape in [(), (0,), (0, 4), (3,)]:
        p, g = np.full(shape, 0.5), np.full(shape, 0.25)
        state = ademamix.init(p, hp)
        kept = (p.copy(), g.copy(), {k: np.copy(v) for k, v in state.items()})
        up, up_state = ademamix.update(p, g, state, {**hp, "maximize": True})
        down, down_state = ademamix.update(p, -g, state, hp)
        np.testing.assert_array_equal(up, down)
        assert all(np.array_equal(up_state[k], down_state[k]) for k in up_state)
        assert up.shape == shape
        np.testing.assert_array_equal(p, kept[0])
        np.testing.assert_array_equal(g, kept[1])
        assert all(np.array_equal(state[k], kept[2][k]) for k in state)
