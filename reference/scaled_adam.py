"""ScaledAdam (Povey, icefall) as optbench specifies it from the documented algorithm (docs/scaled_adam.md).

A group-coupled reference (``KIND = "group"``): one call steps a whole param group, because the
gradient clipping factor c uses the group's norm. With t the steps taken before this one:

* clipping (clipping_scale set, t > 0): tot_norm = sqrt(sum over tensors of |grad * param_rms|^2 + sum
  over scalars of grad^2) (param_rms as stored) goes to model_norms[t % P]; when t % P == 0 the threshold
  becomes clipping_scale * sorted(model_norms)[min(P - 1, P // 4 * 2)]; from t >= P,
  c = min(1, threshold / (tot_norm + 1e-20)). Every parameter is stepped with g = c * grad.
* tensor (numel > 1): delta *= beta1; scale_grads[t % K] = sum(p * g); at t % K == K - 1 param_rms =
  rms(p) and, for t > 0, the log-scale step (Adam on scale_grads with beta2**K, bias-corrected by
  (t + 1) // K size steps; 0 below param_min_rms, -lr * scalar_lr_scale * K above param_max_rms) adds
  (1 - beta1) * scale_step * p to delta; then exp_avg_sq (bias-corrected only while 1 - beta2**(t+1) < 0.99)
  and delta -= lr * (1 - beta1) * max(param_rms, param_min_rms) * g / (sqrt(v) + eps); p += delta.
* scalar (numel == 1, any shape): delta = beta1 * delta - lr * scalar_lr_scale * (1 - beta1) * g /
  (sqrt(v_hat) + eps), p = clip(p + delta, -scalar_max, scalar_max); delta itself is not clipped.
* numel == 0: untouched, no state. No first-moment bias correction, no weight decay, no maximize.

Choices: a None gradient is a zero gradient (BatchedOptimizer stacks zeros). ``step`` is an integer per
parameter (each parameter's formulas use its own); the group's step count lives in the private
``clipping`` dict ({"step", "model_norms", "threshold", "num_clipped"}) of the group's first name, created
at the group's first step and kept whether or not clipping_scale is set (a zero-size first name then
holds only that dict).

``error_scale`` (private, a dict) tells the harness what the rounding of the two state tensors built from
the cancelling sum ``sum(p * g)`` scales with: the sum of the terms' magnitudes, as for any summation, and
that propagated through the squares' moving average. The harness measures their errors against it
(trajectory.py, docs/tolerances.md).
"""

import numpy as np

KIND = "group"


def init(param: np.ndarray, hp: dict) -> dict:
    if param.size == 0:
        return {}
    state = {"step": np.int64(0), "delta": np.zeros(param.shape), "exp_avg_sq": np.zeros(param.shape)}
    if param.size > 1:
        state["param_rms"] = np.array(np.sqrt(np.mean(np.square(param, dtype=np.float64))))
        state["scale_exp_avg_sq"] = np.zeros(())
        state["scale_grads"] = np.zeros(int(hp["size_update_period"]))
    return state


def _is_size_step(t: int, size_update_period: int) -> bool:
    """Whether step t (steps taken before it) refreshes param_rms (and, for t > 0, updates the size)."""
    return t % size_update_period == size_update_period - 1


def _median_index(period: int) -> int:
    """The index into sorted(model_norms) the threshold is taken at (the original's "median")."""
    return min(period - 1, (period // 4) * 2)


def _clipping_factor(params: dict, grads: dict, states: dict, clipping: dict, hp: dict) -> tuple[float, dict]:
    """c for this step and the updated clipping dict (its ``step`` not yet advanced)."""
    clipping_scale, t = hp["clipping_scale"], clipping["step"]
    if clipping_scale is None or t == 0:
        return 1.0, clipping
    period = int(hp["clipping_update_period"])
    sumsq = 0.0
    for name, p in params.items():
        g = grads[name]
        if p.size == 0:
            continue
        if p.size == 1:
            sumsq += float(np.sum(g * g))
        else:
            sumsq += float(np.sum((g * (states.get(name) or init(p, hp))["param_rms"]) ** 2))
    tot_norm = float(np.sqrt(sumsq))
    model_norms = np.array(clipping["model_norms"], dtype=np.float64)
    model_norms[t % period] = tot_norm
    threshold, num_clipped = clipping["threshold"], clipping["num_clipped"]
    if t % period == 0:
        threshold = float(clipping_scale * np.sort(model_norms)[_median_index(period)])
        num_clipped = 0
    c = 1.0
    if t >= period:
        c = min(1.0, threshold / (tot_norm + 1e-20))
        if c < 1.0:
            num_clipped += 1
    return c, {**clipping, "model_norms": model_norms, "threshold": threshold, "num_clipped": num_clipped}


def _step_tensor(p: np.ndarray, g: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    scalar_lr_scale, min_rms, max_rms = hp["scalar_lr_scale"], hp["param_min_rms"], hp["param_max_rms"]
    size_update_period = int(hp["size_update_period"])
    t = int(state["step"])

    delta = beta1 * state["delta"]
    scale_grads = np.array(state["scale_grads"], dtype=np.float64)
    scale_grads[t % size_update_period] = np.sum(p * g)
    # scale_grads is a sum of terms that cancel: its rounding scales with the sum of their magnitudes, not
    # with its value, and so does that of scale_exp_avg_sq, built from its squares (error_scale, private)
    terms = np.array(state.get("error_scale", {}).get("terms", np.zeros(size_update_period)), dtype=np.float64)
    terms[t % size_update_period] = np.sum(np.abs(p * g))
    sea_scale = float(state.get("error_scale", {}).get("scale_exp_avg_sq", 0.0))
    param_rms, scale_exp_avg_sq = np.float64(state["param_rms"]), np.float64(state["scale_exp_avg_sq"])
    if _is_size_step(t, size_update_period):
        param_rms = np.sqrt(np.mean(p * p))
        if t > 0:
            beta2_corr = beta2**size_update_period
            scale_exp_avg_sq = beta2_corr * scale_exp_avg_sq + (1.0 - beta2_corr) * np.mean(scale_grads**2)
            sea_scale = beta2_corr * sea_scale + (1.0 - beta2_corr) * np.mean(2.0 * np.abs(scale_grads) * terms)
            size_step = (t + 1) // size_update_period
            bias_correction = 1.0 - beta2_corr**size_step
            scale_step = (-lr * scalar_lr_scale * np.sqrt(bias_correction) * np.sum(scale_grads)
                          / (np.sqrt(scale_exp_avg_sq) + eps))
            if param_rms < min_rms:
                scale_step = 0.0
            if param_rms > max_rms:
                scale_step = -lr * scalar_lr_scale * size_update_period
            delta = delta + (1.0 - beta1) * scale_step * p

    exp_avg_sq = beta2 * state["exp_avg_sq"] + (1.0 - beta2) * g * g
    bias_correction2 = 1.0 - beta2 ** (t + 1)
    v = exp_avg_sq / bias_correction2 if bias_correction2 < 0.99 else exp_avg_sq
    delta = delta - lr * (1.0 - beta1) * max(param_rms, min_rms) * g / (np.sqrt(v) + eps)
    new_state = {"step": np.int64(t + 1), "delta": delta, "exp_avg_sq": exp_avg_sq,
                 "param_rms": np.array(param_rms), "scale_exp_avg_sq": np.array(scale_exp_avg_sq),
                 "scale_grads": scale_grads,
                 "error_scale": {"terms": terms, "scale_grads": float(np.max(terms)), "scale_exp_avg_sq": sea_scale}}
    return np.asarray(p + delta), new_state


def _step_scalar(p: np.ndarray, g: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    t = int(state["step"])
    delta = beta1 * state["delta"]
    exp_avg_sq = beta2 * state["exp_avg_sq"] + (1.0 - beta2) * g * g
    bias_correction2 = 1.0 - beta2 ** (t + 1)
    delta = delta - lr * hp["scalar_lr_scale"] * (1.0 - beta1) * g / (np.sqrt(exp_avg_sq / bias_correction2) + eps)
    new_p = np.clip(p + delta, -hp["scalar_max"], hp["scalar_max"])
    new_state = {"step": np.int64(t + 1), "delta": np.asarray(delta), "exp_avg_sq": np.asarray(exp_avg_sq)}
    return np.asarray(new_p), new_state


def update_group(params: dict[str, np.ndarray], grads: dict[str, np.ndarray | None], states: dict[str, dict],
                 hp: dict) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    names = list(params)
    if not names:
        return {}, {}
    grads = {n: np.zeros(params[n].shape) if grads.get(n) is None else np.asarray(grads[n], dtype=np.float64)
             for n in names}
    first = states.get(names[0], {})
    clipping = first.get("clipping")
    if clipping is None:
        clipping = {"step": int(first.get("step", 0)), "model_norms": np.zeros(int(hp["clipping_update_period"])),
                    "threshold": None, "num_clipped": 0}

    c, clipping = _clipping_factor(params, grads, states, clipping, hp)

    new_params, new_states = {}, {}
    for name in names:
        p, state = params[name], states.get(name) or init(params[name], hp)
        if p.size == 0:
            new_params[name], new_states[name] = p.copy(), {}
            continue
        step = _step_scalar if p.size == 1 else _step_tensor
        own = {k: v for k, v in state.items() if k != "clipping"}
        new_params[name], new_states[name] = step(p, c * grads[name], own, hp)
    new_states[names[0]] = {**new_states[names[0]], "clipping": {**clipping, "step": int(clipping["step"]) + 1}}
    return new_params, new_states
