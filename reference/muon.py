"""Muon as torch.optim.Muon documents it: B_t = mu*B_{t-1} + g_t, O_t = NS_k(g_t + mu*B_t or B_t; eps),
theta <- theta*(1 - lr*wd) - AdjustLR(lr)*O_t, "original" sqrt(max(1, rows/cols)), "match_rms_adamw" 0.2*sqrt(max).
NS as torch's code: transpose if rows > cols, X /= max(||X||_F, eps), k times X <- a*X + (b*A + c*A@A) @ X, A = X@X.T.
Surprises: torch's code keeps an EMA (lerp by 1-mu), so its momentum_buffer is (1-mu)*B_t, and runs NS in bfloat16.
Reference-only hp to emulate torch: ns_compute_dtype "float64" (default) | "bfloat16" (rounds where torch stores bf16);
momentum_form "documented" (default) | "ema". A (n, 0) parameter is only decayed (torch divides by zero there).
"""

import math

import ml_dtypes
import numpy as np

DEFAULT_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def _bf16(x):
    return np.asarray(x, dtype=np.float64).astype(ml_dtypes.bfloat16).astype(np.float64)


def _newton_schulz(x: np.ndarray, coefficients, steps: int, eps: float, compute_dtype: str) -> np.ndarray:
    a, b, c = coefficients
    rnd = _bf16 if compute_dtype == "bfloat16" else (lambda v: np.asarray(v, dtype=np.float64))
    tall = x.shape[0] > x.shape[1]
    x = rnd(x.T if tall else x)
    norm = rnd(np.sqrt(np.sum(x * x)))
    x = rnd(x / rnd(max(float(norm), eps)))
    for _ in range(steps):
        gram = rnd(x @ x.T)
        gram_update = rnd(b * gram + c * (gram @ gram))
        x = rnd(a * x + gram_update @ x)
    return x.T if tall else x


def _adjust_lr(lr: float, adjust_lr_fn, shape) -> float:
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    if adjust_lr_fn == "spectral_unclamped":  # torch >= 2.14: Bernstein's sqrt(fan_out / fan_in), not clamped at 1
        return lr * math.sqrt(rows / cols)
    return lr


def init(param: np.ndarray, hp: dict) -> dict:
    return {"momentum_buffer": np.zeros_like(param)}


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    if param.ndim != 2:
        raise ValueError(f"Muon only supports 2D parameters, got shape {param.shape}")
    lr, weight_decay, mu = hp["lr"], hp.get("weight_decay", 0.1), hp.get("momentum", 0.95)
    nesterov = hp.get("nesterov", True)
    ema = hp.get("momentum_form", "documented") == "ema"

    buf = state["momentum_buffer"]
    if ema:  # torch's code: B <- lerp(B, g, 1 - mu); Nesterov input lerp(g, B, mu)
        buf = buf + (grad - buf) * (1.0 - mu)
        direction = grad + (buf - grad) * mu if nesterov else buf
    else:
        buf = mu * buf + grad
        direction = grad + mu * buf if nesterov else buf
    new_state = {"momentum_buffer": buf}

    param = param * (1.0 - lr * weight_decay)
    if param.size == 0:
        return param, new_state
    ortho = _newton_schulz(direction, hp.get("ns_coefficients", DEFAULT_NS_COEFFICIENTS), hp.get("ns_steps", 5),
                           hp.get("eps", 1e-7), hp.get("ns_compute_dtype", "float64"))
    return param - _adjust_lr(lr, hp.get("adjust_lr_fn"), param.shape) * ortho, new_state
