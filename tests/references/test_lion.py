"""Hand-computed checks of the Lion reference (pure NumPy)."""

import numpy as np

from optbench.reference import lion

HP = {"lr": 0.01, "betas": (0.9, 0.99), "weight_decay": 0.0, "maximize": False, "dtype_eps": 2.0**-52}


def test_first_steps_by_hand():
    p, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -3.0, 0.0])
    hp = {**HP, "weight_decay": 0.1}
    new, state = lion.update(p, g, lion.init(p, hp), hp)
    np.testing.assert_array_equal(new, p * (1 - 0.01 * 0.1) - 0.01 * np.array([1.0, -1.0, 0.0]))  # sign(0) = 0
    np.testing.assert_allclose(state["exp_avg"], 0.01 * g, rtol=1e-15)
    # step 2 with the opposite gradient: c = 0.9 * 0.01 g - 0.1 g = -0.091 g, so the step follows -g
    new2, state2 = lion.update(new, -g, state, hp)
    np.testing.assert_allclose(new2, new * (1 - 0.001) - 0.01 * np.sign(-g), rtol=1e-15)
    np.testing.assert_allclose(state2["exp_avg"], 0.99 * 0.01 * g - 0.01 * g, rtol=0, atol=1e-17)


def test_odd_shapes_maximize_and_inputs_untouched():
    for shape in [(), (0,), (0, 4), (3,)]:
        p, g = np.full(shape, 0.5), np.full(shape, 0.25)
        state = lion.init(p, HP)
        kept = (p.copy(), g.copy(), state["exp_avg"].copy())
        up, _ = lion.update(p, g, state, {**HP, "maximize": True})
        down, _ = lion.update(p, -g, state, HP)
        np.testing.assert_array_equal(up, down)
        assert up.shape == shape
        np.testing.assert_array_equal(p, kept[0]) and np.testing.assert_array_equal(g, kept[1])
        np.testing.assert_array_equal(state["exp_avg"], kept[2])


def test_decisions_give_the_interpolation_and_its_terms():
    p, g, m = np.zeros(2), np.array([1.0, -2.0]), np.array([-0.1, 0.3])
    (value, scale), = lion.decisions(p, g, {"exp_avg": m}, HP)
    np.testing.assert_allclose(value, 0.9 * m + (1 - 0.9) * g, rtol=1e-15)
    np.testing.assert_allclose(scale, 0.9 * np.abs(m) + (1 - 0.9) * np.abs(g), rtol=1e-15)
