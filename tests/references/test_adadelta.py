"""Hand-computed checks of the Adadelta reference (pure NumPy)."""

import numpy as np

from optbench.reference import adadelta

HP = {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": 0.0, "maximize": False, "dtype_eps": 2.0**-52}


def test_two_steps_by_hand():
    p = np.array([1.0])
    state = adadelta.init(p, HP)
    p1, state = adadelta.update(p, np.array([2.0]), state, HP)
    v1 = 0.1 * 4.0
    d1 = np.sqrt(1e-6) / np.sqrt(v1 + 1e-6) * 2.0  # acc_delta starts at 0: sqrt(0 + eps) on top
    np.testing.assert_allclose(state["square_avg"], [v1], rtol=1e-15)
    np.testing.assert_allclose(state["acc_delta"], [0.1 * d1 * d1], rtol=1e-15)
    np.testing.assert_allclose(p1, [1.0 - d1], rtol=1e-15)
    p2, state = adadelta.update(p1, np.array([-3.0]), state, HP)
    v2 = 0.9 * v1 + 0.1 * 9.0
    d2 = np.sqrt(0.1 * d1 * d1 + 1e-6) / np.sqrt(v2 + 1e-6) * -3.0  # the previous step's acc_delta
    np.testing.assert_allclose(state["square_avg"], [v2], rtol=1e-15)
    np.testing.assert_allclose(state["acc_delta"], [0.9 * 0.1 * d1 * d1 + 0.1 * d2 * d2], rtol=1e-14)
    np.testing.assert_allclose(p2, [p1[0] - d2], rtol=1e-15)
    assert state["step"] == 2.0


def test_lr_scales_only_the_applied_step():
    p, g = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    full, s_full = adadelta.update(p, g, adadelta.init(p, HP), HP)
    tenth, s_tenth = adadelta.update(p, g, adadelta.init(p, HP), {**HP, "lr": 0.1})
    np.testing.assert_allclose(tenth - p, 0.1 * (full - p), rtol=1e-11)
    np.testing.assert_array_equal(s_tenth["acc_delta"], s_full["acc_delta"])


def test_maximize_weight_decay_and_odd_shapes():
    hp = {**HP, "weight_decay": 0.5, "maximize": True}
    p, g = np.array([2.0]), np.array([3.0])
    _, state = adadelta.update(p, g, adadelta.init(p, hp), hp)
    np.testing.assert_allclose(state["square_avg"], [0.1 * (-3.0 + 0.5 * 2.0) ** 2], rtol=1e-15)
    for shape in [(), (0,), (0, 4)]:
        q = np.ones(shape)
        new, state = adadelta.update(q, np.ones(shape), adadelta.init(q, HP), HP)
        assert new.shape == shape and state["acc_delta"].shape == shape
