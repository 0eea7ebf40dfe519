"""Stochastic rounding judged in distribution: many roundings of the same values against the reference's
(``reference/_stochastic_rounding.py``).

Given the values before rounding (the reference's, float64) and ``draws`` (n_draws x the values' shape: what the
implementation rounded them to, as float64), three things must hold:

1. **Neighbours only**: every draw is one of the value's two bfloat16 neighbours (a value that is a bfloat16 value:
   itself).
2. **The probability per element**: the count of draws away from zero is Binomial(n_draws, p_away), with p_away
   known up to ``slack`` (the float32 arithmetic before the rounding moves the value by about 2^-16 of a step);
   an element fails where both one-sided binomial tails, at the two ends of that interval, are below ``alpha`` /
   the number of elements (Bonferroni: the chance that a correct rounding fails anywhere is at most ``alpha``).
3. **No bias overall**: the draws' total excess of away-from-zero picks over their expectation, in standard
   deviations (a z score beyond ``z_limit`` fails, after taking off what ``slack`` allows). It finds a bias too
   small for any one element: with 4,000 draws of 1,024 values, about 1e-3 of a step on average.

A bias below those limits (a threshold off by 1/65536, as ``rand <= fraction`` instead of ``<``) is not
detectable this way; ``detectable_bias`` says how small a bias a given sample would show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optbench.reference._stochastic_rounding import bfloat16_neighbours

ALPHA = 1e-6
Z_LIMIT = 5.0
SLACK = 2.0 ** -15


@dataclass(frozen=True)
class RoundingVerdict:
    passed: bool
    detail: str
    not_neighbours: int  # draws that are neither neighbour
    failing_elements: int  # elements whose away-count is not Binomial(n, p_away)
    bias_z: float  # the overall excess of away picks, in standard deviations (signed)


def judge(values: np.ndarray, draws: np.ndarray, alpha: float = ALPHA, slack: float = SLACK,
          z_limit: float = Z_LIMIT) -> RoundingVerdict:
    """The verdict on ``draws`` (n_draws x values.shape) as stochastic roundings of ``values``."""
    toward, away, _ = (a.ravel() for a in bfloat16_neighbours(values))
    draws = np.asarray(draws, dtype=np.float64).reshape(-1, toward.size)
    is_away, is_toward = draws == away, draws == toward
    strays = int(np.count_nonzero(~(is_away | is_toward)))
    k = np.count_nonzero(is_away & ~is_toward, axis=0)  # a bfloat16 value: toward == away never happens (p = 0)
    return judge_counts(values, draws.shape[0], k, strays, alpha, slack, z_limit)


def away_counts(values: np.ndarray, seen: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, int]:
    """(per element, how many draws were its away-from-zero neighbour; how many draws were neither neighbour), from
    what each element was drawn as: ``seen`` (elements x k values, NaN padding) and how often (``counts``)."""
    toward, away, _ = (a.ravel() for a in bfloat16_neighbours(values))
    seen = np.asarray(seen, dtype=np.float64).reshape(toward.size, -1)
    counts = np.asarray(counts, dtype=np.int64).reshape(toward.size, -1)
    k = np.sum(np.where(seen == away[:, None], counts, 0), axis=1)
    neither = (seen != away[:, None]) & (seen != toward[:, None])
    return k, int(np.sum(np.where(neither, counts, 0)))


def judge_counts(values: np.ndarray, n: int, k: np.ndarray, strays: int, alpha: float = ALPHA,
                 slack: float = SLACK, z_limit: float = Z_LIMIT) -> RoundingVerdict:
    """The verdict on ``n`` roundings of ``values`` of which ``k`` (per element) were the away-from-zero neighbour
    and ``strays`` (in all) neither neighbour."""
    from scipy import stats  # (1.5 s to import: only where a rounding is judged)

    toward, _, p = (a.ravel() for a in bfloat16_neighbours(values))
    k = np.asarray(k).ravel()
    low, high = np.clip(p - slack, 0, 1), np.clip(p + slack, 0, 1)
    too_many = stats.binom.sf(k - 1, n, high)  # P(K >= k) at the largest p the slack allows
    too_few = stats.binom.cdf(k, n, low)  # P(K <= k) at the smallest
    tail = np.minimum(too_many, too_few)
    failing = int(np.count_nonzero(tail < alpha / (2 * toward.size)))
    spread = np.sqrt(max(float(np.sum(n * p * (1 - p))), 1e-300))
    excess = float(np.sum(k - n * p))
    z = float(np.sign(excess) * max(abs(excess) - n * slack * toward.size, 0.0) / spread) + 0.0  # (never -0.0)
    passed = strays == 0 and failing == 0 and abs(z) <= z_limit
    detail = (f"{n} draws of {toward.size} values: {strays} draws neither neighbour, {failing} elements whose "
              f"away-from-zero count is not Binomial(n, p) (alpha {alpha:g}), overall excess {z:+.2f} sd "
              f"(limit {z_limit:g})")
    return RoundingVerdict(passed, detail, strays, failing, z)


def detectable_bias(values: np.ndarray, n_draws: int, z_limit: float = Z_LIMIT, slack: float = SLACK) -> float:
    """The smallest mean bias of the away-from-zero probability (in probability, per element) that ``judge``'s
    overall test shows with ``n_draws`` draws of ``values``."""
    _, _, p = bfloat16_neighbours(values)
    spread = np.sqrt(max(float(np.sum(n_draws * p * (1 - p))), 1e-300))
    return float((z_limit * spread / (n_draws * p.size)) + slack)
