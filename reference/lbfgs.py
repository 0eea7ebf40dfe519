"""L-BFGS as torch.optim.LBFGS documents and implements it (minFunc-style), on the group's flat vector.

Per step up to max_iter two-loop iterations (H_diag = y.s / y.y; a pair kept only if y.s > 1e-10; oldest of
history_size dropped); first-ever step min(1, 1/|g|_1) * lr, then lr; a fixed step (not re-evaluated after the
last iteration) or torch's strong Wolfe search (c1=1e-4, c2=0.9, cubic zoom, max_eval - evals tries; its bracket
test uses 1e-9, not tolerance_change, as torch's does). max_eval=None is max_iter * 5 // 4. Returns the first loss.
"""

from __future__ import annotations

import numpy as np

KIND = "closure"
C1, C2, LS_TOLERANCE_CHANGE = 1e-4, 0.9, 1e-9


def init(x: np.ndarray, hp: dict) -> dict:
    return {"func_evals": 0, "n_iter": 0}


def _amax(v: np.ndarray) -> float:
    return float(np.max(np.abs(v))) if v.size else 0.0


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """Minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to ``bounds`` (default: [x1, x2])."""
    x1, f1, g1, x2, f2, g2 = (np.float64(v) for v in (x1, f1, g1, x2, f2, g2))
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    with np.errstate(all="ignore"):
        d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
        d2_square = d1 * d1 - g1 * g2
        if not d2_square >= 0:
            return (lo + hi) / 2.0
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, lo), hi)  # Python min/max: a NaN min_pos propagates as in torch


def _strong_wolfe(evaluate, t, d, f, g, gtd, max_ls):
    """Line search along ``d`` from step ``t``: returns (f, g, t, evaluations)."""
    d_norm = _amax(d)
    f_new, g_new = evaluate(t)
    evals, gtd_new = 1, float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, ls_iter = False, 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while ls_iter < max_ls:  # bracketing phase
        if f_new > f + C1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -C2 * gtd:
            bracket, bracket_f, bracket_g, done = [t], [f_new], [g_new], True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals, gtd_new, ls_iter = evals + 1, float(g_new @ d), ls_iter + 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:  # zoom phase
        if abs(bracket[1] - bracket[0]) * d_norm < LS_TOLERANCE_CHANGE:
            break
        t = _cubic_min(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        b_lo, b_hi = min(bracket), max(bracket)
        eps = 0.1 * (b_hi - b_lo)
        if min(b_hi - t, t - b_lo) < eps:  # too close to an end: move 0.1 of the bracket inside
            if insuf_progress or t >= b_hi or t <= b_lo:
                t = b_hi - eps if abs(t - b_hi) < abs(t - b_lo) else b_lo + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = evaluate(t)
        evals, gtd_new, ls_iter = evals + 1, float(g_new @ d), ls_iter + 1
        if f_new > f + C1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -C2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = (
                    bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low])
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


def _direction(g, state, history_size) -> np.ndarray:
    """The two-loop recursion: -H g with the stored pairs (y = old_dirs, s = old_stps) and H_diag."""
    old_dirs, old_stps, ro, al = state["old_dirs"], state["old_stps"], state["ro"], state["al"]
    q = -g
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = float(old_stps[i] @ q) * ro[i]
        q = q - al[i] * old_dirs[i]
    r = q * state["H_diag"]
    for i in range(len(old_dirs)):
        be_i = float(old_dirs[i] @ r) * ro[i]
        r = r + (al[i] - be_i) * old_stps[i]
    return r


def step(x: np.ndarray, objective, state: dict, hp: dict):
    lr, max_iter, max_eval = float(hp["lr"]), hp["max_iter"], hp.get("max_eval")
    max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
    tolerance_grad, tolerance_change = hp["tolerance_grad"], hp["tolerance_change"]
    history_size, line_search_fn = hp["history_size"], hp["line_search_fn"]
    if line_search_fn not in (None, "strong_wolfe"):
        raise RuntimeError("only 'strong_wolfe' is supported")
    sign = -1.0 if hp.get("maximize") else 1.0  # maximize (torch >= 2.14): minimize -f, gradient -g
    if sign < 0:
        maximized = objective
        objective = lambda v: tuple(-a for a in maximized(v))  # noqa: E731
    state = dict(state)
    for key in ("old_dirs", "old_stps", "ro", "al"):
        if key in state:
            state[key] = list(state[key])

    orig_loss, flat_grad = objective(x)
    loss, current_evals = orig_loss, 1
    state["func_evals"] += 1
    if _amax(flat_grad) <= tolerance_grad:
        return x, state, sign * orig_loss

    d, t = state.get("d"), state.get("t")
    prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        state["n_iter"] += 1
        if state["n_iter"] == 1:
            d = -flat_grad
            state.update(old_dirs=[], old_stps=[], ro=[], H_diag=1.0)
        else:
            y, s = flat_grad - prev_flat_grad, d * t
            ys = float(y @ s)
            if ys > 1e-10:  # keep the curvature pair
                if len(state["old_dirs"]) == history_size:
                    for key in ("old_dirs", "old_stps", "ro"):
                        state[key].pop(0)
                state["old_dirs"].append(y)
                state["old_stps"].append(s)
                state["ro"].append(1.0 / ys)
                state["H_diag"] = ys / float(y @ y)
            state.setdefault("al", [None] * history_size)
            d = _direction(flat_grad, state, history_size)
        prev_flat_grad, prev_loss = flat_grad.copy(), loss

        t = min(1.0, 1.0 / float(np.sum(np.abs(flat_grad)))) * lr if state["n_iter"] == 1 else lr
        gtd = float(flat_grad @ d)
        if gtd > -tolerance_change:
            break

        ls_func_evals = 0
        if line_search_fn is not None:
            base = x
            loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                lambda step_t: objective(base + step_t * d), t, d, loss, flat_grad, gtd, max_eval - current_evals)
            x = x + t * d
            opt_cond = _amax(flat_grad) <= tolerance_grad
        else:
            x = x + t * d
            if n_iter != max_iter:  # no re-evaluation after the last iteration
                loss, flat_grad = objective(x)
                opt_cond = _amax(flat_grad) <= tolerance_grad
                ls_func_evals = 1
        current_evals += ls_func_evals
        state["func_evals"] += ls_func_evals

        if n_iter == max_iter or current_evals >= max_eval or opt_cond:
            break
        if _amax(d * t) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
            break

    state.update(d=d, t=float(t), prev_flat_grad=prev_flat_grad, prev_loss=float(prev_loss))
    state["H_diag"] = float(state["H_diag"])
    return x, state, sign * orig_loss  # the closure's own loss, as torch returns it
