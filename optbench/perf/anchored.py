"""Anchored comparison: two runs compared through a baseline both timed interleaved with the case.

Two runs minutes apart meet a machine that drifted: on the 2-core VM two runs of the same AdamW step differ by up
to 8 % (p < 0.001 on their rounds, and between ten processes of each), as much as a real 15 % change measures
(docs/performance.md). No test on one case's own samples can tell those apart. But a run times each case with its
baseline (torch's for-loop, or a candidate suite's ``nearest:`` torch optimizer) in the same interleaved rounds:
the paired ratio case / baseline cancels what moved both. Where both runs have that ratio against the same
baseline and the baseline is the same code in both (the same torch), ``optbench compare`` compares the ratios:
new ratio over baseline ratio, tested on each repeat's paired ratio (Welch's t on logs, ``speed.repeat_ratio``)
or else on the rounds' paired ratios (Mann-Whitney U, with a bootstrap interval). The baseline's own case is
compared on its times (it is its own anchor): drift applies to it, the note says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from optbench.implementations.torch_variants import BASELINE
from optbench.metrics import SPEED_RATIO, SPEED_REPEAT_RATIO, TIME_ROUND_MS
from optbench.perf.ratio_stats import CASE, TIMING_CHECKS, between_processes, ratio_interval

FORLOOP = BASELINE
IMPL = 1  # the position of impl in a case key (suite, impl, dtype, hparams, device, workload, check)


def _keyed(rows: pd.DataFrame, metric: str) -> dict[tuple, pd.DataFrame]:
    sel = rows[rows["check"].isin(TIMING_CHECKS) & (rows["metric"] == metric)]
    return {key: g for key, g in sel.groupby(CASE, sort=False)}


class Anchors:
    """One run's paired ratios: per case, its baseline's key, its per-round paired ratios and per-repeat ratios."""

    def __init__(self, rows: pd.DataFrame):
        self.rounds = _keyed(rows, TIME_ROUND_MS)
        self.has_ratio = set(_keyed(rows, SPEED_RATIO))
        self.repeat_ratios = {k: g.sort_values("step")["value"].to_numpy(float)
                              for k, g in _keyed(rows, SPEED_REPEAT_RATIO).items()}

    def baseline(self, key: tuple) -> tuple | None:
        """The case the run paired ``key`` with (the for-loop, else a torch.optim baseline), if it did."""
        if key not in self.has_ratio:
            return None
        same = [k for k in self.rounds if k[:IMPL] == key[:IMPL] and k[IMPL + 1] == key[IMPL + 1]
                and k[IMPL + 3:] == key[IMPL + 3:] and k[IMPL] != key[IMPL]]
        return (next((k for k in same if k[IMPL] == FORLOOP), None)
                or next((k for k in same if str(k[IMPL]).startswith("torch.optim.")), None))

    def paired(self, key: tuple, base: tuple) -> np.ndarray:
        """Round by round, the case's time over its baseline's (rounds both have)."""
        a = self.rounds[key].set_index("step")["value"]
        b = self.rounds[base].set_index("step")["value"]
        both = a.index.intersection(b.index)
        ratios = (a[both] / b[both]).to_numpy(float)
        return ratios[np.isfinite(ratios) & (ratios > 0)]


def compare_anchored(key: tuple, base: Anchors, new: Anchors, confidence: float) -> dict | None:
    """(ratio, ci_low, ci_high, p, method note, and whether it tested between processes) of the case's paired
    ratio, new over baseline run; None where the runs did not both pair it with the same baseline."""
    from scipy import stats  # (imported here: 0.75 s a process that never tests)

    b_anchor, n_anchor = base.baseline(key), new.baseline(key)
    if b_anchor is None or b_anchor != n_anchor:
        return None
    name = b_anchor[IMPL]
    b_rep, n_rep = base.repeat_ratios.get(key, np.array([])), new.repeat_ratios.get(key, np.array([]))
    between = min(len(b_rep), len(n_rep)) >= 2  # process-level repeats on both sides
    if between:
        p, low, high = between_processes(b_rep, n_rep, confidence)
        ratio = float(np.exp(np.log(n_rep).mean() - np.log(b_rep).mean()))
        how = f"{len(b_rep)} vs {len(n_rep)} repeats (Welch t on log ratios)"
    else:
        b_pair, n_pair = base.paired(key, b_anchor), new.paired(key, n_anchor)
        if min(len(b_pair), len(n_pair)) < 5:
            return None
        ratio = float(np.median(n_pair) / np.median(b_pair))
        low, high = ratio_interval(b_pair, n_pair, confidence)
        p = float(stats.mannwhitneyu(n_pair, b_pair, alternative="two-sided").pvalue)
        how = f"{len(b_pair)} vs {len(n_pair)} paired rounds (Mann-Whitney U)"
    return {"ratio": ratio, "ci_low": low, "ci_high": high, "p": p, "between": between,
            "method": f"anchored on {name}, timed interleaved in each run: the paired ratio's change, {how}"}
