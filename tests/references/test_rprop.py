"""Hand-computed checks of the Rprop reference (pure NumPy)."""

import numpy as np

from optbench.reference import rprop

HP = {"lr": 0.1, "etas": (0.5, 1.2), "step_sizes": (0.01, 0.13), "maximize": False, "dtype_eps": 2.0**-52}


def test_sign_rules_over_three_steps():
    p = np.zeros(4)
    state = rprop.init(p, HP)
    # step 1: prev = 0 everywhere -> step sizes unchanged, move by lr * sign(g); a zero gradient does not move
    p1, state = rprop.update(p, np.array([1.0, 1.0, -2.0, 0.0]), state, HP)
    np.testing.assert_array_equal(p1, [-0.1, -0.1, 0.1, 0.0])
    np.testing.assert_array_equal(state["step_size"], [0.1] * 4)
    # step 2: same sign grows (clamped at 0.13), flip shrinks and zeroes g (no move, prev = 0), zero stays
    p2, state = rprop.update(p1, np.array([3.0, -1.0, -1.0, 5.0]), state, HP)
    np.testing.assert_allclose(state["step_size"], [0.12, 0.05, 0.12, 0.1], rtol=1e-15)
    np.testing.assert_array_equal(state["prev"], [3.0, 0.0, -1.0, 5.0])
    np.testing.assert_allclose(p2, [-0.22, -0.1, 0.22, -0.1], rtol=1e-15)
    # step 3: after a flip prev is 0, so the next step keeps the step size (no second shrink); clamps bind
    p3, state = rprop.update(p2, np.array([1.0, 1.0, 1.0, 1.0]), state, HP)
    np.testing.assert_allclose(state["step_size"], [0.13, 0.05, 0.06, 0.12], rtol=1e-15)
    np.testing.assert_array_equal(state["prev"], [1.0, 1.0, 0.0, 1.0])
    np.testing.assert_allclose(p3, p2 - np.array([0.13, 0.05, 0.0, 0.12]), rtol=1e-15)
    _, state = rprop.update(p3, np.array([-1.0, -1.0, 1.0, 1.0]), {**state, "step_size": np.full(4, 0.011)}, HP)
    np.testing.assert_allclose(state["step_size"], [0.01, 0.01, 0.011, 0.0132], rtol=1e-15)


def test_maximize_flips_direction_and_prev():
    hp = {**HP, "maximize": True}
    p = np.array([1.0])
    p1, state = rprop.update(p, np.array([2.0]), rprop.init(p, hp), hp)
    np.testing.assert_array_equal(p1, [1.1])
    np.testing.assert_array_equal(state["prev"], [-2.0])
    _, state = rprop.update(p1, np.array([3.0]), state, hp)
    np.testing.assert_allclose(state["step_size"], [0.12], rtol=1e-15)


def test_tiny_gradients_and_odd_shapes():
    p = np.array([0.0])
    _, state = rprop.update(p, np.array([1e-200]), rprop.init(p, HP), HP)
    _, state = rprop.update(p, np.array([1e-200]), state, HP)  # the product underflows, the signs agree
    np.testing.assert_allclose(state["step_size"], [0.12], rtol=1e-15)
    for shape in [(), (0,), (0, 4)]:
        q = np.ones(shape)
        new, state = rprop.update(q, np.ones(shape), rprop.init(q, HP), HP)
        assert np.shape(new) == shape and state["step_size"].shape == shape and state["prev"].shape == shape
