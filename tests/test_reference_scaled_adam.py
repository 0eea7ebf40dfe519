"""Hand-derived checks of the ScaledAdam reference (pure NumPy, docs/scaled_adam.md), and mutants they catch.

Facts the expectations rest on: with beta2 = 0.98 the bias correction 1 - beta2**(t+1) stays below 0.99
for t < 227, so under a constant gradient the corrected second moment is exactly g**2 and every Adam
term is lr * (1 - beta1) * scale * g / (|g| + eps); a None gradient is a zero gradient, whose Adam
term is 0.
"""

import copy

import numpy as np
import pytest

from optbench.reference import load_reference, scaled_adam

HP = {"lr": 0.03, "clipping_scale": None, "betas": (0.9, 0.98), "scalar_lr_scale": 0.1, "eps": 1e-8,
      "param_min_rms": 1e-5, "param_max_rms": 3.0, "scalar_max": 10.0, "size_update_period": 4,
      "clipping_update_period": 100, "dtype_eps": 2.0**-52}
EPS = 1e-8


def run(params, grads_per_step, hp=HP):
    """Steps one group through ``grads_per_step`` (a list of {name: grad or None}); returns params, states."""
    params = {n: np.asarray(p, dtype=np.float64) for n, p in params.items()}
    states = {n: scaled_adam.init(p, hp) for n, p in params.items()}
    for grads in grads_per_step:
        params, states = scaled_adam.update_group(params, grads, states, hp)
    return params, states


def rms(x):
    return np.sqrt(np.mean(np.asarray(x) ** 2))


# The checks, as functions so that the mutant tests below can show each of them failing.

def check_tensor_first_step():
    # Step 1 from zero state: v = (1 - b2) g^2 / (1 - b2) = g^2, so p moves by -lr (1 - b1) rms0 g / (|g| + eps).
    p0, g = np.array([[3.0, -4.0], [0.0, 0.0]]), np.array([[0.5, -2.0], [1e-3, 0.0]])
    new, states = run({"w": p0}, [{"w": g}])
    expected = p0 - 0.03 * 0.1 * 2.5 * g / (np.abs(g) + EPS)  # rms0 = sqrt(25 / 4) = 2.5
    np.testing.assert_allclose(new["w"], expected, rtol=1e-14)
    s = states["w"]
    assert int(s["step"]) == 1
    np.testing.assert_allclose(s["delta"], -0.03 * 0.1 * 2.5 * g / (np.abs(g) + EPS), rtol=1e-14)
    np.testing.assert_allclose(s["exp_avg_sq"], 0.02 * g * g, rtol=1e-14)
    assert s["param_rms"].shape == () and float(s["param_rms"]) == 2.5  # t = 0 is not t % 4 == 3
    np.testing.assert_allclose(s["scale_grads"], [1.5 + 8.0, 0.0, 0.0, 0.0], rtol=1e-15)  # sum(p0 * g) at slot 0
    assert s["scale_exp_avg_sq"].shape == () and float(s["scale_exp_avg_sq"]) == 0.0


def check_tensor_bias_correction_only_below_0_99():
    # beta2 = 0.005: 1 - beta2 = 0.995 >= 0.99, so a tensor's first step divides by sqrt(0.995 g^2) (no bias
    # correction), while a scalar always corrects (sqrt(g^2)).
    hp = {**HP, "betas": (0.9, 0.005)}
    p0, g = np.array([3.0, -4.0, 0.0, 0.0]), np.array([0.5, -2.0, 1e-3, 0.0])
    new, _ = run({"w": p0, "s": np.array(1.0)}, [{"w": g, "s": np.array(0.5)}], hp)
    np.testing.assert_allclose(new["w"], p0 - 0.03 * 0.1 * 2.5 * g / (np.sqrt(0.995) * np.abs(g) + EPS), rtol=1e-14)
    np.testing.assert_allclose(new["s"], 1.0 - 0.03 * 0.1 * 0.1 * 0.5 / (0.5 + EPS), rtol=1e-14)


def check_scalar_constant_gradient():
    # Constant g: every step adds u = -lr * scalar_lr_scale * (1 - b1) * g / (|g| + eps) to beta1 * delta,
    # so delta_n = u (1 - 0.9**n) / 0.1 and p_3 = p_0 + delta_1 + delta_2 + delta_3.
    new, states = run({"s": np.array(0.5)}, [{"s": np.array(2.0)}] * 3)
    u = -0.03 * 0.1 * 0.1 * 2.0 / (2.0 + EPS)
    deltas = [u * (1 - 0.9**n) / 0.1 for n in (1, 2, 3)]
    np.testing.assert_allclose(new["s"], 0.5 + sum(deltas), rtol=1e-14)
    assert new["s"].shape == ()
    np.testing.assert_allclose(states["s"]["delta"], deltas[-1], rtol=1e-13)
    np.testing.assert_allclose(states["s"]["exp_avg_sq"], (1 - 0.98**3) * 4.0, rtol=1e-13)
    assert set(states["s"]) == {"step", "delta", "exp_avg_sq", "clipping"} and int(states["s"]["step"]) == 3


def check_scalar_varying_gradient():
    # g = 1 then 3: v_hat_2 = (0.98 * 0.02 * 1 + 0.02 * 9) / (1 - 0.98**2) = (0.98 + 9) / 1.98.
    new, states = run({"s": np.array([0.0])}, [{"s": np.array([1.0])}, {"s": np.array([3.0])}])
    d1 = -0.03 * 0.1 * 0.1 * 1.0 / (1.0 + EPS)
    d2 = 0.9 * d1 - 0.03 * 0.1 * 0.1 * 3.0 / (np.sqrt(9.98 / 1.98) + EPS)
    np.testing.assert_allclose(new["s"], [d1 + d2], rtol=1e-13)
    np.testing.assert_allclose(states["s"]["exp_avg_sq"], [0.98 * 0.02 + 0.02 * 9.0], rtol=1e-14)


def check_grad_none_is_a_zero_gradient():
    # Step 2 without a gradient: momentum goes on (delta_2 = 0.9 delta_1) and exp_avg_sq decays by beta2.
    p0, g = np.array([1.0, -2.0, 3.0]), np.array([0.1, 0.2, -0.3])
    new, states = run({"w": p0, "s": np.array(1.0)}, [{"w": g, "s": np.array(-1.0)}, {"w": None, "s": None}])
    d1 = -0.03 * 0.1 * rms(p0) * g / (np.abs(g) + EPS)
    np.testing.assert_allclose(new["w"], p0 + d1 + 0.9 * d1, rtol=1e-14)
    np.testing.assert_allclose(states["w"]["delta"], 0.9 * d1, rtol=1e-14)
    np.testing.assert_allclose(states["w"]["exp_avg_sq"], 0.98 * 0.02 * g * g, rtol=1e-14)
    ds1 = 0.03 * 0.1 * 0.1 * 1.0 / (1.0 + EPS)
    np.testing.assert_allclose(new["s"], 1.0 + ds1 + 0.9 * ds1, rtol=1e-14)
    np.testing.assert_allclose(states["s"]["exp_avg_sq"], 0.98 * 0.02, rtol=1e-14)
    assert int(states["w"]["step"]) == int(states["s"]["step"]) == 2


def check_scalar_max_bounds_p_not_delta():
    hp = {**HP, "lr": 1.0, "scalar_lr_scale": 1.0, "scalar_max": 0.3}
    params, grads = {"a": np.full((1, 1), 0.29), "b": np.array(-0.29)}, {"a": np.full((1, 1), -1.0), "b": np.array(1.0)}
    new, states = run(params, [grads], hp)
    step = 1.0 * 1.0 * 0.1 * 1.0 / (1.0 + EPS)  # 0.29 + 0.1 = 0.39 > 0.3
    assert new["a"].shape == (1, 1) and new["a"][0, 0] == 0.3 and float(new["b"]) == -0.3
    np.testing.assert_allclose(states["a"]["delta"], [[step]], rtol=1e-15)  # the bound is on p only
    np.testing.assert_allclose(states["b"]["delta"], -step, rtol=1e-15)


def check_size_update_forced_above_max_rms_at_step_k_minus_1():
    # rms 5 > param_max_rms and no gradient: nothing moves for t = 0, 1, 2; at t = 3 = K - 1 the scale step is
    # forced to -lr * scalar_lr_scale * K, so delta = (1 - b1) * (-0.03 * 0.1 * 4) * p.
    p0 = np.full((2, 3), 5.0)
    none = [{"w": None}]
    params, states = run({"w": p0}, none * 3)
    np.testing.assert_array_equal(params["w"], p0)
    assert not states["w"]["delta"].any() and int(states["w"]["step"]) == 3
    params, states = scaled_adam.update_group(params, none[0], states, HP)
    shrink = 0.1 * 0.03 * 0.1 * 4
    np.testing.assert_allclose(params["w"], p0 * (1 - shrink), rtol=1e-15)
    np.testing.assert_allclose(states["w"]["delta"], -shrink * p0, rtol=1e-15)
    assert float(states["w"]["param_rms"]) == 5.0
    params, states = scaled_adam.update_group(params, none[0], states, HP)  # t = 4: momentum only
    np.testing.assert_allclose(params["w"], p0 * (1 - shrink) - 0.9 * shrink * p0, rtol=1e-15)
    # K = 1: t % 1 == 0 every step, but no size update at t = 0 (refresh of param_rms only).
    hp1 = {**HP, "size_update_period": 1}
    params, states = run({"w": p0}, none, hp1)
    np.testing.assert_array_equal(params["w"], p0)
    params, states = scaled_adam.update_group(params, none[0], states, hp1)
    np.testing.assert_allclose(params["w"], p0 * (1 - 0.1 * 0.03 * 0.1), rtol=1e-15)


def check_size_update_value():
    # K = 2, constant g: at t = 1 param_rms <- rms(p1), scale_grads = [s0, s1] (s_k = sum(p_k g)),
    # scale_exp_avg_sq = (1 - b2^2) (s0^2 + s1^2) / 2 and, one size step in, bc = 1 - b2^2, so
    # scale_step = -lr sls sqrt(bc) (s0 + s1) / (sqrt(bc (s0^2 + s1^2) / 2) + eps)
    #            = -lr sls (s0 + s1) / (sqrt((s0^2 + s1^2) / 2) + eps / sqrt(bc)).
    hp = {**HP, "size_update_period": 2}
    p0, g = np.array([1.0, 2.0]), np.array([0.5, 0.25])
    d1 = -0.03 * 0.1 * rms(p0) * g / (np.abs(g) + EPS)
    p1 = p0 + d1
    s0, s1, bc = float(p0 @ g), float(p1 @ g), 1 - 0.98**2
    scale_step = -0.03 * 0.1 * (s0 + s1) / (np.sqrt((s0**2 + s1**2) / 2) + EPS / np.sqrt(bc))
    d2 = 0.9 * d1 + 0.1 * scale_step * p1 - 0.03 * 0.1 * rms(p1) * g / (np.abs(g) + EPS)
    params, states = run({"w": p0}, [{"w": g}], hp)
    np.testing.assert_allclose(params["w"], p1, rtol=1e-15)
    assert float(states["w"]["param_rms"]) == rms(p0) and float(states["w"]["scale_exp_avg_sq"]) == 0.0
    params, states = scaled_adam.update_group(params, {"w": g}, states, hp)
    s = states["w"]
    np.testing.assert_allclose(params["w"], p1 + d2, rtol=1e-13)
    np.testing.assert_allclose(s["param_rms"], rms(p1), rtol=1e-15)
    np.testing.assert_allclose(s["scale_grads"], [s0, s1], rtol=1e-15)
    np.testing.assert_allclose(s["scale_exp_avg_sq"], bc * (s0**2 + s1**2) / 2, rtol=1e-14)


def check_size_update_masked_below_min_rms():
    # rms ~ 3e-6 < param_min_rms: the Adam term uses param_min_rms (u per step) and the scale step is 0, so
    # with constant g the 4 steps (size update at the 4th) are delta_n = u (1 - 0.9**n) / 0.1.
    p0, g = 1e-6 * np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4)
    u = -0.03 * 0.1 * 1e-5 * g / (1.0 + EPS)
    deltas = [u * (1 - 0.9**n) / 0.1 for n in (1, 2, 3, 4)]
    params, states = run({"w": p0}, [{"w": g}] * 4)
    np.testing.assert_allclose(params["w"], p0 + sum(deltas), rtol=1e-13)
    p3 = p0 + sum(deltas[:3])
    np.testing.assert_allclose(states["w"]["param_rms"], rms(p3), rtol=1e-14)
    assert rms(p3) < 1e-5 and float(states["w"]["scale_exp_avg_sq"]) > 0.0  # the statistics go on; the step is masked


def clip_group():
    """A tensor (rms 2.5, never refreshed: K = 1000), a scalar and a gradient-less tensor; with the base
    gradients the group norm is N = sqrt(4 * (1 * 2.5)^2 + 12^2) = 13."""
    params = {"w": np.array([3.0, 4.0, 0.0, 0.0]), "b": np.array(0.5), "n": np.array([1.0, -1.0])}
    base = {"w": np.ones(4), "b": np.array(12.0), "n": None}
    return params, base


def times(grads, k):
    return {n: None if g is None else k * g for n, g in grads.items()}


def assert_same_run(a, b, rtol=1e-12):
    (pa, sa), (pb, sb) = a, b
    for n in pa:
        np.testing.assert_allclose(pa[n], pb[n], rtol=rtol, err_msg=n)
        for k, v in sa[n].items():
            if not isinstance(v, dict):  # clipping, error_scale: bookkeeping
                np.testing.assert_allclose(v, sb[n][k], rtol=rtol, err_msg=f"{n}.{k}")


def check_clipping_at_period():
    hp = {**HP, "clipping_scale": 2.0, "clipping_update_period": 4, "size_update_period": 1000}
    params, base = clip_group()
    p, s = run(params, [base], hp)
    clip = s["w"]["clipping"]
    assert clip["step"] == 1 and not np.any(clip["model_norms"]) and clip["threshold"] is None  # t = 0: nothing
    p, s = run(params, [base] * 4, hp)
    np.testing.assert_allclose(s["w"]["clipping"]["model_norms"], [0.0, 13.0, 13.0, 13.0], rtol=1e-15)
    assert s["w"]["clipping"]["threshold"] is None
    # t = 4 = P with 100x gradients: norms [1300, 13, 13, 13], threshold = 2 * sorted[2] = 26,
    # c = 26 / 1300 = 0.02, so the step sees 2x the base gradients; at t = 5 the base norm 13 < 26: c = 1.
    clipped = run(params, [base] * 4 + [times(base, 100.0), base], hp)
    plain = run(params, [base] * 4 + [times(base, 2.0), base], {**hp, "clipping_scale": None})
    assert_same_run(clipped, plain)
    clip = clipped[1]["w"]["clipping"]
    np.testing.assert_allclose(clip["model_norms"], [1300.0, 13.0, 13.0, 13.0], rtol=1e-15)
    np.testing.assert_allclose(clip["threshold"], 26.0, rtol=1e-15)
    assert clip["num_clipped"] == 1 and clip["step"] == 6
    assert set(clipped[1]["b"]) == {"step", "delta", "exp_avg_sq"}  # the dict lives under the first name only


def check_no_clipping_before_period():
    # 100x gradients at t = 0 and t = 2 < P go through unclipped; at t = 4 the norms are [13, 26, 1300, 13]
    # (t = 0 is never recorded), their median sorted[2] = 26, threshold 0.25 * 26 = 6.5: the base gradients
    # (norm 13) are halved.
    hp = {**HP, "clipping_scale": 0.25, "clipping_update_period": 4, "size_update_period": 1000}
    params, base = clip_group()
    grads = [times(base, 100.0), times(base, 2.0), times(base, 100.0), base]
    clipped = run(params, grads + [base], hp)
    plain = run(params, grads + [times(base, 0.5)], {**hp, "clipping_scale": None})
    assert_same_run(clipped, plain)
    np.testing.assert_allclose(clipped[1]["w"]["clipping"]["threshold"], 6.5, rtol=1e-15)
    assert clipped[1]["w"]["clipping"]["num_clipped"] == 1


CHECKS = [check_tensor_first_step, check_tensor_bias_correction_only_below_0_99, check_scalar_constant_gradient,
          check_scalar_varying_gradient,
          check_grad_none_is_a_zero_gradient, check_scalar_max_bounds_p_not_delta,
          check_size_update_forced_above_max_rms_at_step_k_minus_1, check_size_update_value,
          check_size_update_masked_below_min_rms, check_clipping_at_period, check_no_clipping_before_period]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[len("check_"):])
def test_hand_derived(check):
    check()


def test_contract_and_init():
    assert load_reference("scaled_adam") is scaled_adam and scaled_adam.KIND == "group"
    state = scaled_adam.init(np.array([[3.0, 4.0]]), {**HP, "size_update_period": 3})
    assert set(state) == {"step", "delta", "exp_avg_sq", "param_rms", "scale_exp_avg_sq", "scale_grads"}
    assert int(state["step"]) == 0 and state["delta"].shape == state["exp_avg_sq"].shape == (1, 2)
    np.testing.assert_allclose(state["param_rms"], np.sqrt(12.5), rtol=1e-15)
    assert state["param_rms"].shape == state["scale_exp_avg_sq"].shape == () and state["scale_grads"].shape == (3,)
    for shape in [(), (1,), (1, 1)]:
        state = scaled_adam.init(np.full(shape, 2.0), HP)
        assert set(state) == {"step", "delta", "exp_avg_sq"} and state["delta"].shape == shape
    assert scaled_adam.init(np.zeros((0, 3)), HP) == {}


def test_zero_dim_and_one_element_params_are_scalars():
    shapes = [(), (1,), (1, 1)]
    params = {f"s{i}": np.full(shape, 0.7) for i, shape in enumerate(shapes)}
    grads = {n: np.full(p.shape, -0.4) for n, p in params.items()}
    new, states = run(params, [grads, grads])
    for name, shape in zip(params, shapes):
        assert new[name].shape == states[name]["delta"].shape == shape
        assert {"param_rms", "scale_grads"}.isdisjoint(states[name])
        np.testing.assert_allclose(new[name].reshape(-1), new["s0"].reshape(-1), rtol=0)
    d1 = 0.03 * 0.1 * 0.1 * 0.4 / (0.4 + EPS)
    np.testing.assert_allclose(new["s0"], 0.7 + d1 + 1.9 * d1, rtol=1e-14)


def test_zero_size_param_untouched_without_state():
    params = {"w": np.array([1.0, 2.0]), "e": np.zeros((0, 3))}
    new, states = run(params, [{"w": np.array([0.1, 0.1]), "e": np.zeros((0, 3))}, {"w": None, "e": None}])
    assert new["e"].shape == (0, 3) and states["e"] == {}
    # First in the group, it still carries the group's private bookkeeping, and nothing else.
    new, states = run({"e": params["e"], "w": params["w"]}, [{"e": None, "w": np.array([0.1, 0.1])}] * 2)
    assert set(states["e"]) == {"clipping"} and states["e"]["clipping"]["step"] == 2 and int(states["w"]["step"]) == 2


def test_inputs_not_mutated():
    hp = {**HP, "clipping_scale": 1.0, "clipping_update_period": 2, "size_update_period": 2}
    params, base = clip_group()
    _, states = run(params, [base] * 3, hp)  # states holding a clipping dict and refreshed scale statistics
    grads = times(base, 3.0)
    before = copy.deepcopy((params, grads, states, hp))
    new, new_states = scaled_adam.update_group(params, grads, states, hp)
    after = (params, grads, states, hp)
    for name in params:
        np.testing.assert_array_equal(params[name], before[0][name])
        assert new[name] is not params[name]
        for key, value in before[2][name].items():
            now = states[name][key]
            if key == "clipping":
                assert value.keys() == now.keys()
                assert (value["step"], value["threshold"]) == (now["step"], now["threshold"])
                np.testing.assert_array_equal(value["model_norms"], now["model_norms"])
            elif key == "error_scale":
                assert value.keys() == now.keys()
                assert all(np.array_equal(value[k], now[k]) for k in value)
            else:
                np.testing.assert_array_equal(value, now)
    assert all(g is None or np.array_equal(g, before[1][n]) for n, g in grads.items()) and after[3] == before[3]
    assert new_states["w"]["clipping"]["step"] == states["w"]["clipping"]["step"] + 1


# Mutants: each is a plausible bug; the checks above must catch it.

def _wrong_beta2(step):
    def mutant(p, g, state, hp):
        return step(p, g, state, {**hp, "betas": (hp["betas"][0], 0.97)})
    return mutant


MUTANTS = {
    "wrong_beta2": (lambda mp: (mp.setattr(scaled_adam, "_step_tensor", _wrong_beta2(scaled_adam._step_tensor)),
                                mp.setattr(scaled_adam, "_step_scalar", _wrong_beta2(scaled_adam._step_scalar))),
                    [check_scalar_varying_gradient, check_grad_none_is_a_zero_gradient, check_size_update_value]),
    "size_update_at_t_mod_k_0": (lambda mp: mp.setattr(scaled_adam, "_is_size_step", lambda t, k: t % k == 0),
                                 [check_size_update_forced_above_max_rms_at_step_k_minus_1, check_size_update_value,
                                  check_size_update_masked_below_min_rms]),
    "median_is_max": (lambda mp: mp.setattr(scaled_adam, "_median_index", lambda period: period - 1),
                      [check_clipping_at_period]),
    "median_is_min": (lambda mp: mp.setattr(scaled_adam, "_median_index", lambda period: 0),
                      [check_no_clipping_before_period]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_checks_catch_mutant(mutant, monkeypatch):
    apply, checks = MUTANTS[mutant]
    apply(monkeypatch)
    for check in checks:
        with pytest.raises(AssertionError):
            check()
