"""Adafactor (Shazeer & Stern 2018, arXiv:1804.04235) as fairseq's and Hugging Face's
``transformers.optimization.Adafactor`` document it (not torch.optim.Adafactor: see ``adafactor``).

At step t = 1, 2, ... with gradient G for parameter X (RMS(A) = ||A||_2 / sqrt(numel A)):

    rho_t   = min(1e-6 t if warmup_init else 1e-2, 1 / sqrt(t))  if relative_step  else lr
    alpha_t = max(eps2, RMS(X_{t-1})) rho_t  if scale_parameter  else rho_t      (RMS kept in state "RMS")
    beta2_t = 1 - t**decay_rate
    S       = G**2 + eps1
    X >= 2-D, factored over the last two dims (rows n, columns m):
        R_t = beta2_t R_{t-1} + (1 - beta2_t) mean_cols(S)     ("exp_avg_sq_row", shape [..., n])
        C_t = beta2_t C_{t-1} + (1 - beta2_t) mean_rows(S)     ("exp_avg_sq_col", shape [..., m])
        U   = G / sqrt(R_t[..., :, None] C_t[..., None, :] / mean(R_t))   (mean over the n rows)
    otherwise V_t = beta2_t V_{t-1} + (1 - beta2_t) S ("exp_avg_sq"), U = G / sqrt(V_t)
    U      <- alpha_t U / max(1, RMS(U) / clip_threshold)
    with beta1:  M_t = beta1 M_{t-1} + (1 - beta1) U ("exp_avg"),  U <- M_t
    X_t     = X_{t-1} - weight_decay alpha_t X_{t-1} - U

Options and defaults (transformers): lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8,
beta1=None, weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False.
State: ``step`` (np.float64), ``exp_avg_sq_row`` / ``exp_avg_sq_col`` or ``exp_avg_sq``, ``exp_avg`` (beta1
not None), ``RMS`` (np.float64: RMS of the parameter before this step, 0 before the first).

Where the sources are silent or differ (this reference follows transformers):
* The paper sums R and C over rows/columns and divides by the sum of R; the means used here give the same
  estimate. Its momentum, clipping (d = 1), eps1 inside S and alpha_t are as above; the paper has no weight
  decay, no warmup_init (1e-6 t is tensor2tensor's) and no first-moment option in its main algorithm.
* Weight decay: transformers shrinks by weight_decay * alpha_t (the relative, parameter-scaled step);
  fairseq's code writes alpha_t back into group["lr"] and shrinks by that; torch.optim.Adafactor decays by
  lr * weight_decay with its plain lr, puts eps1 on the row mean and variance instead of on G**2, and
  defaults eps1 to the dtype's eps.
* The first moment averages the already clipped, lr-scaled update (so its state is in parameter units).
* lr is ignored when relative_step (both libraries refuse lr with relative_step); relative_step=False needs
  lr. Empty tensors: RMS = 0/0 = NaN and an empty axis' mean is NaN (both libraries do the same); the NaN
  only reaches state (RMS, and exp_avg_sq_col of a (0, m) parameter), never a parameter element.
* ``group_step`` (off by default): t is the param group's count of step() calls (``hp["iteration"]`` where the
  harness gives it), advanced whether or not this tensor had a gradient; pytorch-optimizer's AdaFactor.
* ``decisions``: the clip max(1, RMS(U)/clip_threshold) and the scale max(eps2, RMS(X)). The rho min is not
  one: t is an exact integer and both branches are Python doubles, equal where they cross.
"""

import numpy as np


def _rms(x: np.ndarray) -> float:
    with np.errstate(invalid="ignore"):
        return float(np.sqrt(np.sum(x * x)) / np.sqrt(x.size))  # 0/0 = NaN for an empty tensor, as torch


def _mean(x: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    return np.sum(x, axis=axis, keepdims=keepdims) / x.shape[axis]  # over an empty axis 0/0 = NaN, as torch


def init(param: np.ndarray, hp: dict) -> dict:
    state = {"step": np.float64(0.0)}
    if hp.get("beta1") is not None:
        state["exp_avg"] = np.zeros_like(param, dtype=np.float64)
    if param.ndim >= 2:
        state["exp_avg_sq_row"] = np.zeros(param.shape[:-1])
        state["exp_avg_sq_col"] = np.zeros(param.shape[:-2] + param.shape[-1:])
    else:
        state["exp_avg_sq"] = np.zeros_like(param, dtype=np.float64)
    state["RMS"] = np.float64(0.0)
    return state


def _step_size(t: float, param_rms: float, hp: dict) -> float:
    if hp.get("relative_step", True):
        rho = min(1e-6 * t if hp.get("warmup_init", False) else 1e-2, 1.0 / np.sqrt(t))
    elif hp.get("lr") is None:
        raise ValueError("Adafactor with relative_step=False needs an external lr")
    else:
        rho = hp["lr"]
    if hp.get("scale_parameter", True):
        return max(hp["eps"][1], param_rms) * rho  # Python max: a NaN RMS (empty tensor) gives eps2
    return rho


def _t(state: dict, hp: dict) -> float:
    """This step's t: the tensor's own count, or with ``group_step`` its group's count of step() calls."""
    if hp.get("group_step", False) and "iteration" in hp:
        return float(hp["iteration"])
    return float(state["step"]) + 1.0


def _normalized(grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    """U = G / sqrt(V_hat) before clipping, and the new second-moment state."""
    t = _t(state, hp)
    beta2t = 1.0 - t ** hp.get("decay_rate", -0.8)
    s = grad * grad + hp["eps"][0]
    with np.errstate(invalid="ignore", divide="ignore"):  # means over an empty axis: NaN
        if grad.ndim >= 2:
            row = beta2t * state["exp_avg_sq_row"] + (1.0 - beta2t) * _mean(s, -1)
            col = beta2t * state["exp_avg_sq_col"] + (1.0 - beta2t) * _mean(s, -2)
            v_hat = (row / _mean(row, -1, keepdims=True))[..., :, None] * col[..., None, :]
            return grad / np.sqrt(v_hat), {"exp_avg_sq_row": np.asarray(row), "exp_avg_sq_col": np.asarray(col)}
        v = beta2t * state["exp_avg_sq"] + (1.0 - beta2t) * s
        return np.asarray(grad / np.sqrt(v)), {"exp_avg_sq": np.asarray(v)}


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    t = _t(state, hp)
    param_rms = _rms(param)
    alpha = _step_size(t, param_rms, hp)
    u, new_state = _normalized(grad, state, hp)
    with np.errstate(invalid="ignore"):
        u = alpha * (u / np.maximum(1.0, _rms(u) / hp.get("clip_threshold", 1.0)))
    beta1 = hp.get("beta1")
    if beta1 is not None:
        u = np.asarray(beta1 * state["exp_avg"] + (1.0 - beta1) * u)
        new_state["exp_avg"] = u
    weight_decay = hp.get("weight_decay", 0.0)
    new_param = param - weight_decay * alpha * param if weight_decay != 0 else param
    new_state.update(step=np.float64(t), RMS=np.float64(param_rms))
    return np.asarray(new_param - u), new_state


def decisions(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """The clip's max(1, RMS(U)/clip_threshold) and, with scale_parameter, max(eps2, RMS(X)): (value, scale)."""
    u, _ = _normalized(grad, state, hp)
    ratio = _rms(u) / hp.get("clip_threshold", 1.0)
    out = [(np.asarray(ratio - 1.0), np.asarray(ratio))]
    if hp.get("scale_parameter", True):
        param_rms = _rms(param)
        out.append((np.asarray(param_rms - hp["eps"][1]), np.asarray(param_rms)))
    return out
