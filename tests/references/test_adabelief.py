"""Hand-computed checks of the AdaBelief reference (pure NumPy)."""

import math

import numpy as np

from optbench.reference import adabelief
from optbench.reference.group_step import with_group_step

HP = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-16, "weight_decay": 0.0, "weight_decouple": True,
      "fixed_decay": False, "rectify": False, "n_sma_threshold": 5, "degenerated_to_sgd": True, "ams_bound": False,
      "maximize": False, "dtype_eps": 2.0**-52}


def test_first_steps_by_hand():
    p, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -3.0, 0.0])
    hp = {**HP, "eps": 1e-8}
    new, state = adabelief.update(p, g, adabelief.init(p, hp), hp)
    # m = 0.1 g; the residual uses the new m: g - m = 0.9 g; s = 1e-3 (0.9 g)^2 + eps (eps inside s)
    np.testing.assert_allclose(state["exp_avg"], 0.1 * g, rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_var"], 1e-3 * 0.81 * g * g + 1e-8, rtol=1e-13)
    assert state["step"] == 1.0
    s_hat = state["exp_avg_var"] / (1 - 0.999)
    np.testing.assert_allclose(new, p - 0.01 * g / (np.sqrt(s_hat) + 1e-8), rtol=1e-13)
    assert new[2] == 0.5  # a zero gradient: m = 0, no step (s = eps only)
    # step 2, gradient reversed: m = 0.09 g - 0.1 g = -0.01 g, residual -g + 0.01 g = -0.99 g
    new2, state2 = adabelief.update(new, -g, state, hp)
    m2 = -0.01 * g
    s2 = 0.999 * state["exp_avg_var"] + 1e-3 * (0.99 * g) ** 2 + 1e-8
    np.testing.assert_allclose(state2["exp_avg"], m2, rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(state2["exp_avg_var"], s2, rtol=1e-13)
    expected = new - 0.01 * (m2 / (1 - 0.81)) / (np.sqrt(s2 / (1 - 0.999**2)) + 1e-8)
    np.testing.assert_allclose(new2, expected, rtol=1e-12)


def test_weight_decay_decoupled_fixed_and_l2():
    p, g = np.array([2.0, -1.0]), np.array([0.25, 0.5])
    state = adabelief.init(p, HP)
    plain, _ = adabelief.update(p, g, state, HP)
    decoupled, _ = adabelief.update(p, g, state, {**HP, "weight_decay": 0.1})
    np.testing.assert_allclose(decoupled, plain - 0.01 * 0.1 * p, rtol=1e-14)
    fixed, _ = adabelief.update(p, g, state, {**HP, "weight_decay": 0.1, "fixed_decay": True})
    np.testing.assert_allclose(fixed, plain - 0.1 * p, rtol=1e-14)
    l2, _ = adabelief.update(p, g, state, {**HP, "weight_decay": 0.1, "weight_decouple": False})
    same, _ = adabelief.update(p, g + 0.1 * p, state, HP)
    np.testing.assert_allclose(l2, same, rtol=1e-15)


def test_ams_bound_keeps_the_running_max_of_s():
    hp = {**HP, "ams_bound": True}
    p = np.array([1.0, 1.0])
    state = adabelief.init(p, hp)
    assert set(state) == {"step", "exp_avg", "exp_avg_var", "max_exp_avg_var"}
    _, state = adabelief.update(p, np.array([4.0, 1e-3]), state, hp)
    big = state["exp_avg_var"].copy()
    new, state = adabelief.update(p, np.array([0.4, 1e-4]), state, hp)  # g = m_1: a zero residual, s shrinks
    assert state["exp_avg_var"][0] < big[0] and state["max_exp_avg_var"][0] == big[0]
    np.testing.assert_array_equal(state["max_exp_avg_var"], np.maximum(big, state["exp_avg_var"]))
    denom = np.sqrt(state["max_exp_avg_var"]) / math.sqrt(1 - 0.999**2) + 1e-16
    np.testing.assert_allclose(new, p - 0.01 / (1 - 0.81) * state["exp_avg"] / denom, rtol=1e-13)


def test_rectification_sgd_first_then_rectified():
    hp = {**HP, "rectify": True}
    rho = [adabelief.rectification(t, hp)[0] for t in range(1, 8)]
    np.testing.assert_allclose(rho[0], 1.0, rtol=1e-12)  # rho_1 = 1 whatever beta2
    assert [adabelief.rectification(t, hp)[1] is None for t in range(1, 8)] == [True] * 5 + [False] * 2
    p, g = np.array([1.0, -2.0]), np.array([0.5, -0.25])
    # below the threshold: SGD with momentum, lr m_hat; without degenerated_to_sgd: no step
    sgd, state = adabelief.update(p, g, adabelief.init(p, hp), hp)
    np.testing.assert_allclose(sgd, p - 0.01 * g, rtol=1e-15)
    still, _ = adabelief.update(p, g, adabelief.init(p, hp), {**hp, "degenerated_to_sgd": False})
    np.testing.assert_array_equal(still, p)
    # at step 6 (rho_6 = 5.994): lr r_t / (1 - b1^t) m / (sqrt(s) + eps), r_t RAdam's
    state = {**state, "step": np.float64(5.0)}
    new, state6 = adabelief.update(p, g, state, hp)
    rho_inf, b2t = 2 / 0.001 - 1, 0.999**6
    rho6 = rho_inf - 12 * b2t / (1 - b2t)
    r = math.sqrt((1 - b2t) * (rho6 - 4) * (rho6 - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho6))
    expected = p - 0.01 * r / (1 - 0.9**6) * state6["exp_avg"] / (np.sqrt(state6["exp_avg_var"]) + 1e-16)
    np.testing.assert_allclose(new, expected, rtol=1e-13)


def test_group_step_uses_the_iteration():
    p, g = np.array([1.0, -1.0]), np.array([0.2, -0.4])
    hp = {**HP, "eps": 1e-8}
    counted = with_group_step(adabelief, [{"group_step": True}])  # the harness's wrapper (reference/group_step.py)
    late, late_state = counted.update(p, g, adabelief.init(p, hp), {**hp, "group_step": True, "iteration": 3})
    assert late_state["step"] == 3.0
    s = 1e-3 * (0.9 * g) ** 2 + 1e-8
    expected = p - 0.01 / (1 - 0.9**3) * 0.1 * g / (np.sqrt(s / (1 - 0.999**3)) + 1e-8)
    np.testing.assert_allclose(late, expected, rtol=1e-13)


def test_odd_shapes_maximize_and_inputs_untouched():
    for extra in ({}, {"ams_bound": True}, {"rectify": True}):
        hp = {**HP, "weight_decay": 0.1, **extra}
        for shape in [(), (0,), (0, 4), (3,)]:
            p, g = np.full(shape, 0.5), np.full(shape, 0.25)
            state = adabelief.init(p, hp)
            kept = (p.copy(), g.copy(), {k: np.copy(v) for k, v in state.items()})
            up, up_state = adabelief.update(p, g, state, {**hp, "maximize": True})
            down, down_state = adabelief.update(p, -g, state, hp)
            np.testing.assert_array_equal(up, down)
            assert all(np.array_equal(up_state[k], down_state[k]) for k in up_state)
            assert up.shape == shape
            np.testing.assert_array_equal(p, kept[0])
            np.testing.assert_array_equal(g, kept[1])
            assert all(np.array_equal(state[k], kept[2][k]) for k in state)
