"""The error measure and its tolerance: error in units of the dtype's eps (docs/tolerances.md).

For each step, parameter name (FQN) and tensor (the parameter and every state tensor), the error is
``max|actual - reference| / (eps(dtype) * scale)`` where ``scale`` is the largest magnitude that
reference tensor has had up to that step: a normwise error, stable when a value crosses zero. NaN on
both sides at the same place, or equal infinities, count as agreement; any other non-finite
mismatch, a shape mismatch, or a state key only one side keeps is an infinite error.
"""

from __future__ import annotations

import numpy as np

TINY = np.finfo(np.float64).tiny


def widened(x) -> np.ndarray:
    """``x`` as float64 NumPy, or complex128 if it is complex (whose error is then the modulus of the
    difference, and whose magnitude the modulus: normwise over the real and imaginary parts)."""
    return np.asarray(x, dtype=np.complex128 if np.iscomplexobj(x) else np.float64)


def magnitude(x: np.ndarray) -> float:
    """The largest finite magnitude in ``x`` (0 if none)."""
    if x.size:
        largest = np.abs(x).max()
        if np.isfinite(largest):  # every element finite: the common case, without a masked copy
            return float(largest)
    finite = x[np.isfinite(x)]
    return float(np.abs(finite).max()) if finite.size else 0.0


def err_eps(actual: np.ndarray, expected: np.ndarray, eps: float, scale: float = 0.0, slack=0.0) -> float:
    """Normwise error of ``actual`` against ``expected`` in units of ``eps``, relative to
    ``max(scale, max|expected|)``, after ``slack`` (a number or one per element) is forgiven."""
    if actual.shape != expected.shape:
        return float("inf")
    if expected.size == 0:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # an error too large for a float is an infinite error
        difference = np.abs(actual - expected)
        if np.isfinite(difference.max()):  # every element finite on both sides: no masked copies needed
            if not (isinstance(slack, float) and slack == 0.0) and np.any(slack):
                difference = np.maximum(difference - slack, 0.0)  # slack: a number or shaped like actual
            scale = max(scale, float(np.abs(expected).max()), TINY)
            return float(difference.max() / (eps * scale))
    finite = np.isfinite(expected) & np.isfinite(actual)
    agree = (np.isnan(expected) & np.isnan(actual)) | (np.isinf(expected) & (actual == expected))
    if not np.all(finite | agree):
        return float("inf")
    if not finite.any():
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # an error too large for a float is an infinite error
        excess = np.abs(actual[finite] - expected[finite])
        if np.any(slack):
            excess = np.maximum(excess - np.broadcast_to(slack, actual.shape)[finite], 0.0)
        scale = max(scale, float(np.abs(expected[finite]).max()), TINY)
        return float(excess.max() / (eps * scale))


def measured(actual: list[np.ndarray], expected: list[np.ndarray], eps: float, scales: list[float],
             slacks: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: ``magnitude(expected)`` and ``err_eps(actual, expected, eps, max(scale, that magnitude), slack)``, the
    pairs whose elements are all finite and real measured together (one concatenation, one reduction per measure:
    the same numbers, as the pair-by-pair definitions above give them for the rest)."""
    count = len(expected)
    slacks = slacks if slacks is not None else [0.0] * count
    magnitudes, errors = np.zeros(count), np.zeros(count)
    together = [i for i in range(count) if actual[i].shape == expected[i].shape and expected[i].size
                and actual[i].dtype == np.float64 and expected[i].dtype == np.float64]
    finite = np.zeros(count, dtype=bool)
    if together:
        starts = np.cumsum([0] + [expected[i].size for i in together[:-1]])
        mine = np.concatenate([expected[i].reshape(-1) for i in together])
        theirs = np.concatenate([actual[i].reshape(-1) for i in together])
        with np.errstate(over="ignore", invalid="ignore"):
            largest = np.maximum.reduceat(np.abs(mine), starts)
            difference = np.abs(theirs - mine)
            ok = np.isfinite(largest) & np.isfinite(np.maximum.reduceat(difference, starts))
            if any(not (isinstance(slacks[i], float) and slacks[i] == 0.0) for i in together):  # per element or not
                forgiven = np.concatenate([np.broadcast_to(slacks[i], expected[i].shape).reshape(-1) for i in together])
                difference = np.maximum(difference - forgiven, 0.0)
            scale = np.maximum(np.maximum(np.asarray(scales, dtype=np.float64)[together], largest), TINY)
            worst = np.maximum.reduceat(difference, starts)
            magnitudes[together], errors[together], finite[together] = largest, worst / (eps * scale), ok
    for i in np.flatnonzero(~finite):  # a non-finite element, a shape mismatch, an empty or complex tensor
        magnitudes[i] = magnitude(expected[i])
        errors[i] = err_eps(actual[i], expected[i], eps, max(scales[i], magnitudes[i]), slacks[i])
    return magnitudes, errors


def moved_err_eps(actual: np.ndarray, expected: np.ndarray, start: np.ndarray, eps: float) -> float:
    """Error in ``eps`` of how far the parameter moved from ``start`` (its displacement's largest element):
    the measure for an update computed in a coarser precision than the parameter by design (Muon: bfloat16)."""
    if actual.shape != expected.shape or not np.isfinite(actual).all():
        return float("inf")
    diff, moved = float(np.abs(actual - expected).max(initial=0.0)), float(np.abs(expected - start).max(initial=0.0))
    return 0.0 if diff == 0 else diff / (eps * moved) if moved else float("inf")


def tolerance_eps(step):
    """Allowed error in eps units after ``step`` steps: 16 for one step's rounding (amplified by
    divisions and square roots) plus 1 per step of accumulation."""
    return 16.0 + step


def cross_tolerance_eps(steps: int) -> float:
    """Two implementations may each be ``tolerance_eps`` away from the reference."""
    return 2 * tolerance_eps(steps)


def cross_error(snapshots: list[dict], baseline: list[dict], eps: float, skip=frozenset()) -> float:
    """Max error in eps units of one implementation's trajectory against another's (e.g. for-loop),
    over every (fqn, tensor) key not in ``skip``."""
    worst, scales = 0.0, {}
    for mine, theirs in zip(snapshots, baseline):
        for key in (mine.keys() | theirs.keys()) - skip:
            if key not in mine or key not in theirs:
                return float("inf")
            scales[key] = max(scales.get(key, 0.0), magnitude(theirs[key]))
            worst = max(worst, err_eps(mine[key], theirs[key], eps, scales[key]))
    return worst
