"""Hand-computed checks of the Hugging Face / fairseq Adafactor reference (pure NumPy)."""

import numpy as np
import pytest

from optbench.reference import hf_adafactor as af

HP = {"lr": None, "eps": (1e-30, 1e-3), "clip_threshold": 1.0, "decay_rate": -0.8, "beta1": None,
      "weight_decay": 0.0, "scale_parameter": True, "relative_step": True, "warmup_init": False,
      "dtype_eps": 2.0**-52}


def rms(x):
    return np.sqrt(np.mean(x * x))


def paper_form(p, grads, hp):
    """The paper's factored algorithm with row/column sums, one [n, m] matrix at a time (leading dims looped),
    alpha_t = max(eps2, RMS(X_{t-1})) min(1e-2, 1/sqrt(t)), clipping per whole tensor, decay by wd alpha_t X."""
    eps1, eps2 = hp["eps"]
    lead = p.shape[:-2]
    row, col = np.zeros(p.shape[:-1]), np.zeros(lead + p.shape[-1:])
    for t, g in enumerate(grads, start=1):
        beta2 = 1 - t ** hp["decay_rate"]
        u = np.empty_like(g)
        for idx in np.ndindex(*lead):
            s = g[idx] ** 2 + eps1
            row[idx] = beta2 * row[idx] + (1 - beta2) * s.sum(axis=1) / s.shape[1]
            col[idx] = beta2 * col[idx] + (1 - beta2) * s.sum(axis=0) / s.shape[0]
            r_sum, c_sum = row[idx] * s.shape[1], col[idx] * s.shape[0]
            u[idx] = g[idx] / np.sqrt(np.outer(r_sum, c_sum) / r_sum.sum())
        alpha = max(eps2, rms(p)) * min(1e-2, 1 / np.sqrt(t))
        u = alpha * u / max(1.0, rms(u) / hp["clip_threshold"])
        p = p - hp["weight_decay"] * alpha * p - u
    return p, row, col


def test_first_step_by_hand_unfactored():
    # t = 1: beta2_1 = 0, so V = g^2 + eps1 and U = sign(g) (RMS 1: no clip); alpha = RMS(X) * 1e-2 = 0.02.
    p, g = np.array([2.0, -2.0, 2.0, -2.0]), np.array([0.5, -3.0, 1e-3, 7.0])
    new, state = af.update(p, g, af.init(p, HP), HP)
    np.testing.assert_allclose(new, p - 0.02 * np.sign(g), rtol=1e-14)
    np.testing.assert_allclose(state["exp_avg_sq"], g * g + 1e-30, rtol=1e-15)
    assert state["step"] == 1.0 and isinstance(state["step"], np.float64)
    assert state["RMS"] == 2.0 and isinstance(state["RMS"], np.float64)
    assert set(state) == {"step", "exp_avg_sq", "RMS"}


def test_first_step_by_hand_factored_and_clipped():
    # G = [[1, 2], [3, 4]]: row means [2.5, 12.5], column means [5, 10], mean(row) = 7.5, so
    # V = [[5, 10], [25, 50]] / 3 and U^2 = [[0.6, 1.2], [1.08, 0.96]] (RMS sqrt(0.96) < 1: not clipped).
    p, g = np.full((2, 2), 0.5), np.array([[1.0, 2.0], [3.0, 4.0]])
    u = g / np.sqrt(np.array([[5.0, 10.0], [25.0, 50.0]]) / 3.0)
    new, state = af.update(p, g, af.init(p, HP), HP)
    np.testing.assert_allclose(state["exp_avg_sq_row"], [2.5, 12.5], rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq_col"], [5.0, 10.0], rtol=1e-15)
    np.testing.assert_allclose(new, p - 0.005 * u, rtol=1e-14)
    assert "exp_avg_sq" not in state
    hp = {**HP, "clip_threshold": 0.5}  # RMS(U) / 0.5 = 2 sqrt(0.96) > 1: U scaled to RMS 0.5
    new, _ = af.update(p, g, af.init(p, hp), hp)
    np.testing.assert_allclose(new, p - 0.005 * u * 0.5 / np.sqrt(0.96), rtol=1e-14)


def test_second_step_clips_and_uses_the_decayed_beta2():
    # Step 1 on a zero gradient leaves V = eps1; step 2: beta2_2 = 1 - 2^-0.8, V = 2^-0.8 (1 + eps1) + ...,
    # so |U| = 2^0.4 > 1 is clipped to 1; alpha_2 = RMS(X_1) min(1e-2, 1/sqrt(2)) = 0.03 * 1e-2.
    p = np.array([3.0, -3.0])
    p1, state = af.update(p, np.zeros(2), af.init(p, HP), HP)
    np.testing.assert_array_equal(p1, p)
    np.testing.assert_allclose(state["exp_avg_sq"], [1e-30, 1e-30], rtol=1e-15)
    p2, state = af.update(p1, np.array([1.0, -1.0]), state, HP)
    np.testing.assert_allclose(state["exp_avg_sq"], (1 - 2**-0.8) * 1e-30 + 2**-0.8 * (1 + 1e-30), rtol=1e-15)
    np.testing.assert_allclose(p2, p - 0.03 * np.array([1.0, -1.0]), rtol=1e-14)
    assert state["step"] == 2.0 and state["RMS"] == pytest.approx(3.0, rel=1e-15)


def test_three_d_is_factored_over_the_last_two_dims():
    rng = np.random.default_rng(3)
    p, grads = rng.standard_normal((2, 3, 4)), list(rng.standard_normal((5, 2, 3, 4)))
    for hp in [{**HP, "weight_decay": 0.1}, {**HP, "clip_threshold": 0.3}]:
        state, x = af.init(p, hp), p
        for g in grads:
            x, state = af.update(x, g, state, hp)
        x_ref, row, col = paper_form(p, grads, hp)
        assert state["exp_avg_sq_row"].shape == (2, 3) and state["exp_avg_sq_col"].shape == (2, 4)
        np.testing.assert_allclose(state["exp_avg_sq_row"], row, rtol=1e-13)
        np.testing.assert_allclose(state["exp_avg_sq_col"], col, rtol=1e-13)
        np.testing.assert_allclose(x, x_ref, rtol=1e-13)


def test_external_lr_warmup_init_and_weight_decay():
    p, zero = np.array([2.0, -4.0]), np.zeros(2)
    hp = {**HP, "lr": 0.1, "relative_step": False, "scale_parameter": False, "weight_decay": 0.2}
    new, _ = af.update(p, zero, af.init(p, hp), hp)  # U = 0: only the decay, by wd * lr
    np.testing.assert_allclose(new, p * (1 - 0.2 * 0.1), rtol=1e-15)
    hp = {**HP, "weight_decay": 0.2}  # relative: alpha = RMS(X) * 1e-2 = sqrt(10) * 1e-2
    new, _ = af.update(p, zero, af.init(p, hp), hp)
    np.testing.assert_allclose(new, p * (1 - 0.2 * np.sqrt(10.0) * 1e-2), rtol=1e-15)
    hp = {**HP, "warmup_init": True}  # rho_t = 1e-6 t (below 1/sqrt(t)); a constant g keeps |U| = 1
    g = np.array([1.0, 1.0])
    x1, state = af.update(p, g, af.init(p, hp), hp)
    np.testing.assert_allclose(x1, p - np.sqrt(10.0) * 1e-6, rtol=1e-14)
    x2, _ = af.update(x1, g, state, hp)
    np.testing.assert_allclose(x2, x1 - rms(x1) * 2e-6, rtol=1e-14)
    hp = {**HP, "scale_parameter": True}  # a parameter below eps2 in RMS: alpha = eps2 * rho
    new, _ = af.update(np.array([1e-5]), np.array([1.0]), af.init(np.array([1e-5]), hp), hp)
    np.testing.assert_allclose(new, [1e-5 - 1e-3 * 1e-2], rtol=1e-14)
    with pytest.raises(ValueError):
        af.update(p, zero, af.init(p, HP), {**HP, "relative_step": False})


def test_first_moment_averages_the_scaled_update():
    hp = {**HP, "beta1": 0.9}
    p, g = np.array([2.0, -2.0]), np.array([0.5, -3.0])
    state = af.init(p, hp)
    assert not state["exp_avg"].any() and "exp_avg" not in af.init(p, HP)
    p1, state = af.update(p, g, state, hp)
    np.testing.assert_allclose(state["exp_avg"], 0.1 * 0.02 * np.sign(g), rtol=1e-14)
    np.testing.assert_allclose(p1, p - 0.1 * 0.02 * np.sign(g), rtol=1e-14)
    p2, state = af.update(p1, g, state, hp)
    alpha2 = rms(p1) * 1e-2  # |U_2| = |g| / sqrt(v_2) = 1 again (v_2 = g^2 + eps1): no clip
    np.testing.assert_allclose(state["exp_avg"], (0.09 * 0.02 + 0.1 * alpha2) * np.sign(g), rtol=1e-14)
    np.testing.assert_allclose(p2, p1 - state["exp_avg"], rtol=1e-15)


def test_decisions_report_the_clip_and_the_scale():
    p, g = np.array([2.0, -2.0]), np.array([0.5, -3.0])
    (clip, clip_scale), (scale, scale_scale) = af.decisions(p, g, af.init(p, HP), HP)
    assert abs(clip) < 1e-15 and clip_scale == pytest.approx(1.0)  # |U| = 1 at step 1: right at the clip
    assert scale == pytest.approx(2.0 - 1e-3) and scale_scale == 2.0
    assert len(af.decisions(p, g, af.init(p, HP), {**HP, "scale_parameter": False})) == 1


def test_odd_shapes_and_inputs_untouched():
    for shape in [(), (0,), (0, 4), (3, 0), (3,), (2, 3, 4)]:
        p, g = np.full(shape, 1.5), np.linspace(-1.0, 2.0, int(np.prod(shape))).reshape(shape)
        state = af.init(p, {**HP, "beta1": 0.5})
        before = (p.copy(), g.copy(), {k: np.copy(v) for k, v in state.items()})
        new, new_state = af.update(p, g, state, {**HP, "beta1": 0.5, "weight_decay": 0.1})
        np.testing.assert_array_equal(p, before[0])
        np.testing.assert_array_equal(g, before[1])
        assert all(np.array_equal(state[k], before[2][k]) for k in state)
        for _ in range(3):
            new, new_state = af.update(new, g, new_state, {**HP, "beta1": 0.5})
        assert isinstance(new, np.ndarray) and new.shape == shape and np.isfinite(new).all()
        assert new_state["exp_avg"].shape == shape and new_state["step"] == 4.0
        if len(shape) >= 2:
            assert new_state["exp_avg_sq_row"].shape == shape[:-1]
            assert new_state["exp_avg_sq_col"].shape == shape[:-2] + shape[-1:]
        else:
            assert new_state["exp_avg_sq"].shape == shape
        assert np.isnan(new_state["RMS"]) == (p.size == 0)  # RMS of an empty tensor: 0/0, as torch's norm
    p = np.array(-0.25)  # 0-dim: alpha = 2.5e-3 * rho, U = sign(g)
    new, state = af.update(p, np.array(4.0), af.init(p, HP), HP)
    assert new.shape == () and state["exp_avg_sq"].shape == ()
    np.testing.assert_allclose(new, -0.25 - 0.25 * 1e-2, rtol=1e-14)
