"""Signum's documented algorithm in float64 NumPy (optbench.reference's contract)."""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {}


def _momentum(grad, state, hp):
    buf = state.get("momentum_buffer", np.zeros_like(grad))
    return buf + (1.0 - hp["momentum"]) * (grad - buf)


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    m = _momentum(grad, state, hp)
    step = float(state.get("step", 0.0)) + 1.0
    decayed = param * (1.0 - hp["lr"] * hp["weight_decay"])
    return decayed - hp["lr"] * np.sign(m), {"step": np.float64(step), "momentum_buffer": m}


def decisions(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """sign(m) decides each element's step: m and the magnitudes it is the sum of."""
    buf = state.get("momentum_buffer", np.zeros_like(grad))
    return [(_momentum(grad, state, hp), np.abs(hp["momentum"] * buf) + np.abs((1.0 - hp["momentum"]) * grad))]
