"""Hand-computed checks of the L-BFGS reference (pure NumPy)."""

import numpy as np
import pytest

from optbench.reference import lbfgs

HP = {"lr": 1.0, "max_iter": 20, "max_eval": None, "tolerance_grad": 1e-7, "tolerance_change": 1e-9,
      "history_size": 100, "line_search_fn": None, "dtype_eps": 2.0**-52}


def quadratic(a):
    """f = 1/2 sum a x^2 (flat x) as the reference's objective."""
    a = np.asarray(a, dtype=np.float64)
    return lambda x: (float(0.5 * np.sum(a * x * x)), a * x)


def test_one_dimensional_quadratic_by_hand():
    # f = x^2 / 8 from x = 16: g = 4, first step t = min(1, 1/4) = 1/4 -> x = 15 (g = 15/4, f = 28.125);
    # then y = -1/4, s = -1, H_diag = y.s / y.y = 4, d = -4 * 15/4 = -15, t = lr = 1 -> x = 0, g = 0: done.
    x, state, loss = lbfgs.step(np.array([16.0]), quadratic([0.25]), lbfgs.init(np.array([16.0]), HP), HP)
    assert loss == 32.0 and x[0] == 0.0
    assert state["n_iter"] == 2 and state["func_evals"] == 3
    assert state["t"] == 1.0 and state["H_diag"] == 4.0 and state["prev_loss"] == 28.125
    np.testing.assert_array_equal(state["d"], [-15.0])
    np.testing.assert_array_equal(state["prev_flat_grad"], [3.75])


def test_strong_wolfe_extrapolates_then_takes_the_secant_step():
    # Same f, x = 16. Trial t = 1/4 (x = 15): |g.d| = 15 > 0.9 * 16, so extrapolate: the cubic through a
    # quadratic is exact (t* = 4) but is clamped to 10 * 1/4 = 2.5 -> x = 6, |g.d| = 6 <= 14.4: accept.
    # Iteration 2: H_diag = 25 / 6.25 = 4, d = -6, trial t = 1 lands on 0 (Wolfe holds), g = 0: done.
    hp = {**HP, "line_search_fn": "strong_wolfe"}
    x, state, _ = lbfgs.step(np.array([16.0]), quadratic([0.25]), lbfgs.init(np.array([16.0]), hp), hp)
    assert x[0] == 0.0 and state["n_iter"] == 2 and state["func_evals"] == 4
    assert state["t"] == 1.0 and state["H_diag"] == 4.0 and state["prev_loss"] == 4.5
    np.testing.assert_array_equal(state["d"], [-6.0])


@pytest.mark.parametrize("history_size", [1, 2, 100])
def test_two_loop_recursion_equals_the_dense_bfgs_update(history_size):
    # Dense L-BFGS: H = H_diag I, then for each kept pair, oldest first,
    # H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T; d = -H g. Fixed steps of lr = 0.5.
    a = np.array([1.0, 2.0, 4.0, 0.5])
    f = quadratic(a)
    hp = {**HP, "lr": 0.5, "max_iter": 4, "history_size": history_size}
    x0 = np.array([1.0, -2.0, 0.5, 3.0])
    x_ref, state, _ = lbfgs.step(x0, f, lbfgs.init(x0, hp), hp)

    x, pairs, eye = x0.copy(), [], np.eye(4)
    g = a * x
    d, t = -g, min(1.0, 1.0 / np.abs(g).sum()) * 0.5
    for it in range(4):
        if it > 0:
            g_new = a * x
            s, y = t * d, g_new - g
            pairs = (pairs + [(s, y)])[-history_size:]
            g, t = g_new, 0.5
            h = pairs[-1][0] @ pairs[-1][1] / (pairs[-1][1] @ pairs[-1][1]) * eye
            for s_i, y_i in pairs:
                rho = 1.0 / (y_i @ s_i)
                h = (eye - rho * np.outer(s_i, y_i)) @ h @ (eye - rho * np.outer(y_i, s_i)) + rho * np.outer(s_i, s_i)
            d = -h @ g
        x = x + t * d
    np.testing.assert_allclose(x_ref, x, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(state["d"], d, rtol=1e-13, atol=1e-15)
    assert state["n_iter"] == 4 and state["func_evals"] == 4  # no evaluation after the last iteration


def test_flat_curvature_rejects_pairs_and_edge_cases():
    # A linear f = c.x has y = 0, so y.s = 0 <= 1e-10: no pair is kept, H_diag stays 1, d = -c each time;
    # max_eval defaults to 3 * 5 // 4 = 3 evaluations, reached after two iterations.
    c = np.array([0.5, -1.0, 2.0])
    hp = {**HP, "lr": 0.25, "max_iter": 3}
    x0 = np.zeros(3)
    state0 = lbfgs.init(x0, hp)
    x, state, _ = lbfgs.step(x0, lambda x: (float(c @ x), c.copy()), state0, hp)
    np.testing.assert_array_equal(x, -(0.25 / 3.5 + 0.25) * c)  # first t = 1/|c|_1 * lr, then lr
    assert state["H_diag"] == 1.0 and state["old_dirs"] == [] and state["func_evals"] == 3 and state["n_iter"] == 2
    assert np.array_equal(x0, np.zeros(3)) and state0 == {"func_evals": 0, "n_iter": 0}  # inputs untouched
    # A size-0 group: the gradient's max is 0 <= tolerance_grad, so the step only counts the evaluation.
    empty = np.zeros(0)
    x, state, loss = lbfgs.step(empty, lambda x: (0.0, np.zeros(0)), lbfgs.init(empty, HP), HP)
    assert x.shape == (0,) and loss == 0.0 and state == {"func_evals": 1, "n_iter": 0}
