"""Compare two result tables (say main vs a branch): which timing cases got slower or faster, with
what confidence, and which verdicts newly fail.

A timing case is a (suite, impl, dtype, hparams, device, workload, check) of check ``speed`` or
``scaling``; its samples are its ``time.round_ms`` rows (one mean step time per timing round) and its
median its ``time.step_ms`` row (the median of the samples where that row is missing).

* **ratio**: new median / baseline median (between processes: the ratio of the repeats' geometric means).
* **p**: two-sided Mann-Whitney U test on the two sets of samples (``scipy.stats.mannwhitneyu``).
* **interval**: a percentile bootstrap of the ratio of medians (``scipy.stats.bootstrap``, resampling
  each side's rounds, 2000 resamples, a fixed seed: two calls give the same interval). Where the rounds
  are not one distribution shifted (bimodal rounds: a noisy machine, a cache effect), the medians'
  ratio can fall outside it; the note says so.
* **verdict** (asv's rule): ``slower``/``faster`` only when p < alpha *and* the ratio is beyond
  1 +- threshold; else ``same``; ``n/a`` (with the reason) when a side has fewer than 5 samples,
  too few for any two-sided U test to reach p < 0.01.
* **one process per run**: where a side timed the case in one process (``speed.repeats=1``, the default), its rounds
  cannot see what differs between processes, which on these machines moved the same code's anchored ratio by up to
  39 %: such a comparison calls a change only beyond 1.5x or below 1/1.5 (``Rule.one_process``); a significant change
  within it is ``unclear`` (never an OK: UNDECIDED, exit 3), saying so. A calibration (``--calibration``) knows the
  spread instead.
* **between processes**: where both runs timed the case in at least two process-level repeats
  (``speed.repeats``, optbench.engine.repeats), the samples are the repeats' medians, not the rounds: p is Welch's
  t-test on their logarithms (``scipy.stats.ttest_ind``, unequal variances) and the interval its confidence
  interval, exponentiated. Rounds within one process cannot see what differs between two processes (where
  the tensors were allocated: a few percent, for good), so a comparison on rounds alone calls that a change; the
  note says so.

A verdict key (the case plus metric, fqn, tensor) whose rows include ``fail`` or ``error`` in the new
table but not in the baseline (where it passed, was a declared deviation, or was absent) is a **new
failure**; failing in both is **still failing**, reported but not a regression by itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from optbench.metrics import TIME_REPEAT_MS, TIME_ROUND_MS, TIME_STEP_MS, TIME_UNSTABLE
from optbench.perf.anchored import Anchors, compare_anchored
from optbench.perf.ratio_stats import CASE, TIMING_CHECKS, between_processes, ratio_interval
from optbench.results import CASE_KEY, DECLARED, FAILING, PASSING, VERIFIED

VERDICT_KEY = CASE + ["metric", "fqn", "tensor"]
VERDICTS = VERIFIED | FAILING  # the statuses a verdict key compares
MIN_SAMPLES = 5
ORDER = ("slower", "faster", "unclear", "same", "n/a", "only in baseline", "only in new")
IN_BOTH = ORDER[:5]  # the verdicts of a case both runs timed
MACHINE_KEYS = ("cpu", "gpu", "torch", "cpu_threads")


@dataclass(frozen=True)
class Rule:
    """When a change is flagged: p < alpha and |ratio - 1| > threshold; intervals at ``confidence``. With an A/A
    ``calibration`` (optbench.perf.calibration.thresholds: per-case spreads and the largest), a case's threshold is
    the larger of ``threshold`` and its spread."""

    threshold: float = 0.05
    alpha: float = 0.01
    confidence: float = 0.95
    calibration: tuple | None = None
    anchored: bool = True  # compare a case through the baseline both runs timed with it (optbench.perf.anchored)
    # Rounds of one process per run cannot see what differs between two processes: such a comparison calls a
    # change only beyond this (measured A/A on 2-core VMs, the same code in two default runs: anchored ratios up to
    # 1.39 apart, fused Adam float64; docs/performance.md); both runs with speed.repeats >= 2 test between
    # processes, a calibration knows the spread
    one_process: float = 0.5

    def for_case(self, key: tuple) -> tuple[Rule, str]:
        """The rule for one case, and what raised its threshold ("" if nothing did): with a calibration, the case's
        A/A spread between processes, which also stands in for ``one_process``."""
        if self.calibration is None:
            return self, ""
        cases, overall = self.calibration
        spread = cases.get(tuple(str(k) for k in key))
        how = "its A/A spread" if spread is not None else "the calibration's largest A/A spread (case not in it)"
        spread = overall if spread is None else spread
        if not math.isfinite(spread) or spread <= self.threshold:
            return replace(self, one_process=0.0), ""
        return replace(self, threshold=spread, one_process=0.0), f"threshold {spread:.1%}: {how} on this machine"


@dataclass(frozen=True)
class Comparison:
    timings: pd.DataFrame  # one row per timing case: CASE, base_ms, new_ms, ratio, ci_low, ci_high, p, verdict, note
    new_failures: pd.DataFrame  # VERDICT_KEY, baseline, new, detail
    still_failing: pd.DataFrame
    rule: Rule
    missing: tuple[str, ...] = ()  # cases (check and CASE_KEY) the baseline ran and the new run lacks
    incomplete: str = ""  # why the new run is unfinished ("" when it finished)
    changed: pd.DataFrame | None = None  # VERDICT_KEY, baseline, new, change, detail: every verdict that differs
    shared_verdicts: int = 0  # verdict keys both runs have

    @property
    def compared_nothing(self) -> bool:
        """No timing case compared (each n/a or in one run only) and no verdict in both runs: never an OK."""
        compared = self.timings["verdict"].isin(("slower", "faster", "unclear", "same")).any()
        return not compared and not self.shared_verdicts

    @property
    def unclear(self) -> bool:
        """A case whose rounds changed by more than the threshold but within what one process per run cannot tell
        from a difference between processes (``Rule.one_process``): neither a regression nor an OK."""
        return bool((self.timings["verdict"] == "unclear").any())

    @property
    def regressed(self) -> bool:
        """Any case flagged slower, any new failure, a case the new run lacks or an unfinished new run: what a CI
        job fails on (a run that stopped half-way has not shown it is no worse)."""
        return bool((self.timings["verdict"] == "slower").any() or len(self.new_failures) or self.missing
                    or self.incomplete)


def samples(rows: pd.DataFrame) -> dict[tuple, np.ndarray]:
    """Each timing case's round times (ms), in round order; finite positive values only."""
    sel = rows[rows["check"].isin(TIMING_CHECKS) & (rows["metric"] == TIME_ROUND_MS)]
    sel = sel[np.isfinite(sel["value"]) & (sel["value"] > 0)]
    order = pd.to_numeric(sel["step"], errors="coerce")
    return {key: g["value"].to_numpy(float) for key, g in sel.assign(_round=order).sort_values("_round", kind="stable")
            .groupby(CASE, sort=False)}


def repeat_medians(rows: pd.DataFrame) -> dict[tuple, np.ndarray]:
    """Each timing case's process-level repeats (``time.repeat_ms``), in repeat order; finite positive values."""
    sel = rows[rows["check"].isin(TIMING_CHECKS) & (rows["metric"] == TIME_REPEAT_MS)]
    sel = sel[np.isfinite(sel["value"]) & (sel["value"] > 0)]
    return {key: g["value"].to_numpy(float) for key, g in sel.groupby(CASE, sort=False)}


def medians(rows: pd.DataFrame) -> dict[tuple, float]:
    """Each timing case's recorded median step time (ms)."""
    sel = rows[rows["check"].isin(TIMING_CHECKS) & (rows["metric"] == TIME_STEP_MS) & np.isfinite(rows["value"])]
    return {tuple(r[:-1]): r[-1] for r in sel.drop_duplicates(CASE)[CASE + ["value"]].itertuples(index=False)}


def compare_case(base: np.ndarray, new: np.ndarray, base_ms: float, new_ms: float, rule: Rule,
                 repeats: tuple[np.ndarray, np.ndarray] | None = None, anchored: dict | None = None) -> dict:
    """The ratio, interval, p-value and verdict for one case present in both runs; ``repeats``: each run's
    process-level repeat medians, tested between processes where both have two or more; ``anchored``: the
    comparison through a baseline both runs timed with the case (optbench.perf.anchored), which decides."""
    from scipy import stats  # (imported here: 0.75 s a process that never tests)

    base_ms = base_ms if math.isfinite(base_ms) else float(np.median(base)) if len(base) else math.nan
    new_ms = new_ms if math.isfinite(new_ms) else float(np.median(new)) if len(new) else math.nan
    out = dict(base_ms=base_ms, new_ms=new_ms, ratio=new_ms / base_ms if base_ms > 0 else math.nan,
               ci_low=math.nan, ci_high=math.nan, p=math.nan, verdict="n/a", note="")
    notes, between = [], True
    if anchored is not None:
        raw = out["ratio"]
        out.update({k: anchored[k] for k in ("ratio", "ci_low", "ci_high", "p")})
        method, between = f"{anchored['method']} (times alone: {raw:.3f})", anchored["between"]
    elif repeats is not None and min(len(repeats[0]), len(repeats[1])) >= 2:
        out["p"], out["ci_low"], out["ci_high"] = between_processes(*repeats, rule.confidence)
        out["ratio"] = float(np.exp(np.log(repeats[1]).mean() - np.log(repeats[0]).mean()))  # the tested one
        method = f"between processes: {len(repeats[0])} vs {len(repeats[1])} repeats (Welch t on log medians)"
    else:
        short = [f"{side} has {len(s)} rounds" if len(s) else f"no round samples in {side}"
                 for side, s in (("baseline", base), ("new", new)) if len(s) < MIN_SAMPLES]
        if short:
            return out | {"note": "; ".join(short) + f" (need {MIN_SAMPLES})"}
        out["ci_low"], out["ci_high"] = ratio_interval(base, new, rule.confidence)
        out["p"] = float(stats.mannwhitneyu(new, base, alternative="two-sided").pvalue)
        method, between = "rounds of one process per run", False
    significant, beyond = out["p"] < rule.alpha, abs(out["ratio"] - 1) > rule.threshold
    out["verdict"] = ("slower" if out["ratio"] > 1 else "faster") if significant and beyond else "same"
    if significant and beyond and not between and max(out["ratio"], 1 / out["ratio"]) <= 1 + rule.one_process:
        out["verdict"] = "unclear"  # as likely two processes as a change: neither claimed nor passed
        notes.append(f"one process per run: a change within {rule.one_process:.0%} is not told from a difference "
                     "between processes (speed.repeats=5 in both runs tests between them; or --calibration)")
    elif significant != beyond:
        notes.append(f"significant, within {rule.threshold:.0%}" if significant
                     else f"p >= {rule.alpha:g}: not significant")
    if not out["ci_low"] <= out["ratio"] <= out["ci_high"] and method.startswith("rounds"):
        notes.append("medians' ratio outside the CI: rounds not one shifted distribution (unstable timing?)")
    return out | {"note": "; ".join(notes + [method])}


def unstable(rows: pd.DataFrame) -> dict[tuple, str]:
    """Timing cases timed on a busy machine (``time.unstable``), with why."""
    sel = rows[rows["check"].isin(TIMING_CHECKS) & (rows["metric"] == TIME_UNSTABLE) & (rows["value"] == 1)]
    return {tuple(r[:-1]): r[-1] for r in sel.drop_duplicates(CASE)[CASE + ["detail"]].itertuples(index=False)}


def compare_timings(base: pd.DataFrame, new: pd.DataFrame, rule: Rule = Rule()) -> pd.DataFrame:
    """One row per timing case of either table, flagged ones first, biggest changes first. A case timed on a busy
    machine in either run is never called slower or faster: "n/a", saying why."""
    b_samples, n_samples, b_med, n_med = samples(base), samples(new), medians(base), medians(new)
    b_rep, n_rep = repeat_medians(base), repeat_medians(new)
    b_anchors, n_anchors = (Anchors(base), Anchors(new)) if rule.anchored else (None, None)
    anchors = {b_anchors.baseline(k) for k in b_med} - {None} if rule.anchored else set()
    busy = {k: f"baseline {v}" for k, v in unstable(base).items()} | {
        k: f"new run {v}" for k, v in unstable(new).items()}
    b_cases = list(dict.fromkeys([*b_med, *b_samples]))
    n_cases = list(dict.fromkeys([*n_med, *n_samples]))
    records = []
    for key in dict.fromkeys(b_cases + n_cases):
        empty = np.array([])
        if key in b_cases and key in n_cases:
            case_rule, raised = rule.for_case(key)
            anchored = compare_anchored(key, b_anchors, n_anchors, rule.confidence) if rule.anchored else None
            res = compare_case(b_samples.get(key, empty), n_samples.get(key, empty), b_med.get(key, math.nan),
                               n_med.get(key, math.nan), case_rule, (b_rep.get(key, empty), n_rep.get(key, empty)),
                               anchored)
            own = "the anchor of other cases: compared on its own times (drift between runs applies)"
            for extra in (raised, own if anchored is None and key in anchors else ""):
                if extra:
                    res["note"] = "; ".join(n for n in (res["note"], extra) if n)
            if key in busy:
                res |= {"verdict": "n/a", "note": f"{busy[key]}: not compared"}
        else:
            side, med, smp = ("baseline", b_med, b_samples) if key in b_cases else ("new", n_med, n_samples)
            ms = med.get(key, float(np.median(smp[key])) if key in smp else math.nan)
            res = dict(base_ms=ms if side == "baseline" else math.nan, new_ms=ms if side == "new" else math.nan,
                       verdict=f"only in {side}", note="")
        records.append(dict(zip(CASE, key)) | res)
    columns = CASE + ["base_ms", "new_ms", "ratio", "ci_low", "ci_high", "p", "verdict", "note"]
    out = pd.DataFrame(records, columns=columns)
    rank = out["verdict"].map(ORDER.index)
    change = -np.abs(np.log(out["ratio"].astype(float))).fillna(0)
    return out.assign(_r=rank, _c=change).sort_values(["_r", "_c"], kind="stable").drop(columns=["_r", "_c"]) \
        .reset_index(drop=True)


def _verdicts(rows: pd.DataFrame) -> pd.DataFrame:
    """Per verdict key: failing (any fail/error row), the status to show, and the detail of that row."""
    sel = rows[rows["status"].isin(VERDICTS)].assign(failing=lambda r: r["status"].isin(FAILING))
    sel = sel.sort_values("failing", ascending=False, kind="stable").drop_duplicates(VERDICT_KEY)
    return sel.set_index(VERDICT_KEY)[["failing", "status", "detail"]]


def failures(base: pd.DataFrame, new: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(new failures, still failing): keys failing in ``new``, split by whether they failed in ``base``."""
    b, n = _verdicts(base), _verdicts(new)
    failing = n[n["failing"]].join(b.add_prefix("base_"), how="left")
    before = failing["base_status"].fillna("absent")
    table = pd.DataFrame({"baseline": before, "new": failing["status"], "detail": failing["detail"]}).reset_index()
    was_failing = failing["base_failing"].astype("boolean").fillna(False).to_numpy(bool)
    return table[~was_failing].reset_index(drop=True), table[was_failing].reset_index(drop=True)


def _change(before: str, after: str) -> str:
    """What a verdict's move means: fixed, regressed, newly declared, or the declaration's state changed."""
    if before in FAILING | {"xfail"} and after in PASSING:
        return "fixed"
    if after in FAILING:
        return "regressed"
    if before in FAILING and after == "xfail":
        return "now declared (xfail)"
    return "declared deviation changed" if {before, after} & DECLARED else "changed"


def changed_verdicts(base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Every verdict key in both runs whose status differs (two torch versions: what the upgrade fixed, what it
    broke, which declared deviations now pass), with the new run's detail."""
    both = _verdicts(new).join(_verdicts(base).add_prefix("base_"), how="inner")
    moved = both[both["status"] != both["base_status"]]
    return pd.DataFrame({"baseline": moved["base_status"], "new": moved["status"],
                         "change": [_change(b, n) for b, n in zip(moved["base_status"], moved["status"])],
                         "detail": moved["detail"]}).reset_index()


def missing_cases(base: pd.DataFrame, new: pd.DataFrame) -> tuple[str, ...]:
    """The cases (check and CASE_KEY, by their rows) of ``base`` that ``new`` has no row of, as text."""

    key = ["check", *CASE_KEY]
    have = set(new[key].drop_duplicates().itertuples(index=False, name=None))
    lacking = [k for k in base[key].drop_duplicates().itertuples(index=False, name=None) if k not in have]
    return tuple(" ".join(str(p) for p in k if p != "") for k in lacking)


def compare(base: pd.DataFrame, new: pd.DataFrame, rule: Rule = Rule(), new_run: dict | None = None) -> Comparison:
    """Timings and verdicts of ``new`` against ``base`` (normalized result tables); ``new_run``: the new run's
    record of how it ended (results.json's ``run``)."""
    from optbench.results import incomplete

    shared = len(_verdicts(new).join(_verdicts(base).add_prefix("base_"), how="inner"))
    return Comparison(compare_timings(base, new, rule), *failures(base, new), rule, missing_cases(base, new),
                      incomplete(new_run), changed_verdicts(base, new), shared)


def machine_differences(base_meta: dict, new_meta: dict) -> str:
    """``cpu: A vs B; torch: X vs Y`` for the machine fields that differ ("" when like for like)."""
    b, n = base_meta.get("machine") or {}, new_meta.get("machine") or {}
    return "; ".join(f"{k}: {b.get(k)} vs {n.get(k)}" for k in MACHINE_KEYS if b.get(k) != n.get(k))


def timing_config_differences(base_meta: dict, new_meta: dict) -> str:
    """The timing workload settings that differ (``speed.params: 4e6 vs 3.3e7``): the cases keep their names
    (``model``, ``tensors-64``) while measuring other sizes."""
    def settings(meta):
        cfg = meta.get("config") or {}
        return {f"{section}.{k}": v for section in ("speed", "scaling") for k, v in (cfg.get(section) or {}).items()
                if k in ("params", "tensors_params", "threads", "width", "layers", "vocab")}
    b, n = settings(base_meta), settings(new_meta)
    return "; ".join(f"{k}: {b.get(k)} vs {n.get(k)}" for k in sorted(set(b) | set(n)) if b.get(k) != n.get(k))
