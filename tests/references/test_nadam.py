"""Hand-computed checks of the NAdam reference (pure NumPy)."""

import numpy as np

from optbench.reference import nadam

HP = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 0.0, "weight_decay": 0.0, "momentum_decay": 4e-3,
      "decoupled_weight_decay": False, "maximize": False, "dtype_eps": 2.0**-52}


def mu(t, beta1=0.9, psi=4e-3):
    return beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))


def test_first_step_by_hand():
    # Step 1 with eps = 0: m = 0.1 g, sqrt(v / (1 - beta2)) = |g|, so the step is
    # lr * sign(g) * [(1 - mu1) / (1 - mu1) + mu2 * 0.1 / (1 - mu1 * mu2)].
    p, g = np.array([1.0, -2.0]), np.array([0.5, -3.0])
    new, state = nadam.update(p, g, nadam.init(p, HP), HP)
    factor = 1.0 + mu(2) * 0.1 / (1.0 - mu(1) * mu(2))
    np.testing.assert_allclose(new, p - 0.01 * np.sign(g) * factor, rtol=1e-14)
    assert state["step"] == 1.0
    np.testing.assert_allclose(state["mu_product"], mu(1), rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg"], 0.1 * g, rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq"], 0.001 * g * g, rtol=1e-12)


def test_mu_product_accumulates_and_odd_shapes():
    for shape in [(), (0,), (0, 4), (3,)]:
        p = np.ones(shape)
        state = nadam.init(p, HP)
        for _ in range(3):
            p, state = nadam.update(p, np.full(shape, 0.5), state, HP)
        assert p.shape == shape and state["exp_avg"].shape == shape
        np.testing.assert_allclose(state["mu_product"], mu(1) * mu(2) * mu(3), rtol=1e-14)
        assert state["step"] == 3.0


def test_decoupled_versus_l2_weight_decay():
    p, zero = np.array([2.0, -4.0]), np.zeros(2)
    hp = {**HP, "weight_decay": 0.1, "decoupled_weight_decay": True, "eps": 1e-8}
    new, state = nadam.update(p, zero, nadam.init(p, hp), hp)
    np.testing.assert_allclose(new, p * (1.0 - 0.01 * 0.1), rtol=1e-15)  # moments stay 0: pure shrink
    assert not state["exp_avg"].any()
    hp = {**hp, "decoupled_weight_decay": False, "eps": 0.0}
    new, state = nadam.update(p, zero, nadam.init(p, hp), hp)  # L2: g = 0.1 p, a full NAdam step
    np.testing.assert_allclose(state["exp_avg"], 0.1 * 0.1 * p, rtol=1e-15)
    factor = 1.0 + mu(2) * 0.1 / (1.0 - mu(1) * mu(2))
    np.testing.assert_allclose(new, p - 0.01 * np.sign(p) * factor, rtol=1e-14)


def test_maximize_is_minimizing_the_negated_gradient():
    p, g = np.array([0.3, -1.5, 2.0]), np.array([1e-3, 2.0, -0.7])
    hp = {**HP, "weight_decay": 0.1, "eps": 1e-8}
    up, sp = nadam.update(p, g, nadam.init(p, hp), {**hp, "maximize": True})
    um, sm = nadam.update(p, -g, nadam.init(p, hp), hp)
    np.testing.assert_array_equal(up, um)
    np.testing.assert_array_equal(sp["exp_avg"], sm["exp_avg"])
    assert not np.array_equal(up, nadam.update(p, g, nadam.init(p, hp), hp)[0])
