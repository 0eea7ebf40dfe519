"""Hand-computed checks of the Adan reference (pure NumPy)."""

import numpy as np
import pytest

from optbench.reference import adan

HP = {"lr": 0.01, "betas": (0.98, 0.92, 0.99), "eps": 0.0, "weight_decay": 0.0, "max_grad_norm": 0.0,
      "no_prox": False, "dtype_eps": 2.0**-52}


def run(p, grads, hp=HP):
    state = adan.init(p, hp)
    for g in grads:
        p, state = adan.update(p, g, state, hp)
    return p, state


def test_first_step_by_hand():
    # Step 1: the gradient difference is 0, so m^ = g, v = 0, n^ = g^2 and, with eps = 0, x moves by lr * sign(g).
    p, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -3.0, 1e-4])
    new, state = run(p, [g])
    np.testing.assert_allclose(new, p - 0.01 * np.sign(g), rtol=1e-14)
    assert state["step"] == 1.0
    np.testing.assert_allclose(state["exp_avg"], 0.02 * g, rtol=1e-14)
    np.testing.assert_allclose(state["exp_avg_sq"], 0.01 * g * g, rtol=1e-14)
    assert not state["exp_avg_diff"].any()
    np.testing.assert_array_equal(state["neg_pre_grad"], -g)


def test_second_step_by_hand():
    # Element 0: g = 1 then 3, d = 2. m = 0.98 * 0.02 + 0.02 * 3 = 0.0796, v = 0.08 * 2 = 0.16,
    # n = 0.99 * 0.01 * 1 + 0.01 * (3 + 0.92 * 2)^2 = 0.244156; corrections 1 - b^2: 0.0396, 0.1536, 0.0199.
    # Element 1: g = -2 twice, d = 0: m^ = g, v = 0, n^ = g^2, so it moves by lr * sign(g) again.
    p = np.array([1.0, -1.0])
    new, state = run(p, [np.array([1.0, -2.0]), np.array([3.0, -2.0])])
    first = 0.01 * (0.0796 / 0.0396 + 0.92 * 0.16 / 0.1536) / np.sqrt(0.244156 / 0.0199)
    np.testing.assert_allclose(new, [1.0 - 0.01 - first, -1.0 + 0.02], rtol=1e-13)
    np.testing.assert_allclose(state["exp_avg"], [0.0796, 0.0396 * -2.0], rtol=1e-13)
    np.testing.assert_allclose(state["exp_avg_diff"], [0.16, 0.0], rtol=1e-13, atol=0)
    np.testing.assert_allclose(state["exp_avg_sq"], [0.244156, 0.0199 * 4.0], rtol=1e-13)
    np.testing.assert_array_equal(state["neg_pre_grad"], [-3.0, 2.0])
    assert state["step"] == 2.0


def test_constant_gradient_several_steps_odd_shapes():
    # Constant g: d = 0 every step, v = 0, m^ = g, n^ = g^2, so x moves by lr * sign(g) each step (eps = 0).
    for shape in [(), (0,), (0, 4), (3,), (2, 3)]:
        p, state = run(np.ones(shape), [np.full(shape, 0.5)] * 3)
        assert p.shape == shape and all(v.shape == shape for k, v in state.items() if k != "step")
        assert state["step"] == 3.0
        np.testing.assert_allclose(p, np.full(shape, 1.0 - 0.03), rtol=1e-14)
        assert not state["exp_avg_diff"].any()


def test_proximal_versus_no_prox_weight_decay():
    p, zero = np.array([2.0, -4.0]), np.zeros(2)
    hp = {**HP, "weight_decay": 0.1, "eps": 1e-8}
    np.testing.assert_allclose(run(p, [zero], hp)[0], p / (1 + 0.01 * 0.1), rtol=1e-15)  # moments 0: decay only
    np.testing.assert_allclose(run(p, [zero], {**hp, "no_prox": True})[0], p * (1 - 0.01 * 0.1), rtol=1e-15)
    weight_decouple = {k: v for k, v in hp.items() if k != "no_prox"} | {"weight_decouple": True}
    np.testing.assert_allclose(run(p, [zero], weight_decouple)[0], p * (1 - 0.01 * 0.1), rtol=1e-15)
    # With a gradient (eps = 0): (x - lr sign(g)) / (1 + lr wd) against x (1 - lr wd) - lr sign(g).
    g = np.array([0.5, 0.5])
    hp = {**hp, "eps": 0.0}
    np.testing.assert_allclose(run(p, [g], hp)[0], (p - 0.01) / 1.001, rtol=1e-15)
    np.testing.assert_allclose(run(p, [g], {**hp, "no_prox": True})[0], p * 0.999 - 0.01, rtol=1e-15)


def test_maximize_is_minimizing_the_negated_gradient():
    p, g1, g2 = np.array([0.3, -1.5, 2.0]), np.array([1e-3, 2.0, -0.7]), np.array([0.4, -1.0, 0.2])
    hp = {**HP, "weight_decay": 0.1, "eps": 1e-8}
    up, sp = run(p, [g1, g2], {**hp, "maximize": True})
    um, sm = run(p, [-g1, -g2], hp)
    np.testing.assert_array_equal(up, um)
    assert all(np.array_equal(sp[k], sm[k]) for k in sp)
    assert not run(p, [g1], {**hp, "maximize": True})[1]["exp_avg_diff"].any()  # step 1's difference is still 0


def test_inputs_are_not_mutated_and_clipping_is_refused():
    p, g = np.array([0.3, -1.5, 2.0]), np.array([1e-3, 2.0, -0.7])
    hp = {**HP, "weight_decay": 0.1, "eps": 1e-8, "maximize": True}
    state = run(p, [g], hp)[1]
    before = (p.copy(), g.copy(), {k: np.copy(v) for k, v in state.items()})
    adan.update(p, 2 * g, state, hp)
    assert np.array_equal(p, before[0]) and np.array_equal(g, before[1])
    assert all(np.array_equal(state[k], before[2][k]) for k in state)
    with pytest.raises(ValueError, match="max_grad_norm"):
        adan.update(p, g, state, {**hp, "max_grad_norm": 1.0})
