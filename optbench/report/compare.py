"""``optbench compare`` as Markdown: the timing table, new failures, what still fails, a summary line."""

from __future__ import annotations

import math

import pandas as pd

from optbench.perf.compare import CASE, IN_BOTH, ORDER, VERDICT_KEY, Comparison
from optbench.report.tables import escape, markdown, num


def key_text(row) -> str:
    """A verdict row's key as one path: suite/impl/dtype/.../tensor."""
    return escape("/".join(str(row[k]) for k in VERDICT_KEY if str(row[k])))


def summary(result: Comparison) -> str:
    """One line: the counts per verdict, the new failures by key, how many still fail."""
    counts = result.timings["verdict"].value_counts()
    shown = [v for v in IN_BOTH if v != "unclear" or counts.get(v, 0)]  # (unclear: only where there is one)
    both = sum(int(counts.get(v, 0)) for v in IN_BOTH)
    parts = [f"{both} case{'s' * (both != 1)}: " + ", ".join(f"{int(counts.get(v, 0))} {v}" for v in shown)]
    if one_side := [f"{int(counts[v])} {v}" for v in ORDER[len(IN_BOTH):] if counts.get(v, 0)]:
        parts[0] += f" ({', '.join(one_side)})"
    keys = [key_text(r) for _, r in result.new_failures.iterrows()]
    listed = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    parts.append(f"{len(keys)} new failure{'s' * (len(keys) != 1)}" + (f": {listed}" if keys else ""))
    if k := len(result.still_failing):
        parts.append(f"{k} still failing (in both runs; not a regression by this comparison, but failing)")
    if result.changed is not None and len(result.changed):
        kinds = result.changed["change"].value_counts()
        parts.append(f"{len(result.changed)} verdict{'s' * (len(result.changed) != 1)} changed ("
                     + ", ".join(f"{int(n)} {k}" for k, n in kinds.items()) + ")")
    if result.missing:
        more = len(result.missing) - 5
        shown = ", ".join(map(escape, result.missing[:5])) + (f" and {more} more" if more > 0 else "")
        parts.append(f"{len(result.missing)} case{'s' * (len(result.missing) != 1)} of the baseline missing: {shown}")
    if result.incomplete:
        parts.insert(0, f"the new run is INCOMPLETE ({result.incomplete})")
    if result.compared_nothing and not result.regressed:
        parts.insert(0, "no timing case could be compared and the runs share no verdict")
    elif result.unclear and not result.regressed:
        parts.insert(0, "a case changed by more than the threshold within what one process per run cannot tell from a "
                        "difference between processes (run both with speed.repeats=5 to decide)")
    word = ("REGRESSED" if result.regressed else "NOTHING COMPARED" if result.compared_nothing
            else "UNDECIDED" if result.unclear else "OK")
    return f"**{word}:** " + "; ".join(parts) + "."


def _ratio(r: float) -> str:
    return "" if math.isnan(r) else "inf" if math.isinf(r) else f"{r:.3f}"


def _shown(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the key columns that are empty in every row (``workload`` in older files)."""
    return frame.drop(columns=[c for c in VERDICT_KEY if c in frame and not frame[c].astype(str).any()])


def render(result: Comparison) -> str:
    """The comparison as Markdown: timing table, new failures, still failing, summary line."""
    t, rule = result.timings, result.rule
    ci = ["" if math.isnan(lo) else f"[{_ratio(lo)}, {_ratio(hi)}]" for lo, hi in zip(t["ci_low"], t["ci_high"])]
    table = _shown(t[CASE]).assign(**{
        "base ms": t["base_ms"].map(num), "new ms": t["new_ms"].map(num),
        "ratio": t["ratio"].map(_ratio),
        f"{rule.confidence:.0%} CI": ci, "p": t["p"].map(lambda p: f"{p:.2g}" if math.isfinite(p) else ""),
        "verdict": t["verdict"], "note": t["note"]})
    parts = [f"## Step time, new vs baseline (flagged when p < {rule.alpha:g} and beyond {rule.threshold:.0%})",
             markdown(table)]
    changed = result.changed if result.changed is not None else pd.DataFrame()
    for title, frame in (("New failures", result.new_failures), ("Still failing", result.still_failing),
                         ("Verdicts that changed (fixed, regressed, declared)", changed)):
        if len(frame):
            parts += [f"## {title}", markdown(_shown(frame))]
    if result.missing:
        parts += ["## Cases the baseline ran and the new run lacks", "\n".join(f"- {m}" for m in result.missing)]
    return "\n\n".join(parts + [summary(result)])
