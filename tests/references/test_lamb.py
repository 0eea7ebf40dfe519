"""Hand-computed checks of the LAMB reference (pure NumPy)."""

import numpy as np

from optbench.reference import lamb

HP = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 0.0, "weight_decay": 0.0, "maximize": False,
      "dtype_eps": 2.0**-52}


def step(p, g, hp=HP, state=None):
    return lamb.update(p, g, lamb.init(p, hp) if state is None else state, hp)


def test_first_step_by_hand():
    # Step 1, eps = 0: m^ = g, v^ = g^2, so u = sign(g) and ||u|| = sqrt(3); the step is lr * ||x|| / sqrt(3) * sign(g).
    p, g = np.array([3.0, -4.0, 12.0]), np.array([0.5, -3.0, 1e-4])
    new, state = step(p, g)
    np.testing.assert_allclose(new, p - 0.01 * 13.0 / np.sqrt(3.0) * np.sign(g), rtol=1e-14)
    assert state["step"] == 1.0
    np.testing.assert_allclose(state["exp_avg"], 0.1 * g, rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq"], 0.001 * g * g, rtol=1e-12)


def test_weight_decay_inside_the_ratio_and_bias_correction():
    # Step 1 with wd = 0.5, eps = 0: u = sign(g) + 0.5 x. x = (2, 0): u = (1 + 1, -1) = (2, -1), ||u|| = sqrt(5),
    # ratio = 2 / sqrt(5). Without bias correction r = 0.1 / sqrt(0.001) sign(g) = sqrt(10) sign(g) instead.
    p, g = np.array([2.0, 0.0]), np.array([0.3, -7.0])
    hp = {**HP, "weight_decay": 0.5}
    u = np.array([2.0, -1.0])
    np.testing.assert_allclose(step(p, g, hp)[0], p - 0.01 * 2.0 / np.sqrt(5.0) * u, rtol=1e-14)
    u = np.sqrt(10.0) * np.sign(g) + 0.5 * p
    new = step(p, g, {**hp, "bias_correction": False})[0]
    np.testing.assert_allclose(new, p - 0.01 * 2.0 / np.linalg.norm(u) * u, rtol=1e-14)


def test_constant_gradient_several_steps_odd_shapes():
    # Constant g, eps = 0: m^ = g and v^ = g^2 every step, so u = sign(g); with x = a * ones, ||x|| / ||u|| = |a|:
    # each step scales x by (1 - lr) (x > 0, g > 0).
    for shape in [(), (0,), (0, 4), (3,), (2, 3)]:
        p = np.ones(shape)
        state = lamb.init(p, HP)
        for _ in range(3):
            p, state = lamb.update(p, np.full(shape, 0.5), state, HP)
        assert p.shape == shape and state["exp_avg"].shape == shape and state["exp_avg_sq"].shape == shape
        assert state["step"] == 3.0
        np.testing.assert_allclose(p, np.full(shape, 0.99**3), rtol=1e-14)
        np.testing.assert_allclose(state["exp_avg"], np.full(shape, 0.5 * (1 - 0.9**3)), rtol=1e-14)


def test_trust_ratio_is_one_at_zero_norms():
    g = np.array([0.5, -2.0])
    # ||x|| = 0: a plain Adam step (ratio 1), not a frozen tensor.
    np.testing.assert_allclose(step(np.zeros(2), g)[0], -0.01 * np.sign(g), rtol=1e-15)
    # ||u|| = 0 (zero gradient, no decay): nothing moves, no NaN.
    p = np.array([1.0, -1.0])
    new, state = step(p, np.zeros(2), {**HP, "eps": 1e-6})
    np.testing.assert_array_equal(new, p)
    assert not state["exp_avg"].any()


def test_decoupled_versus_in_ratio_weight_decay():
    p, zero = np.array([2.0, -4.0]), np.zeros(2)
    hp = {**HP, "weight_decay": 0.1, "eps": 1e-6}
    # In the ratio, zero gradient: u = wd x, ratio = 1 / wd, so x <- x - lr x whatever wd is.
    np.testing.assert_allclose(step(p, zero, hp)[0], p * (1 - 0.01), rtol=1e-15)
    # Decoupled: only the shrink x (1 - lr wd); u = 0.
    np.testing.assert_allclose(step(p, zero, {**hp, "weight_decouple": True})[0], p * (1 - 0.01 * 0.1), rtol=1e-15)
    # Decoupled with a gradient: the ratio uses the shrunk x, eps = 0 gives u = sign(g).
    g = np.array([1.0, 1.0])
    x = p * (1 - 0.001)
    new = step(p, g, {**hp, "eps": 0.0, "weight_decouple": True})[0]
    np.testing.assert_allclose(new, x - 0.01 * np.linalg.norm(x) / np.sqrt(2.0), rtol=1e-14)


def test_clamps_and_ratio_options():
    p, g = np.array([30.0, 40.0]), np.array([1.0, -1.0])  # ||x|| = 50, ||u|| = sqrt(2)
    u = np.sign(g)
    np.testing.assert_allclose(step(p, g, {**HP, "clamp_value": 10.0})[0], p - 0.01 * 10 / np.sqrt(2) * u, rtol=1e-14)
    np.testing.assert_allclose(step(p, g, {**HP, "trust_clip": True})[0], p - 0.01 * u, rtol=1e-15)
    np.testing.assert_allclose(step(p, g, {**HP, "adam": True})[0], p - 0.01 * u, rtol=1e-15)
    np.testing.assert_allclose(step(p, g, {**HP, "always_adapt": False})[0], p - 0.01 * u, rtol=1e-15)
    hp = {**HP, "always_adapt": False, "weight_decay": 0.01}  # timm: decay switches the ratio on
    w = u + 0.01 * p
    np.testing.assert_allclose(step(p, g, hp)[0], p - 0.01 * 50 / np.linalg.norm(w) * w, rtol=1e-14)
    # grad_averaging off: m = g, so u is 10 times the averaged one, which the ratio normalises away without decay
    np.testing.assert_allclose(step(p, g, {**HP, "grad_averaging": False})[0], step(p, g)[0], rtol=1e-14)
    assert step(p, g, {**HP, "grad_averaging": False})[1]["exp_avg"].tolist() == g.tolist()


def test_maximize_is_minimizing_the_negated_gradient():
    p, g = np.array([0.3, -1.5, 2.0]), np.array([1e-3, 2.0, -0.7])
    hp = {**HP, "weight_decay": 0.1, "eps": 1e-6}
    up, sp = step(p, g, {**hp, "maximize": True})
    um, sm = step(p, -g, hp)
    np.testing.assert_array_equal(up, um)
    np.testing.assert_array_equal(sp["exp_avg"], sm["exp_avg"])
    assert not np.array_equal(up, step(p, g, hp)[0])


def test_inputs_are_not_mutated():
    p, g = np.array([0.3, -1.5, 2.0]), np.array([1e-3, 2.0, -0.7])
    hp = {**HP, "weight_decay": 0.1, "eps": 1e-6, "maximize": True, "weight_decouple": True}
    state = step(p, g, hp)[1]
    before = (p.copy(), g.copy(), {k: np.copy(v) for k, v in state.items()})
    lamb.update(p, g, state, hp)
    lamb.decisions(p, g, state, hp)
    assert np.array_equal(p, before[0]) and np.array_equal(g, before[1])
    assert all(np.array_equal(state[k], before[2][k]) for k in state)


def test_decisions_flag_a_cancelled_update_only():
    hp = {**HP, "weight_decay": 0.5}
    # 0-dim: u = sign(g) + 0.5 x = 1 - 1 = 0 exactly: ratio 1 times u = 0, no step, and the decision is flagged.
    p, g = np.array(-2.0), np.array(0.3)
    new, _ = step(p, g, hp)
    assert new == p
    values = lamb.decisions(p, g, lamb.init(p, hp), hp)
    assert any(abs(v) <= 4 * 2.0**-52 * abs(s) for v, s in values)
    # One ulp away from the cancellation u is 2.2e-16 and the step jumps to lr * ||x|| = 0.02: flagged too.
    p = np.nextafter(np.array(-2.0), 0.0)
    assert abs(step(p, g, hp)[0] - p) > 0.019
    assert any(abs(v) <= 4 * 2.0**-52 * abs(s) for v, s in lamb.decisions(p, g, lamb.init(p, hp), hp))
    # A norm whose squares underflow float32 is flagged under float32's eps.
    p, g3, h = np.full(3, 1e-25), np.full(3, 0.3), {**hp, "dtype_eps": 2.0**-23}
    assert any(abs(v) <= 4 * 2.0**-23 * abs(s) for v, s in lamb.decisions(p, g3, lamb.init(p, h), h))
    # Away from the branches nothing is flagged, not even with float32's eps.
    p, g = np.array([3.0, -4.0]), np.array([0.5, 0.1])
    for h in ({**hp, "dtype_eps": 2.0**-23}, {**hp, "clamp_value": 10.0, "trust_clip": True}):
        values = lamb.decisions(p, g, lamb.init(p, h), h)
        assert len(values) >= 2 and not any(abs(v) <= 4 * h["dtype_eps"] * abs(s) for v, s in values)
    # A clamp at its boundary is flagged: phi's (||x|| = 5) and the ratio's (||x|| / ||u|| = sqrt(2) / sqrt(2)).
    h = {**hp, "clamp_value": 5.0}
    assert any(abs(v) <= 4 * 2.0**-52 * abs(s) for v, s in lamb.decisions(p, g, lamb.init(p, h), h))
    h, p = {**HP, "trust_clip": True}, np.ones(2)
    assert any(abs(v) <= 4 * 2.0**-52 * abs(s) for v, s in lamb.decisions(p, g, lamb.init(p, h), h))
