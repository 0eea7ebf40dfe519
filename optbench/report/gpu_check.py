"""The GPU check's report: the machine as probed, then what each section of ``optbench gpu-check`` found.

``summary`` reads each section's run back (results.json, or the journal of a run stopped at its deadline) and
writes one Markdown page: a line per section (exit code, its own verdict line, time, how it ended), every failing,
erroring or xpassing row, the Adafactor kernels' step time and % of HBM roofline by size, and every suite's % of
roofline by variant.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from optbench.metrics import ROOFLINE_PCT, SPEED_GB_PER_S, TIME_STEP_MS
from optbench.results import FAILING, load_run, verdict
from optbench.usage import UsageError

SHOWN_FAILURES = 25


def _run(run_dir: Path) -> tuple[dict, pd.DataFrame] | None:
    try:
        return load_run(run_dir)
    except (UsageError, OSError, ValueError):
        return None


def _rows(run_dir: Path) -> pd.DataFrame | None:
    run = _run(run_dir)
    return run[1] if run else None


STAMP = re.compile(r"^\[\s*[0-9.]+ s\] ")  # a section log line's stamp: seconds since the section began


def stamped(line: str, seconds: float) -> str:
    """A section log's line: ``line`` stamped with the seconds since its section began (where its time went)."""
    return f"[{seconds:6.1f} s] {line}"


def _verdict(out: Path, name: str) -> str:
    """The section's verdict from its results (the rule ``optbench run`` applies); its log's error line when it
    wrote none (a usage error, a crash before the first case)."""
    if run := _run(out / name):
        return str(verdict(run[1], run=run[0].get("run")))
    log = out / f"{name}.log"
    lines = [STAMP.sub("", ln).strip() for ln in log.read_text(errors="replace").splitlines()] if log.is_file() else []
    return next((ln for ln in reversed(lines) if ln.startswith("optbench: error")), "no results")


def _md(frame: pd.DataFrame) -> str:
    return frame.to_markdown(index=False) if len(frame) else "(none)"


def _failures(sections, out: Path) -> pd.DataFrame:
    found = []
    for s in sections:
        rows = _rows(out / s.name)
        if rows is None:
            continue
        bad = rows[rows.status.isin(FAILING | {"xpass"}) & (rows.fqn == "")]
        for r in bad.to_dict("records"):
            found.append({"section": s.name, "suite": r["suite"], "impl": r["impl"], "dtype": r["dtype"],
                          "hparams": r["hparams"], "check": r["check"], "status": r["status"], "metric": r["metric"],
                          "value": f"{r['value']:.4g}", "detail": str(r["detail"])[:160].replace("|", "/")})
    return pd.DataFrame(found)


def _timing(rows: pd.DataFrame, check: str) -> pd.DataFrame:
    """Per case of ``check``: median ms/step, GB/s and % of roofline, one row each."""
    keep = rows[(rows.check == check) & (rows.fqn == "") & rows.metric.isin([TIME_STEP_MS, SPEED_GB_PER_S,
                                                                                 ROOFLINE_PCT])]
    if keep.empty:
        return keep
    table = keep.pivot_table(index=["suite", "impl", "dtype", "workload"], columns="metric", values="value",
                             aggfunc="first").reset_index()
    return table


def _roofline_table(out: Path) -> str:
    rows = _rows(out / "adafactor-roofline")
    table = _timing(rows, "scaling") if rows is not None else pd.DataFrame()
    if table.empty:
        return "(no timing rows)"
    table["cell"] = [f"{ms:.3f} ms, {pct:.0f} %" for ms, pct in zip(table[TIME_STEP_MS],
                                                                     table.get(ROOFLINE_PCT, float("nan")))]
    wide = table.pivot_table(index=["dtype", "workload"], columns="impl", values="cell", aggfunc="first")
    return wide.reset_index().fillna("").to_markdown(index=False)


def _speed_table(out: Path) -> str:
    rows = _rows(out / "speed")
    table = _timing(rows, "speed") if rows is not None else pd.DataFrame()
    if table.empty or ROOFLINE_PCT not in table:
        return "(no timing rows)"
    table = table[table.workload == "model"] if "model" in set(table.workload) else table
    table["cell"] = [f"{pct:.0f} % ({ms:.3f} ms)" for ms, pct in zip(table[TIME_STEP_MS], table[ROOFLINE_PCT])]
    wide = table.pivot_table(index=["suite", "dtype"], columns="impl", values="cell", aggfunc="first")
    return wide.reset_index().fillna("").to_markdown(index=False)


FINDING_EXITS = {0: ("no longer reproduces", "no longer reproduces (remove its declaration once the fix is released)"),
                 1: ("reproduce as declared", "reproduces (as declared)"), 2: ("could not run", "could not run")}
HUNG = ("crashed or hung", "crashed or hung")


def _findings(out: Path) -> pd.DataFrame:
    """The findings section's table (finding, exit code, what the script said last) with what each exit means."""
    path = out / "findings.tsv"
    if not path.is_file():
        return pd.DataFrame()
    rows = [line.split("\t", 2) for line in path.read_text().splitlines() if line.strip()]
    return pd.DataFrame([{"finding": f, "exit": int(c), "means": FINDING_EXITS.get(int(c), HUNG)[1],
                          "label": FINDING_EXITS.get(int(c), HUNG)[0],
                          "it said": said.replace("|", "/")} for f, c, said in rows])


def summary(out: Path, sections, ends: dict, machine: dict) -> str:
    """The check's Markdown summary; ``ends``: section name -> (exit code or None, seconds, how it ended)."""
    lines = [f"# optbench gpu-check: {machine['name']}", "", f"{machine['about']}. Measured memory bandwidth (in-place "
             f"stream over {machine['probe_gib']:g} GiB, the best of scale/axpy/addcmul: {machine['probe_kernel']}): "
             f"**{machine['gb_per_s']:.0f} GB/s**.", "", "| section | exit | verdict | seconds | how it ended |",
             "|---|---|---|---|---|"]
    findings = _findings(out)
    for s in sections:
        code, seconds, how = ends.get(s.name, (None, 0.0, "not run"))
        said = _verdict(out, s.name).replace("|", "/") if code is not None else "-"
        if getattr(s, "scripts", False) and code is not None:
            counts = findings["label"].value_counts() if len(findings) else {}
            said = "; ".join(f"{n} {label}" for label, n in counts.items()) or "no script ran"
        lines.append(f"| {s.name} | {'-' if code is None else code} | {said} | {seconds:.0f} | {how} |")
    if len(findings):
        lines += ["", "## CUDA findings' scripts", "", _md(findings.drop(columns="label"))]
    failures = _failures(sections, out)
    lines += ["", f"## Failing, erroring and xpassing cases ({len(failures)})", "",
              _md(failures.head(SHOWN_FAILURES))]
    if len(failures) > SHOWN_FAILURES:
        lines.append(f"\n... and {len(failures) - SHOWN_FAILURES} more: each section's report.md")
    if any(s.name == "adafactor-roofline" for s in sections):
        lines += ["", "## Adafactor: step time and % of roofline by size", "", _roofline_table(out)]
    if any(s.name == "speed" for s in sections):
        lines += ["", "## Every suite's % of roofline on the model workload (step time)", "", _speed_table(out)]
    return "\n".join(lines) + "\n"
