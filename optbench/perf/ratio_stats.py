"""The statistics a comparison of timing cases uses: what a timing case is, and the ratio's interval and test
(optbench.perf.compare between runs, optbench.perf.anchored through a baseline)."""

from __future__ import annotations

import numpy as np

from optbench.results import CASE_KEY

TIMING_CHECKS = ("speed", "scaling")
CASE = [*CASE_KEY, "check"]  # a timing case: speed and scaling time the same case apart
BOOTSTRAP_RESAMPLES = 2000


def ratio_interval(base: np.ndarray, new: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile-bootstrap interval for the ratio of medians new/base (scipy.stats.bootstrap, a fixed seed)."""
    from scipy import stats  # (imported here: 0.75 s a process that never tests)

    ratio = lambda b, n, axis: np.median(n, axis=axis) / np.median(b, axis=axis)  # noqa: E731
    found = stats.bootstrap((base, new), ratio, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                            method="percentile", vectorized=True, rng=np.random.default_rng(0))
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def between_processes(base: np.ndarray, new: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Welch's t-test on the log of each run's repeat medians: (p, interval low, interval high) for the ratio."""
    from scipy import stats  # (imported here: 0.75 s a process that never tests)

    if np.ptp(np.log(base)) == 0 and np.ptp(np.log(new)) == 0:  # no spread on either side: only the ratio is known
        ratio = float(np.median(new) / np.median(base))
        return (0.0 if ratio != 1 else 1.0), ratio, ratio
    test = stats.ttest_ind(np.log(new), np.log(base), equal_var=False)
    interval = test.confidence_interval(confidence)
    return float(test.pvalue), float(np.exp(interval.low)), float(np.exp(interval.high))
