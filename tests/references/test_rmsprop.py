"""Hand-computed checks of the RMSprop reference (pure NumPy)."""

from fractions import Fraction

import numpy as np

from optbench.reference import rmsprop

HP = {"lr": 0.01, "alpha": 0.9, "eps": 0.0, "weight_decay": 0.0, "momentum": 0.0, "centered": False,
      "maximize": False, "dtype_eps": 2.0**-52}


def test_first_step_and_state_keys():
    p, g = np.array([1.0, -2.0]), np.array([0.5, -3.0])
    state = rmsprop.init(p, HP)
    assert set(state) == {"step", "square_avg"}
    new, state = rmsprop.update(p, g, state, HP)
    np.testing.assert_allclose(state["square_avg"], 0.1 * g * g, rtol=1e-15)
    np.testing.assert_allclose(new, p - 0.01 * np.sign(g) / np.sqrt(0.1), rtol=1e-15)
    assert state["step"] == 1.0
    assert set(rmsprop.init(p, {**HP, "momentum": 0.5, "centered": True})) == {"step", "square_avg", "momentum_buffer",
                                                                                 "grad_avg"}


def test_centered_momentum_two_steps_eps_outside_sqrt():
    hp = {**HP, "centered": True, "momentum": 0.5, "eps": 0.25}
    p = np.array([1.0])
    p1, state = rmsprop.update(p, np.array([2.0]), rmsprop.init(p, hp), hp)
    v1, a1 = 0.1 * 4.0, 0.1 * 2.0
    b1 = 2.0 / (np.sqrt(v1 - a1 * a1) + 0.25)
    np.testing.assert_allclose(state["grad_avg"], [a1], rtol=1e-15)
    np.testing.assert_allclose(state["momentum_buffer"], [b1], rtol=1e-15)
    np.testing.assert_allclose(p1, [1.0 - 0.01 * b1], rtol=1e-15)
    p2, state = rmsprop.update(p1, np.array([-1.0]), state, hp)
    v2, a2 = 0.9 * v1 + 0.1, 0.9 * a1 - 0.1
    b2 = 0.5 * b1 - 1.0 / (np.sqrt(v2 - a2 * a2) + 0.25)
    np.testing.assert_allclose(state["square_avg"], [v2], rtol=1e-15)
    np.testing.assert_allclose(state["momentum_buffer"], [b2], rtol=1e-15)
    np.testing.assert_allclose(p2, p1 - 0.01 * b2, rtol=1e-15)


def test_weight_decay_maximize_and_odd_shapes():
    hp = {**HP, "weight_decay": 0.5, "maximize": True}
    p, g = np.array([2.0]), np.array([3.0])
    _, state = rmsprop.update(p, g, rmsprop.init(p, hp), hp)
    np.testing.assert_allclose(state["square_avg"], [0.1 * (-3.0 + 1.0) ** 2], rtol=1e-15)
    for shape in [(), (0,), (0, 4)]:
        q = np.ones(shape)
        new, state = rmsprop.update(q, np.ones(shape), rmsprop.init(q, hp), hp)
        assert np.shape(new) == shape and state["square_avg"].shape == shape


def test_weight_decay_sum_is_rounded_once():
    # grad + wd * param cancels: with two roundings -0.03 + 0.1 * 0.3 == 0.0 in float64, while the exact
    # value of the float64 operands is 1.67e-18; the reference rounds once, as torch's fused add does.
    hp = {**HP, "weight_decay": 0.1, "eps": 1.0}
    p, g = np.array([0.3]), np.array([-0.03])
    _, state = rmsprop.update(p, g, rmsprop.init(p, hp), hp)
    true_g = float(Fraction(-0.03) + Fraction(0.1) * Fraction(0.3))
    assert true_g != 0.0
    np.testing.assert_allclose(state["square_avg"], [0.1 * true_g * true_g], rtol=1e-15)
