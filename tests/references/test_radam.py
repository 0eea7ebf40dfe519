"""Hand-computed checks of the RAdam reference (pure NumPy)."""

import numpy as np

from optbench.reference import radam

HP = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 0.0, "weight_decay": 0.0, "decoupled_weight_decay": False,
      "maximize": False, "dtype_eps": 2.0**-52}


def test_steps_1_to_5_unrectified_step_6_rectified():
    # Constant g: m_t = (1 - beta1**t) g, so the bias-corrected momentum is exactly g and v_t = (1 - beta2**t) g**2.
    # rho_5 = 4.996 <= 5: steps 1-5 move by lr * g; rho_6 = 5.994 > 5: step 6 moves by lr * r_6 * sign(g) (eps = 0).
    p0, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -3.0, 1e-4])
    p, state = p0, radam.init(p0, HP)
    for _ in range(5):
        p, state = radam.update(p, g, state, HP)
    np.testing.assert_allclose(p, p0 - 5 * 0.01 * g, rtol=1e-14)
    np.testing.assert_allclose(state["exp_avg_sq"], (1 - 0.999**5) * g * g, rtol=1e-12)  # updated all along
    rho_inf = 2 / 0.001 - 1
    rho_6 = rho_inf - 2 * 6 * 0.999**6 / (1 - 0.999**6)
    r_6 = np.sqrt((rho_6 - 4) * (rho_6 - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_6))
    assert 5.99 < rho_6 < 6.0 and 0.0 < r_6 < 0.1
    p6, state = radam.update(p, g, state, HP)
    np.testing.assert_allclose(p6, p - 0.01 * r_6 * np.sign(g), rtol=1e-12)
    assert state["step"] == 6.0


def test_decoupled_versus_l2_weight_decay():
    p, zero = np.array([2.0, -4.0]), np.zeros(2)
    hp = {**HP, "weight_decay": 0.1, "decoupled_weight_decay": True}
    new, state = radam.update(p, zero, radam.init(p, hp), hp)
    np.testing.assert_allclose(new, p * (1 - 0.01 * 0.1), rtol=1e-15)
    assert not state["exp_avg"].any() and not state["exp_avg_sq"].any()
    new, state = radam.update(p, zero, radam.init(p, hp), {**hp, "decoupled_weight_decay": False})
    np.testing.assert_allclose(state["exp_avg"], 0.1 * 0.1 * p, rtol=1e-15)  # g = 0.1 p enters the moments
    np.testing.assert_allclose(state["exp_avg_sq"], 0.001 * (0.1 * p) ** 2, rtol=1e-12)


def test_maximize_and_odd_shapes_through_both_branches():
    for shape in [(), (0,), (0, 3), (2, 2)]:
        p = np.full(shape, 0.7)
        ps, pm = p, p
        ss, sm = radam.init(p, HP), radam.init(p, HP)
        for t in range(8):
            g = np.full(shape, (-1.0) ** t * (t + 1.0))
            ps, ss = radam.update(ps, g, ss, {**HP, "eps": 1e-8})
            pm, sm = radam.update(pm, -g, sm, {**HP, "eps": 1e-8, "maximize": True})
        assert np.shape(ps) == shape and ss["exp_avg_sq"].shape == shape
        np.testing.assert_array_equal(ps, pm)
        assert np.all(np.isfinite(ps))


def test_no_step_before_the_threshold_without_degenerating_to_sgd():
    # degenerated_to_sgd=False: steps 1-5 (rho_t <= 5) leave the parameter where it was, decoupled decay included,
    # while the moments update; step 6 takes the rectified step from the moments of all six gradients.
    p0, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -3.0, 1e-4])
    hp = {**HP, "degenerated_to_sgd": False, "weight_decay": 0.1, "decoupled_weight_decay": True}
    p, state = p0, radam.init(p0, hp)
    for _ in range(5):
        p, state = radam.update(p, g, state, hp)
    assert np.array_equal(p, p0)
    np.testing.assert_allclose(state["exp_avg"], (1 - 0.9**5) * g, rtol=1e-14)
    p6, _ = radam.update(p, g, state, hp)
    stepped, _ = radam.update(p, g, state, {**hp, "degenerated_to_sgd": True})
    assert np.array_equal(p6, stepped) and not np.array_equal(p6, p0)  # the rectified branch is the same either way
