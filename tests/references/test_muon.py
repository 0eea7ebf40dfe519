"""Hand-computed checks of reference/muon.py (pure NumPy).

On a matrix whose singular vectors are known (rank one, or diagonal), Newton-Schulz acts on each
singular value s of the Frobenius-normalized input alone: s <- a*s + b*s**3 + c*s**5, k times.
"""

import math

import ml_dtypes
import numpy as np
import pytest

from optbench.reference import muon

ABC = (3.4445, -4.7750, 2.0315)


def hp(**kw):
    out = dict(lr=0.01, weight_decay=0.1, momentum=0.95, nesterov=True, ns_coefficients=ABC, eps=1e-7,
               ns_steps=5, adjust_lr_fn=None, dtype_eps=2.0**-52)
    out.update(kw)
    return out


def ns_scalar(s, steps=5, abc=ABC):
    a, b, c = abc
    for _ in range(steps):
        s = a * s + b * s**3 + c * s**5
    return s


def test_first_step_rank_one_by_hand():
    p, g = np.array([[1.0, -2.0]]), np.array([[3.0, 4.0]])  # one singular value, direction [0.6, 0.8]
    h = hp()
    new, state = muon.update(p, g, muon.init(p, h), h)
    np.testing.assert_allclose(state["momentum_buffer"], g, rtol=0, atol=0)  # B_1 = mu*0 + g
    ortho = ns_scalar(1.0) * np.array([[0.6, 0.8]])  # (g + mu*B_1) / ||.||_F has singular value 1
    np.testing.assert_allclose(new, p * (1 - 0.01 * 0.1) - 0.01 * ortho, rtol=1e-14)


@pytest.mark.parametrize("nesterov", [True, False])
def test_momentum_and_nesterov_second_step_on_diagonal(nesterov):
    mu = 0.9
    h = hp(momentum=mu, nesterov=nesterov, weight_decay=0.0, lr=1.0)
    p = np.zeros((2, 2))
    p1, s1 = muon.update(p, np.diag([1.0, 0.0]), muon.init(p, h), h)
    p2, s2 = muon.update(p1, np.diag([0.0, 2.0]), s1, h)
    np.testing.assert_allclose(s2["momentum_buffer"], np.diag([mu, 2.0]), rtol=1e-15)  # mu*B_1 + g_2
    d = np.array([mu * mu, 2.0 + 2.0 * mu]) if nesterov else np.array([mu, 2.0])  # g_2 + mu*B_2, or B_2
    d = d / np.linalg.norm(d)
    np.testing.assert_allclose(p2 - p1, -np.diag([ns_scalar(d[0]), ns_scalar(d[1])]), rtol=1e-13, atol=1e-15)


def test_adjust_lr_tall_wide_match_rms_and_eps_clamp():
    def step(shape, g_value, **kw):
        h = hp(weight_decay=0.0, lr=1.0, **kw)
        p = np.zeros(shape)
        new, _ = muon.update(p, np.full(shape, g_value), muon.init(p, h), h)
        return -new
    unit = ns_scalar(1.0) / 2.0  # a 4-vector of equal entries, normalized: entries 1/2, singular value 1
    np.testing.assert_allclose(step((4, 1), 1.0), math.sqrt(4.0) * unit, rtol=1e-14)  # tall: sqrt(rows/cols)
    np.testing.assert_allclose(step((1, 4), 1.0), 1.0 * unit, rtol=1e-14)  # wide: max(1, 1/4) = 1
    np.testing.assert_allclose(step((1, 4), 1.0, adjust_lr_fn="match_rms_adamw"), 0.2 * 2.0 * unit, rtol=1e-14)
    # input 1.95e-9 per entry, ||.||_F = 3.9e-9 < eps = 1e-7: divided by eps (the clamp), not by ||.|| + eps,
    # so the singular value entering NS is 3.9e-9 / 1e-7 = 0.039 instead of 1
    np.testing.assert_allclose(step((1, 4), 1e-9), ns_scalar(0.039) / 2.0 * np.ones((1, 4)), rtol=1e-12)


def test_size_zero_and_bfloat16_emulation():
    for shape in [(0, 4), (4, 0)]:
        p = np.zeros(shape)
        new, state = muon.update(p, np.zeros(shape), muon.init(p, hp()), hp())
        assert new.shape == shape and state["momentum_buffer"].shape == shape
    rng = np.random.default_rng(0)
    p, g = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    h = hp(weight_decay=0.0, lr=1.0, ns_compute_dtype="bfloat16")
    new, _ = muon.update(p, g, muon.init(p, h), h)
    ortho = (p - new) / math.sqrt(5 / 3)
    as_bf16 = ortho.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(ortho, as_bf16, rtol=1e-15, atol=0)  # NS result rounded to bfloat16
    exact, _ = muon.update(p, g, muon.init(p, h), dict(h, ns_compute_dtype="float64"))
    assert 0 < np.abs(new - exact).max() < 0.1 * np.abs(p - exact).max()
    _, state = muon.update(p, g, muon.init(p, h), dict(h, momentum_form="ema"))
    np.testing.assert_allclose(state["momentum_buffer"], 0.05 * g, rtol=1e-15)  # torch's code: lerp(0, g, 1-mu)
