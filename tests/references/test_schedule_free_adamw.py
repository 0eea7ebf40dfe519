"""Hand-computed checks of the Schedule-Free AdamW reference (pure NumPy)."""

import numpy as np

from optbench.reference import schedule_free_adamw as sf

HP = {"lr": 0.1, "betas": (0.9, 0.999), "eps": 0.0, "weight_decay": 0.0, "warmup_steps": 0, "r": 0.0,
      "weight_lr_power": 2.0, "foreach": False, "dtype_eps": 2.0**-52}


def run(p, grads, hp, state=None):
    state = sf.init(p, hp) if state is None else state
    for g in grads:
        p, state = sf.update(p, g, state, hp)
    return p, state


def three_sequences(p, grads, hp):
    """The paper's x, z form (c_{t+1} = w_t / sum w, decay at y, bias-corrected denominator), independent of
    the module's y-only algebra; returns the y, z the module should hold."""
    (beta1, beta2), lr, eps, wd = hp["betas"], hp["lr"], hp["eps"], hp["weight_decay"]
    x, z, v, total = p.copy(), p.copy(), np.zeros_like(p), 0.0
    for t, g in enumerate(grads, start=1):
        y = (1 - beta1) * z + beta1 * x
        gamma = lr * min(1.0, t / hp["warmup_steps"]) if hp["warmup_steps"] else lr
        v = beta2 * v + (1 - beta2) * g * g
        z = z - gamma * (g / (np.sqrt(v / (1 - beta2**t)) + eps) + wd * y)
        total += t ** hp["r"] * gamma ** hp["weight_lr_power"]
        c = t ** hp["r"] * gamma ** hp["weight_lr_power"] / total
        x = (1 - c) * x + c * z
    return (1 - beta1) * z + beta1 * x, z


def test_first_step_by_hand():
    # Step 1: c = 1 and z = y, so y_1 = z_1 = y_0 - lr * g / |g| (eps = 0: the corrected sqrt(v) is |g|).
    p, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -3.0, 1e-3])
    new, state = sf.update(p, g, sf.init(p, HP), HP)
    np.testing.assert_allclose(new, p - 0.1 * np.sign(g), rtol=1e-14)
    np.testing.assert_allclose(state["z"], p - 0.1 * np.sign(g), rtol=1e-14)
    np.testing.assert_allclose(state["exp_avg_sq"], 0.001 * g * g, rtol=1e-12)
    assert state["step"] == 1.0 and isinstance(state["step"], np.float64)
    assert state["weight_sum"] == 0.1**2 and state["lr_max"] == 0.1


def test_second_step_by_hand():
    # Step 2, constant lr: c = 1/2, y_1 = z_1, so y_2 = z_1 - lr (1 - 0.9/2) u_2 and z_2 = z_1 - lr u_2.
    p, g1, g2 = np.array([1.0, -2.0]), np.array([1.0, 1.0]), np.array([2.0, -1.0])
    y1, state = sf.update(p, g1, sf.init(p, HP), HP)
    y2, state = sf.update(y1, g2, state, HP)
    v = 0.999 * 0.001 * g1**2 + 0.001 * g2**2
    u = g2 / np.sqrt(v / (1 - 0.999**2))
    np.testing.assert_allclose(state["z"], y1 - 0.1 * u, rtol=1e-14)
    np.testing.assert_allclose(y2, y1 - 0.1 * 0.55 * u, rtol=1e-14)
    assert state["weight_sum"] == 2 * 0.1**2


def test_matches_the_three_sequence_form_with_decay_warmup_and_r():
    rng = np.random.default_rng(1)
    p, grads = rng.standard_normal((2, 3)), list(rng.standard_normal((6, 2, 3)))
    for hp in [{**HP, "eps": 1e-3, "weight_decay": 0.3, "warmup_steps": 4, "r": 0.5},
               {**HP, "betas": (0.0, 0.99), "eps": 1e-8, "weight_lr_power": 0.0, "r": 1.0},
               {**HP, "betas": (0.95, 0.9), "warmup_steps": 3, "weight_lr_power": 1.0}]:
        y, state = run(p, grads, hp)
        y_ref, z_ref = three_sequences(p, grads, hp)
        np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(state["z"], z_ref, rtol=1e-12, atol=1e-14)
        assert state["step"] == 6.0


def test_warmup_weights_by_hand():
    # warmup_steps = 2, lr = 0.1: gamma = 0.05, 0.1; weights 0.0025, 0.01 -> c_3 = 0.8 at step 2.
    hp = {**HP, "warmup_steps": 2}
    p, g = np.array([1.0]), np.array([1.0])
    y1, state = sf.update(p, g, sf.init(p, hp), hp)
    np.testing.assert_allclose(y1, [0.95], rtol=1e-15)  # first warmup step: lr / 2
    y2, state = sf.update(y1, g, state, hp)
    np.testing.assert_allclose(state["z"], [0.85], rtol=1e-14)
    np.testing.assert_allclose(y2, 0.2 * y1 + 0.8 * 0.95 - 0.1 * (1 - 0.9 * 0.2), rtol=1e-14)
    np.testing.assert_allclose(state["weight_sum"], 0.0125, rtol=1e-15)


def test_lr_max_keeps_the_largest_lr_and_zero_lr_averages_nothing():
    p, g = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    y1, state = sf.update(p, g, sf.init(p, HP), HP)
    low = {**HP, "lr": 0.05}  # an external schedule lowering lr: the weight stays lr_max**2 = 0.01, c = 1/2
    y2, state = sf.update(y1, g, state, low)
    assert state["lr_max"] == 0.1 and state["weight_sum"] == 2 * 0.1**2
    np.testing.assert_allclose(y2, y1 - 0.05 * 0.55 * np.sign(g), rtol=1e-14)
    zero = {**HP, "lr": 0.0}
    y, state = sf.update(p, g, sf.init(p, zero), zero)  # W = 0: c = 0, nothing moves, no NaN
    np.testing.assert_array_equal(y, p)
    assert state["weight_sum"] == 0.0


def test_weight_decay_is_taken_at_y():
    hp = {**HP, "eps": 1e-8, "weight_decay": 0.5}
    p = np.array([2.0, -4.0])
    y1, state = sf.update(p, np.zeros(2), sf.init(p, hp), hp)  # zero gradient: a pure shrink of z (= y)
    np.testing.assert_allclose(y1, p * (1 - 0.1 * 0.5), rtol=1e-15)
    z1 = state["z"]
    y2, state = sf.update(y1, np.zeros(2), state, hp)
    np.testing.assert_allclose(state["z"], z1 - 0.1 * 0.5 * y1, rtol=1e-15)
    np.testing.assert_allclose(y2, y1 - 0.1 * 0.55 * 0.5 * y1, rtol=1e-14)


def test_inner_momentum_is_bias_corrected():
    hp = {**HP, "inner_momentum": 0.9}
    p, g = np.array([1.0, -2.0]), np.array([0.5, -3.0])
    state = sf.init(p, hp)
    assert not state["exp_avg"].any()
    y1, state = sf.update(p, g, state, hp)  # m_1 / (1 - 0.9) = g: the first step is unchanged
    np.testing.assert_allclose(y1, p - 0.1 * np.sign(g), rtol=1e-14)
    np.testing.assert_allclose(state["exp_avg"], 0.1 * g, rtol=1e-15)
    assert "exp_avg" not in sf.init(p, HP)


def test_odd_shapes_and_inputs_untouched():
    for shape in [(), (0,), (0, 4), (3,), (2, 1, 3)]:
        p, g = np.full(shape, 1.5), np.full(shape, -0.5)
        state = sf.init(p, HP)
        before = (p.copy(), g.copy(), {k: np.copy(v) for k, v in state.items()})
        new, new_state = sf.update(p, g, state, HP)
        np.testing.assert_array_equal(p, before[0])
        np.testing.assert_array_equal(g, before[1])
        assert all(np.array_equal(state[k], before[2][k]) for k in state)
        for _ in range(2):
            new, new_state = sf.update(new, g, new_state, HP)
        assert isinstance(new, np.ndarray) and new.shape == shape
        assert new_state["z"].shape == shape and new_state["exp_avg_sq"].shape == shape
        # constant gradient: every u_t = -1, so z_3 = p + 3 lr and y_3 = x_3 + 0.1 (z_3 - x_3), x_3 = p + 2 lr
        np.testing.assert_allclose(new_state["z"], np.full(shape, 1.8), rtol=1e-14)
        np.testing.assert_allclose(new, np.full(shape, 1.5 + 0.2 + 0.1 * 0.1), rtol=1e-14)
        assert new_state["step"] == 3.0
