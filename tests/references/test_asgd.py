"""Hand-computed checks of the ASGD reference (pure NumPy)."""

import numpy as np

from optbench.reference import asgd

HP = {"lr": 0.1, "lambd": 0.5, "alpha": 0.75, "t0": 1.0, "weight_decay": 0.0, "maximize": False, "dtype_eps": 2.0**-52}


def test_two_steps_by_hand_eta_from_previous_step():
    p = np.array([1.0, -2.0])
    state = asgd.init(p, HP)
    assert state["eta"] == 0.1 and state["mu"] == 1.0 and state["step"] == 0.0
    p1, state = asgd.update(p, np.array([2.0, 4.0]), state, HP)
    # step 1 uses eta = lr: p * (1 - 0.5 * 0.1) - 0.1 * g; then eta = lr / (1 + 0.5 * 0.1 * 1) ** 0.75
    np.testing.assert_allclose(p1, [0.95 - 0.2, -1.9 - 0.4], rtol=1e-15)
    np.testing.assert_array_equal(state["ax"], p1)  # mu == 1: ax is a copy of the new param
    eta1 = 0.1 / 1.05**0.75
    np.testing.assert_allclose(state["eta"], eta1, rtol=1e-15)
    assert state["mu"] == 1.0  # 1 / max(1, 1 - t0)
    p2, state = asgd.update(p1, np.array([-1.0, 0.0]), state, HP)
    np.testing.assert_allclose(p2, p1 * (1 - 0.5 * eta1) - eta1 * np.array([-1.0, 0.0]), rtol=1e-15)
    np.testing.assert_allclose(state["eta"], 0.1 / 1.1**0.75, rtol=1e-15)
    assert state["step"] == 2.0 and state["mu"] == 1.0  # 1 / max(1, 2 - 1)


def test_averaging_starts_after_t0_and_averages_the_new_param():
    hp = {**HP, "lambd": 0.0, "lr": 1.0, "t0": 0.0}
    p = np.array([0.0])
    state = asgd.init(p, hp)
    params = [p]
    for g in (1.0, 1.0, 1.0, 1.0):  # lambd = 0: eta stays 1, p = -1, -2, -3, -4
        p, state = asgd.update(p, np.array([g]), state, hp)
        params.append(p)
    # mu after step t is 1 / max(1, t): steps 1-2 copy, step 3 uses mu = 1/2, step 4 mu = 1/3
    ax3 = -2.0 + 0.5 * (-3.0 - -2.0)
    np.testing.assert_allclose(state["ax"], [ax3 + (-4.0 - ax3) / 3.0], rtol=1e-15)
    np.testing.assert_allclose(state["mu"], 0.25, rtol=1e-15)


def test_weight_decay_maximize_and_odd_shapes():
    hp = {**HP, "weight_decay": 0.2, "maximize": True}
    p, g = np.array([2.0]), np.array([3.0])
    new, _ = asgd.update(p, g, asgd.init(p, hp), hp)
    # g -> -3 + 0.2 * 2 (decay from the param before the step); decay term uses lambd * eta
    np.testing.assert_allclose(new, [2.0 * (1 - 0.05) - 0.1 * (-3.0 + 0.4)], rtol=1e-15)
    for shape in [(), (0,), (0, 4)]:
        q = np.ones(shape)
        new, state = asgd.update(q, np.ones(shape), asgd.init(q, HP), HP)
        assert np.shape(new) == shape and state["ax"].shape == shape
