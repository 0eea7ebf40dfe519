"""Stochastic rounding to bfloat16, in float64: the distribution a rounding of a value v must follow.

bfloat16 keeps 8 significant bits (7 stored), so a value v lies between two neighbours, ``toward`` (v with its
magnitude cut to 8 bits: rounding toward zero) and ``away`` (one bfloat16 step further from zero). Stochastic
rounding (Gupta et al., 2015, "Deep Learning with Limited Numerical Precision", arXiv:1502.02551, Section 3;
torchao's ``bf16_stochastic_round``) picks ``away`` with probability (|v| - |toward|) / step and ``toward``
otherwise, so that its expectation is v: unbiased, where rounding to nearest is biased for a small update that
never reaches half a step. A v that is a bfloat16 value rounds to itself. Below 2^-126 the step is bfloat16's
subnormal one, 2^-133. Values are assumed finite and below bfloat16's largest.
"""

from __future__ import annotations

import numpy as np

SIGNIFICANT_BITS = 8  # bfloat16: 1 implicit + 7 stored
MIN_EXPONENT = -125  # frexp's exponent of bfloat16's smallest normal, 2^-126 = 0.5 * 2^-125


def bfloat16_neighbours(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(toward, away, p_away), each shaped as v: the bfloat16 neighbour toward zero, the one away from zero (both
    exact in float64, carrying v's sign), and the probability with which stochastic rounding picks ``away``."""
    v = np.asarray(v, dtype=np.float64)
    magnitude = np.abs(v)
    _, exponent = np.frexp(magnitude)
    step = np.ldexp(1.0, np.maximum(exponent, MIN_EXPONENT) - SIGNIFICANT_BITS)
    toward = np.floor(magnitude / step) * step
    p_away = (magnitude - toward) / step
    sign = np.where(np.signbit(v), -1.0, 1.0)
    return sign * toward, sign * (toward + step), p_away


def expectation(v: np.ndarray) -> np.ndarray:
    """The mean of the rounding's distribution (v itself, up to float64's rounding of the product)."""
    toward, away, p_away = bfloat16_neighbours(v)
    return toward + p_away * (away - toward)
