"""RMSprop (Hinton's lecture notes; centered: Graves, 2013) as torch.optim.RMSprop documents it.

v <- alpha * v + (1 - alpha) * g**2 (g with L2 weight decay added, negated under maximize);
centered: g_ave <- lerp(g_ave, g, 1 - alpha) and v~ = v - g_ave**2; denom = sqrt(v~) + eps
(eps outside the sqrt); with momentum > 0: b <- momentum * b + g / denom and param -= lr * b.
State as torch keeps it: ``momentum_buffer`` only if momentum > 0, ``grad_avg`` only if centered.
``g + weight_decay * param`` and ``param - lr * update`` are rounded once (as torch's fused add), since the
first cancels when grad ~ -weight_decay * param and momentum_buffer (O(1/sqrt(1 - alpha))) exposes it.
"""

import numpy as np

_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitting constant


def _two_product(a, b):
    """p, e with a * b == p + e exactly (Dekker), for finite a * b."""
    p = a * b
    ca, cb = _SPLIT * a, _SPLIT * b
    a_hi, b_hi = ca - (ca - a), cb - (cb - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _fma(a, b, c):
    """a * b + c with (nearly) a single rounding, error-free transformations in float64."""
    a, b, c = np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64)
    p, e = _two_product(a, b)
    s = p + c
    bp = s - p
    t = (p - (s - bp)) + (c - bp)  # p + c == s + t exactly (Knuth's TwoSum)
    out = s + (t + e)
    return np.where(np.isfinite(out), out, p + c)


def init(param: np.ndarray, hp: dict) -> dict:
    state = {"step": np.float64(0.0), "square_avg": np.zeros_like(param)}
    if hp.get("momentum", 0.0) > 0:
        state["momentum_buffer"] = np.zeros_like(param)
    if hp.get("centered", False):
        state["grad_avg"] = np.zeros_like(param)
    return state


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, alpha, eps = float(hp["lr"]), hp.get("alpha", 0.99), hp.get("eps", 1e-8)
    weight_decay, momentum = hp.get("weight_decay", 0.0), hp.get("momentum", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    if weight_decay != 0:
        g = _fma(weight_decay, param, g)

    square_avg = state["square_avg"] * alpha + (1.0 - alpha) * g * g
    new_state = {"step": state["step"] + 1.0, "square_avg": square_avg}
    if hp.get("centered", False):
        grad_avg = state["grad_avg"] + (g - state["grad_avg"]) * (1.0 - alpha)
        new_state["grad_avg"] = grad_avg
        avg = np.sqrt(square_avg - grad_avg * grad_avg) + eps
    else:
        avg = np.sqrt(square_avg) + eps

    if momentum > 0:
        buf = state["momentum_buffer"] * momentum + g / avg
        new_state["momentum_buffer"] = buf
        return _fma(-lr, buf, param), new_state
    return _fma(-lr, g / avg, param), new_state
