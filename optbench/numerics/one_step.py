"""The one-step check: each step of an implementation against the reference's step from the
implementation's own pre-step parameters and state (docs/tolerances.md, "Two gates").

The free-running trajectory measures drift, and its tolerance must grow with the steps; at bfloat16
that tolerance is a large relative error, and a bug that changes the update by a few percent hides in
it. Restarting the reference from the implementation's own state every step removes the drift: what
is left is one step's rounding, so the tolerance stays tight at every dtype and every step.

* **State tensors** are compared as the trajectory compares them (normwise, in eps of the dtype).
* **The parameter** is compared through its update ``p_new - p_old``, in eps of the update's own
  magnitude, after allowing ``PARAM_ROUNDINGS`` ulps of the parameter for the rounding of the new
  parameter to its dtype: an update smaller than that is rounded away in any correct implementation
  and carries no information, a larger one is checked to a few eps of itself.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch

from optbench.numerics.accuracy import err_eps, measured, widened
from optbench.reference import updated
from optbench.reference.contract import decisions_of

# A correct step may round the parameter three times (a decay factor like 1 - lr * weight_decay rounded
# to the dtype, the multiplication, then the update), each by up to half an ulp of the parameter:
# measured 1.1 ulps for torch's float32 AdamW. Two ulps of slack cover it.
PARAM_ROUNDINGS = 2.0
# The finest relative precision the update is checked to: torch keeps step-dependent scalars (the step
# counter, a Tensor lr or betas) in float32 by design, and 1 - beta2**t computed in float32 loses up to
# eps32 / (1 - beta2), about 1e3 float32 eps at beta2 = 0.999, to cancellation: 2**-16 (1.5e-5) per unit
# leaves 16 units = 2.4e-4 relative, twice that. Coarser dtypes (bfloat16, float16) use their own eps;
# below this the free-running trajectory gates (docs/tolerances.md).
UPDATE_FLOOR_EPS = 2.0**-16
# One step's rounding, amplified by divisions and square roots: the same 16 eps the trajectory's
# tolerance starts from, without its growth (the measured worst of torch's variants is in
# docs/tolerances.md).
ONE_STEP_TOL = 16.0
# The rounding envelope: the reference's step re-run with every input (parameter, gradient, state
# arrays) moved by up to eps relative, seeded; each element may be off by ENVELOPE_FACTOR times the largest
# move seen. Rounding error analysis: a correct step is the exact step of inputs perturbed by a few eps.
ENVELOPE_DRAWS = 2
ENVELOPE_FACTOR = 4.0
# A discontinuous decision (a sign, a clamp at its boundary) whose deciding value is within this many eps of
# the magnitudes it is computed from: its outcome is the rounding's, so the element's update is left out
# (counted and reported) where the reference declares its decisions (``decisions()`` in its contract).
DECISION_ROUNDINGS = 4.0


def ulp(x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """The spacing of ``dtype``'s floats at each element of ``x`` (subnormals included)."""
    info = torch.finfo(dtype)
    magnitude_ = np.maximum(np.abs(x), info.smallest_normal)
    return info.eps * np.exp2(np.floor(np.log2(magnitude_)))


def perturbed(value, eps: float, rng: np.random.Generator, *, scalars: bool = False):
    """``value`` with each element moved by up to eps relative, uniformly at random, independently per
    element and input (so that two inputs that cancel exactly do not move together); counters,
    anything not an array and, unless ``scalars``, 0-dim arrays are left alone."""
    if isinstance(value, tuple) and len(value) == 2:  # a sparse gradient: (indices, values)
        return value[0], perturbed(value[1], eps, rng, scalars=scalars)
    if not isinstance(value, np.ndarray) or (value.ndim == 0 and not scalars):
        return value
    if value.dtype.kind == "c":  # parts round apart
        return perturbed(value.real, eps, rng, scalars=scalars) + 1j * perturbed(value.imag, eps, rng, scalars=scalars)
    if value.dtype.kind == "f":
        return np.asarray(value * (1.0 + eps * rng.uniform(-1.0, 1.0, size=value.shape)))  # 0-dim stays an array
    return value


def update_error(p_old: np.ndarray, p_new: np.ndarray, ref_new: np.ndarray, dtype: torch.dtype, eps: float,
                 scale: float, envelope: np.ndarray | float = 0.0) -> float:
    """Error of the update ``p_new - p_old`` against ``ref_new - p_old``, in units of ``eps`` of
    ``max(scale, max|reference update|)``, after ``PARAM_ROUNDINGS`` ulps of the new parameter and
    ``envelope`` (the reference update's own sensitivity to rounding) per element."""
    if p_new.shape != ref_new.shape:
        return float("inf")  # (the slack below needs p_new's shape)
    with np.errstate(invalid="ignore"):
        slack = PARAM_ROUNDINGS * ulp(np.where(np.isfinite(p_new), p_new, 0.0), dtype) + envelope
        return err_eps(p_new - p_old, ref_new - p_old, eps, scale, slack)


def held_state(snapshot: dict) -> dict[str, dict]:
    """A snapshot's state tensors by FQN (its ``(fqn, key)`` entries other than the parameter)."""
    held: dict[str, dict] = {}
    for (name, key), value in snapshot.items():
        if key != "param":
            held.setdefault(name, {})[key] = value
    return held


def within_rounding(decisions: list, eps: float, shape) -> np.ndarray:
    """The elements of a reference's ``decisions(param, grad, state, hp)`` (a list of ``(value, scale)``: the value
    whose sign decides a discontinuous branch, e.g. Lion's interpolated momentum, or a clamp's input minus its
    boundary, and the magnitude its rounding scales with) with ``|value| < DECISION_ROUNDINGS * eps * scale``:
    their outcome is the rounding's."""
    mask = np.zeros(shape, dtype=bool)
    for value, scale in decisions:
        with np.errstate(invalid="ignore"):
            mask |= np.broadcast_to(np.abs(value) < DECISION_ROUNDINGS * eps * np.abs(scale), shape)  # 0 of 0: no
    return mask


class OneStep:
    """Accumulates one-step rows ``(step, fqn, tensor, err_eps, tol)`` over a trajectory.

    ``update_eps`` is the eps the parameter's update is measured in: the dtype's (at least
    ``UPDATE_FLOOR_EPS``), or coarser where the algorithm computes its update in a lower precision by
    design (Muon: bfloat16). Every element also gets ``ENVELOPE_FACTOR`` times its rounding envelope:
    how far the reference's own step moves when its inputs move by the dtype's eps (``ENVELOPE_DRAWS``
    seeded draws), which is what a correct implementation's rounding can do to an ill-conditioned
    element (a gradient that cancels its weight decay, a max over near-ties, a sign near zero)."""

    def __init__(self, reference, hp: dict, dtype: torch.dtype, update_eps: float | None = None):
        self.reference, self.hp, self.dtype = reference, hp, dtype
        self.eps = torch.finfo(dtype).eps
        self.update_eps = max(update_eps or 0.0, self.eps, UPDATE_FLOOR_EPS)
        self.scales: dict[tuple[str, str], float] = {}
        self.rows: list[tuple] = []
        self.left_out = 0  # element-steps at a decision within rounding (``_at_decision``), not judged

    def _envelopes(self, step: int, name: str, p_old, grad, state, ref_param, ref_state):
        """Per element, the largest move of the reference's update and new state under input rounding."""
        update_env, state_env = np.zeros(ref_param.shape), {}
        for draw in range(ENVELOPE_DRAWS):
            rng = np.random.default_rng([step, draw, zlib.crc32(name.encode())])
            p = perturbed(p_old, self.eps, rng)
            moved = {k: perturbed(v, self.eps, rng) for k, v in state.items()}
            new_p, new_state = self.reference.update(p, perturbed(grad, self.eps, rng), moved, self.hp[name])
            with np.errstate(invalid="ignore"):
                update_env = np.fmax(update_env, np.abs((np.asarray(new_p) - p) - (ref_param - p_old)))
                for k, v in ref_state.items():
                    if isinstance(v, np.ndarray) and k in new_state:
                        state_env[k] = np.fmax(state_env.get(k, 0.0), np.abs(np.asarray(new_state[k]) - v))
        return ENVELOPE_FACTOR * update_env, {k: ENVELOPE_FACTOR * v for k, v in state_env.items()}

    def _at_decision(self, p_old, grad, state: dict, name: str, shape) -> np.ndarray | bool:
        """Elements whose update hangs on a decision rounding can take either way (``within_rounding``), where the
        reference declares ``decisions``; counted in ``left_out``."""
        decide = decisions_of(self.reference)
        if decide is None:
            return False
        mask = within_rounding(decide(p_old, grad, state, self.hp[name]), self.eps, shape)
        self.left_out += int(mask.sum())
        return mask

    def _subnormal(self, ref_state: dict, shape) -> np.ndarray | bool:
        """Elements whose exact new state (any tensor shaped like the parameter) lies in the dtype's
        subnormal range: stored with a few bits at best (float16: below 6.1e-5), their update carries
        no checkable precision and is left to the trajectory gate."""
        tiny = torch.finfo(self.dtype).smallest_normal
        mask = False
        for value in ref_state.values():
            if isinstance(value, np.ndarray) and value.shape == shape and value.size:
                with np.errstate(invalid="ignore"):
                    mask = mask | ((np.abs(value) < tiny) & (value != 0))
        return mask

    def record(self, step: int, before: dict, after: dict, grads: dict, private: dict[str, dict]) -> None:
        """Compare the step from ``before`` to ``after`` (snapshots) with the reference's step on
        ``grads``; ``private`` holds the reference's own state per FQN, for keys torch does not keep."""
        held, steps = held_state(before), []
        for name, grad in grads.items():
            if grad is None:
                continue
            p_old = before[(name, "param")]
            own = held.get(name, {})
            state = {**(private.get(name) or self.reference.init(p_old, self.hp[name])), **own}
            ref_param, ref_state = updated(self.reference, self.reference.update(p_old, grad, state, self.hp[name]))
            ref_param = widened(ref_param)
            at_decision = self._at_decision(p_old, grad, state, name, ref_param.shape)
            subnormal = np.where(self._subnormal(ref_state, ref_param.shape) | at_decision, np.inf, 0.0)
            compared = {k: widened(v) for k, v in ref_state.items()
                        if (name, k) in after and isinstance(v, (np.ndarray, np.floating, float))}
            steps.append((name, p_old, grad, state, ref_param, ref_state, subnormal, compared))
        for (name, p_old, grad, state, ref_param, ref_state, subnormal, compared), found in zip(
                steps, self._errors(steps, after)):
            # The envelope only forgives (it is slack), so it is computed only where an error is past the
            # tolerance without it: a step within tolerance as it is reports its error as measured.
            if not all(err <= ONE_STEP_TOL for _, err in found):  # NaN is past it too
                update_env, state_env = self._envelopes(step, name, p_old, grad, state, ref_param, ref_state)
                key = (name, "param")
                found = [("param", update_error(p_old, after[key], ref_param, self.dtype, self.update_eps,
                                                self.scales[key], update_env + subnormal))]
                found += [(k, err_eps(after[(name, k)], expected, self.eps, self.scales[(name, k)],
                                      state_env.get(k, 0.0))) for k, expected in compared.items()]
            self.rows += [(step, name, tensor, err, ONE_STEP_TOL) for tensor, err in found]

    def _errors(self, steps: list[tuple], after: dict) -> list[list[tuple[str, float]]]:
        """Each tensor's error without envelopes (``update_error`` and ``err_eps``), measured together across the
        tensors (``accuracy.measured``), the scales updated as they go."""
        updates, states = [], []  # (name, tensor, actual, expected, slack)
        for name, p_old, _, _, ref_param, _, subnormal, compared in steps:
            p_new = after[(name, "param")]
            with np.errstate(over="ignore", invalid="ignore"):
                if p_new.shape == ref_param.shape:  # update_error's measure, the envelope 0
                    slack = PARAM_ROUNDINGS * ulp(np.where(np.isfinite(p_new), p_new, 0.0), self.dtype) + subnormal
                    updates.append((name, "param", p_new - p_old, ref_param - p_old, slack))
                else:  # a shape the parameter does not have: an infinite error (measured), its scale still kept
                    updates.append((name, "param", p_new, ref_param - p_old, 0.0))
            states += [(name, k, after[(name, k)], expected, 0.0) for k, expected in compared.items()]
        errors: dict[tuple[str, str], float] = {}
        for pairs, eps in ((updates, self.update_eps), (states, self.eps)):
            keys = [(name, tensor) for name, tensor, *_ in pairs]
            largest, found = measured([p[2] for p in pairs], [p[3] for p in pairs], eps,
                                      [self.scales.get(k, 0.0) for k in keys], [p[4] for p in pairs])
            for key, size, err in zip(keys, largest, found):
                self.scales[key] = max(self.scales.get(key, 0.0), float(size))
                errors[key] = float(err)
        return [[(tensor, errors[(s[0], tensor)]) for tensor in ("param", *s[7])] for s in steps]


def update_eps(suite, dtype: str) -> float | None:
    """The eps the one-step update check measures in, when the suite's optimizer computes its update
    in a lower precision than ``dtype`` by design (Muon: bfloat16); None otherwise."""
    if not suite.update_precision:
        return None
    floor = torch.finfo(getattr(torch, suite.update_precision)).eps
    return floor if torch.finfo(getattr(torch, dtype)).eps < floor else None
