"""Schedule-Free AdamW (Defazio et al. 2024, "The Road Less Scheduled", arXiv:2405.15682) in the practical
form the ``schedulefree`` package's ``AdamWScheduleFree`` documents (train mode: the parameter holds y).

Three sequences: z (the base AdamW iterate), x (the weighted average, where one evaluates) and
y = (1 - beta1) z + beta1 x (where the gradient is taken). At step t = 1, 2, ... with gradient g at y_t:

    gamma_t   = lr * min(1, t / warmup_steps)                     (linear warmup; none when warmup_steps = 0)
    lr_max_t  = max(lr_max_{t-1}, gamma_t)                        (lr_max_0 = -1)
    w_t       = t**r * lr_max_t**weight_lr_power,  W_t = W_{t-1} + w_t,  c_{t+1} = w_t / W_t  (0 when W_t = 0)
    v_t       = beta2 v_{t-1} + (1 - beta2) g**2
    u_t       = g / (sqrt(v_t / (1 - beta2**t)) + eps) + weight_decay * y_t      (decay taken at y)
    z_{t+1}   = z_t - gamma_t u_t
    x_{t+1}   = (1 - c_{t+1}) x_t + c_{t+1} z_{t+1}
    y_{t+1}   = (1 - beta1) z_{t+1} + beta1 x_{t+1}
              = (1 - c_{t+1}) y_t + c_{t+1} z_t - gamma_t (1 - beta1 (1 - c_{t+1})) u_t   (what is computed: no
                division by beta1, so beta1 = 0 works; x = (y - (1 - beta1) z) / beta1 is eval mode's point)

with z_1 = x_1 = y_1 = the initial parameter. With ``inner_momentum`` (mu, > 0: the package's main branch
after release 1.4.1) the gradient in u_t is replaced by m_t / (1 - mu**t), m_t = mu m_{t-1} + (1 - mu) g.

Options and defaults (AdamWScheduleFree): lr=0.0025, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
warmup_steps=0, r=0.0, weight_lr_power=2.0, inner_momentum=0.0 (read with ``hp.get``), foreach (ignored);
exp_avg_sq_eps=0 (pytorch-optimizer's 1e-15: added to the corrected second moment inside the square root).
Conventions of heavyball's SFAdamW (defaults off): debiased_state (exp_avg_sq holds v_t / (1 - beta2**t), advanced as
v_hat += (g**2 - v_hat) (1 - beta2) / (1 - beta2**t)), eps_clamp (denominator max(sqrt(v_hat), eps) instead of
sqrt(v_hat) + eps) and warmup_plus_one (gamma_t = lr * min(1, t / (warmup_steps + 1))).

State: ``z``, ``exp_avg_sq`` (and ``exp_avg`` with inner_momentum), as the package keys them; ``step`` (t, the
group's ``k`` after the step) as np.float64; ``weight_sum`` (W) and ``lr_max`` as private Python floats.
The package keeps k, weight_sum and lr_max in the param group, advanced once per ``step()`` whether or not
a parameter has a gradient; this reference keeps a per-parameter copy, advanced over the calls a tensor had no
gradient in when ``hp`` gives ``iteration`` (the step() calls so far, as the harness does; an lr changed by a
scheduler during such calls is taken at today's value). weight_sum and lr_max are never read from ``hp`` (the
group's initial values there are not the running ones).

Where the sources are silent or differ (this reference follows AdamWScheduleFree, schedulefree 1.3+):
* The paper's Algorithm 1 folds the bias correction into the step, gamma_t = lr sqrt(1 - beta2**t)
  min(1, t/T_warmup), with denominator sqrt(v_t) + eps; that scaled gamma_t then also multiplies the weight
  decay and enters the weights (``AdamWScheduleFreePaper``). Release 1.3 moved the correction into the
  denominator, sqrt(v_t / (1 - beta2**t)) + eps, so decay during warmup is lr*sched*weight_decay as in AdamW.
* The paper writes c_{t+1} = gamma_t**2 / sum gamma_i**2; the package weighs by the running maximum lr_max
  (equal under warmup, different once an external schedule lowers lr) and by t**r.
* ``AdamWScheduleFreeReference`` stores x and y explicitly and subtracts lr*weight_decay*y from z before
  the Adam step (same result in exact arithmetic), and has ``decay_at_z`` (decay at z instead; not here).
* W = 0 (lr = 0 so far with weight_lr_power > 0): the package catches the ZeroDivisionError, c = 0.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    state = {
        "step": np.float64(0.0),
        "z": np.array(param, dtype=np.float64, copy=True),
        "exp_avg_sq": np.zeros_like(param, dtype=np.float64),
        "weight_sum": 0.0,
        "lr_max": -1.0,
    }
    if hp.get("inner_momentum", 0.0) != 0:
        state["exp_avg"] = np.zeros_like(param, dtype=np.float64)
    return state


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay, warmup_steps = hp.get("weight_decay", 0.0), hp.get("warmup_steps", 0)
    r, weight_lr_power = hp.get("r", 0.0), hp.get("weight_lr_power", 2.0)
    inner_momentum = hp.get("inner_momentum", 0.0)

    def scheduled(t: float) -> float:
        if hp.get("warmup_plus_one", False):
            return lr * min(1.0, t / (warmup_steps + 1))
        return lr * (t / warmup_steps if t <= warmup_steps else 1.0)

    # the package counts k, lr_max and the weight sum per group, every step() call: where the harness gives that
    # count (hp iteration), the calls in which this tensor had no gradient still advance them (at today's lr)
    t = float(hp.get("iteration", float(state["step"]) + 1.0))
    lr_max, weight_sum = float(state["lr_max"]), float(state["weight_sum"])
    for missed in range(int(state["step"]) + 1, int(t)):
        lr_max = max(lr_max, scheduled(float(missed)))
        weight_sum += float(missed) ** r * lr_max**weight_lr_power
    gamma = scheduled(t)
    lr_max = max(lr_max, gamma)
    weight = t**r * lr_max**weight_lr_power
    weight_sum = weight_sum + weight
    c = weight / weight_sum if weight_sum != 0 else 0.0

    y, z = param, state["z"]
    if hp.get("debiased_state", False):  # v_hat kept: the correction is inside the state
        exp_avg_sq = state["exp_avg_sq"] + (grad * grad - state["exp_avg_sq"]) * ((1.0 - beta2) / (1.0 - beta2**t))
        v_hat = exp_avg_sq
    else:
        exp_avg_sq = state["exp_avg_sq"] * beta2 + (1.0 - beta2) * grad * grad
        v_hat = exp_avg_sq / (1.0 - beta2**t)
    root = np.sqrt(v_hat + hp.get("exp_avg_sq_eps", 0.0))
    denom = np.maximum(root, eps) if hp.get("eps_clamp", False) else root + eps
    new_state = {"step": np.float64(t), "exp_avg_sq": np.asarray(exp_avg_sq)}
    numerator = grad
    if inner_momentum != 0:
        exp_avg = state["exp_avg"] * inner_momentum + (1.0 - inner_momentum) * grad
        new_state["exp_avg"] = np.asarray(exp_avg)
        numerator = exp_avg / (1.0 - inner_momentum**t)
    u = numerator / denom
    if weight_decay != 0:
        u = u + weight_decay * y

    new_y = (1.0 - c) * y + c * z - gamma * (1.0 - beta1 * (1.0 - c)) * u
    new_state.update(z=np.asarray(z - gamma * u), weight_sum=weight_sum, lr_max=lr_max)
    return np.asarray(new_y), new_state
