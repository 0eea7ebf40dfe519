"""LAMB (You et al., ICLR 2020, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes",
arXiv:1904.00962, Algorithm 2), one trust ratio per parameter tensor (the paper's "layer"):

    m_t = b1 m + (1 - b1) g,   v_t = b2 v + (1 - b2) g^2,   m^ = m_t / (1 - b1^t),   v^ = v_t / (1 - b2^t)
    u_t = m^ / (sqrt(v^) + eps) + wd x,   x <- x - lr * phi(||x||) / ||u_t|| * u_t,   phi(z) = z

With wd = 0 and eps = 0 the ratio cancels any per-tensor factor of u_t (the bias corrections among them).

Options (defaults = the paper): lr 1e-3, betas (0.9, 0.999), eps 1e-6, weight_decay 0, maximize False;
bias_correction True (timm, apex); grad_averaging True (False: m = b1 m + g; apex, timm, pytorch-optimizer);
weight_decouple False (pytorch-optimizer's True: x <- x (1 - lr wd) first, wd left out of u_t);
clamp_value None (torch-optimizer: phi(z) = min(z, clamp_value)); trust_clip False (timm: ratio capped at 1);
always_adapt True (timm's default False: ratio 1 in a group with wd = 0); adam False (ratio 1 always);
trust_ratio_eps False (pytorch-optimizer's True: phi(||x||) / (||u_t|| + eps)).

Where the paper is silent or implementations differ:
* ||x|| = 0 or ||u_t|| = 0: the paper is silent (phi(0) = 0 would freeze zero-initialised tensors); the authors'
  TF code, timm, apex and pytorch-optimizer use ratio 1, as here.
* Bias correction is in Algorithm 2 of the final version; v3 had none, nor do torch-optimizer (``debias`` False)
  and pytorch-optimizer by default.
* phi: the analysis takes a bounded phi = min(max(z, gamma_l), gamma_u); the authors' TF code uses phi(z) = z.
  pytorch-optimizer always clamps ||x|| at 10 (a class constant), divides by ||u_t|| + eps and, unless given
  ``adam_debias``, divides the step by 1 - b1^t after the ratio (its bias corrections are otherwise off).
* Global gradient clipping / pre-normalisation (timm and apex ``max_grad_norm``, pytorch-optimizer ``pre_norm``)
  couples a group's tensors: not modelled (ignored). Nor is apex's L2 mode (``adam_w_mode=False``).
* ``step`` counts this tensor's updates; timm, apex and pytorch-optimizer count per group.
"""

import numpy as np

# x * x underflows float32 (torch's accumulation for float32 and narrower) below this, so a norm that small may
# round to 0 there: declared at its decision.
_UNDERFLOW = float(np.sqrt(np.finfo(np.float32).tiny))


def init(param: np.ndarray, hp: dict) -> dict:
    return {"step": np.float64(0.0), "exp_avg": np.zeros_like(param), "exp_avg_sq": np.zeros_like(param)}


def _direction(param, grad, state, hp):
    """The decayed weights x, the update direction u_t, the magnitude u_t's rounding scales with, new state."""
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay = hp.get("weight_decay", 0.0)
    decouple = hp.get("weight_decouple", False)
    g = -grad if hp.get("maximize", False) else grad
    step = state["step"] + 1.0
    x = param * (1.0 - lr * weight_decay) if weight_decay != 0 and decouple else param

    averaging = 1.0 - beta1 if hp.get("grad_averaging", True) else 1.0
    exp_avg = beta1 * state["exp_avg"] + averaging * g
    exp_avg_sq = beta2 * state["exp_avg_sq"] + (1.0 - beta2) * g * g
    new_state = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}

    bc1, bc2 = (1.0 - beta1**step, 1.0 - beta2**step) if hp.get("bias_correction", True) else (1.0, 1.0)
    denom = np.sqrt(exp_avg_sq / bc2) + eps
    u = (exp_avg / bc1) / denom
    rounding = (beta1 * np.abs(state["exp_avg"]) + averaging * np.abs(g)) / bc1 / denom
    if weight_decay != 0 and not decouple:
        u = u + weight_decay * x
        rounding = rounding + weight_decay * np.abs(x)
    return x, u, rounding, new_state


def _adapts(hp) -> bool:
    return not hp.get("adam", False) and (hp.get("always_adapt", True) or hp.get("weight_decay", 0.0) != 0)


def _norm(a: np.ndarray) -> np.float64:
    return np.float64(np.linalg.norm(a.reshape(-1)))


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    x, u, _, new_state = _direction(param, grad, state, hp)
    ratio = 1.0
    if _adapts(hp):
        weight_norm, update_norm = _norm(x), _norm(u)
        clamp_value = hp.get("clamp_value")
        phi = weight_norm if clamp_value is None else min(weight_norm, clamp_value)
        if weight_norm > 0 and update_norm > 0:
            ratio = phi / (update_norm + (hp["eps"] if hp.get("trust_ratio_eps", False) else 0.0))
        if hp.get("trust_clip", False):
            ratio = min(ratio, 1.0)
    return x - hp["lr"] * ratio * u, new_state


def decisions(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> list:
    """The trust ratio's branches: ||x|| or ||u_t|| at 0 (for ||u_t|| by cancellation in m or in r + wd x, or by
    underflow; ||x|| only by underflow), and the clamps of phi (clamp_value) and of the ratio (trust_clip)."""
    if not _adapts(hp):
        return []
    x, u, rounding, _ = _direction(param, grad, state, hp)
    weight_norm, update_norm = _norm(x), _norm(u)
    underflow = _UNDERFLOW / hp.get("dtype_eps", 2.0**-52)
    out = [(weight_norm, underflow), (update_norm, _norm(rounding) + underflow)]
    clamp_value = hp.get("clamp_value")
    if clamp_value is not None:
        out.append((weight_norm - clamp_value, weight_norm))
    if hp.get("trust_clip", False) and weight_norm > 0 and update_norm > 0:
        ratio = ((weight_norm if clamp_value is None else min(weight_norm, clamp_value))
                 / (update_norm + (hp["eps"] if hp.get("trust_ratio_eps", False) else 0.0)))
        out.append((ratio - 1.0, ratio))
    return out
