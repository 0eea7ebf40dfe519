"""Hand-computed checks of the Adamax reference (pure NumPy)."""

import numpy as np

from optbench.reference import adamax

HP = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 0.0, "weight_decay": 0.0, "maximize": False, "dtype_eps": 2.0**-52}


def test_first_step_is_lr_times_sign():
    p, g = np.array([1.0, -2.0]), np.array([0.5, -3.0])
    new, state = adamax.update(p, g, adamax.init(p, HP), HP)
    np.testing.assert_allclose(new, p - 0.01 * np.sign(g), rtol=1e-14)
    np.testing.assert_allclose(state["exp_inf"], np.abs(g), rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg"], 0.1 * g, rtol=1e-15)
    assert state["step"] == 1.0


def test_max_rule_eps_inside_and_first_moment_only_bias_correction():
    hp = {**HP, "eps": 1e-3}
    p = np.array([1.0, 1.0])
    state = adamax.init(p, hp)
    p1, state = adamax.update(p, np.array([2.0, 2.0]), state, hp)
    np.testing.assert_allclose(state["exp_inf"], [2.001, 2.001], rtol=1e-15)
    # second step: a small gradient keeps beta2 * u, a large one takes |g| + eps
    p2, state = adamax.update(p1, np.array([0.1, -5.0]), state, hp)
    u2 = np.array([0.999 * 2.001, 5.001])
    m2 = 0.9 * 0.1 * 2.0 + 0.1 * np.array([0.1, -5.0])
    np.testing.assert_allclose(state["exp_inf"], u2, rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg"], m2, rtol=1e-15)
    np.testing.assert_allclose(p2, p1 - 0.01 / (1 - 0.9**2) * m2 / u2, rtol=1e-15)


def test_maximize_weight_decay_and_odd_shapes():
    hp = {**HP, "weight_decay": 0.5, "maximize": True}
    p, g = np.array([2.0]), np.array([3.0])
    _, state = adamax.update(p, g, adamax.init(p, hp), hp)
    np.testing.assert_allclose(state["exp_avg"], [0.1 * (-3.0 + 0.5 * 2.0)], rtol=1e-15)
    for shape in [(), (0,), (0, 4)]:
        q = np.ones(shape)
        new, state = adamax.update(q, np.ones(shape), adamax.init(q, HP), HP)
        assert new.shape == shape and state["exp_inf"].shape == shape
