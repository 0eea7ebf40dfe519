"""``optbench report --dashboard``: one static HTML page over many runs (a history folder, run folders,
results files).

The page is self-contained (inline CSS, charts as inline SVG, no script, no network, no other file), so
it opens from a file:// URL and can be mailed or archived. Sections: the runs covered (machines, torch
versions, commits, last run), the median step time of every speed case against run with its IQR band,
the latest parity verdict per suite x implementation x dtype, the latest roofline % and GB/s (and the
scaling lines, when the runs have them), the latest state memory per parameter, and the declared
findings the latest runs still hit. Nothing in it depends on when it was rendered: the same runs give
the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import optbench
from optbench.metrics import (
    MEM_PEAK_TRANSIENT_BYTES,
    MEM_PEAK_TRANSIENT_BYTES_PER_PARAM,
    MEM_STATE_BYTES,
    MEM_STATE_BYTES_PER_PARAM,
    ROOFLINE_BYTES_PER_PARAM,
    ROOFLINE_PCT,
    ROOFLINE_PROBE_GB_PER_S,
    SCALING_PARAMS,
    SPEED_GB_PER_S,
    SPEED_OVERHEAD,
    TIME_COMPILE_S,
    TIME_STEP_MS,
    TIME_STEP_MS_CV,
)
from optbench.report import dashboard_charts as charts
from optbench.report import dashboard_data as data
from optbench.report import dashboard_html as h
from optbench.report.tables import num

SECTIONS = {"runs": "Runs", "history": "Step time history", "parity": "Parity matrix (latest)",
            "roofline": "Roofline and bandwidth (latest)", "memory": "Memory (latest)", "findings": "Findings (latest)"}
DEFAULT_OUT = Path("reports/dashboard")
FINDINGS_MD = Path(optbench.__file__).resolve().parent.parent / "docs" / "findings.md"  # in a repository checkout
OPEN_SUITES = 3  # up to this many suites, their <details> start open


def _machine_keys(rows: pd.DataFrame) -> list[str]:
    return ["machine"] if rows["machine"].nunique() > 1 else []


def runs_section(runs: pd.DataFrame) -> str:
    last = runs.iloc[-1]
    machines = runs.drop_duplicates("machine")
    facts = {
        "Machines": "; ".join(f"{m.machine} ({m.cpu}, {m.cpu_threads} threads{', ' + m.gpu if m.gpu else ''})"
                              for m in machines.itertuples()),
        "torch": ", ".join(dict.fromkeys(runs["torch"])),
        "Commits": f"{runs['git_sha'].replace('', 'nogit').nunique()}: "
                   + ", ".join(dict.fromkeys((s or "nogit")[:7] for s in runs["git_sha"])),
        "Runs": (f"{len(runs)}, {runs['created'].iloc[0]} to {last['created']}" if len(runs) > 1
                 else f"1, {last['created']}"),
        "Last run": f"{last['created']}: {last['suites']} on {last['device']}, "
                    f"commit {(last['git_sha'] or 'nogit')[:7]}, "
                    f"torch {last['torch']}"}
    table = runs.assign(commit=runs["git_sha"].str[:7].replace("", "nogit"), wall_s=runs["wall_s"].map(num))[
        ["created", "commit", "machine", "torch", "suites", "device", "wall_s", "run"]
    ].rename(columns={"wall_s": "wall s"})
    dl = "".join(f"<dt>{h.e(k)}</dt><dd>{h.e(v)}</dd>" for k, v in facts.items())
    return (f'<dl class="facts">{dl}</dl>'
            + h.details(f"Every run ({len(runs)})", h.table(table, numeric=("wall s",)), False))


def history_section(rows: pd.DataFrame, runs: pd.DataFrame) -> str:
    series = data.step_series(rows, runs)
    if series.empty:
        return h.none("No speed rows in these runs (checks=[speed]).")
    parts = ['<p class="note">Median step time per run; the band is the rounds\' interquartile range (median '
             '&plusmn; IQR/2 where the rounds were not recorded). "slower"/"faster": the latest run against the one '
             'before, by <code>optbench compare</code>\'s rule (Mann-Whitney on the rounds, p &lt; 0.01, and more '
             'than 5 % apart).</p>']
    suites = sorted(series["suite"].unique())
    for suite in suites:
        body = []
        for machine, part in series[series["suite"] == suite].groupby("machine", sort=True):
            title = f"{suite}: median step time per run" + (f" on {machine}" if series["machine"].nunique() > 1 else "")
            body.append(charts.history(part, title, salt=f"history-{suite}-{machine}"))
            change = data.sort_cases(data.changes(part))
            shown = change[[*_machine_keys(series), "impl", "dtype", "hparams"]].assign(**{
                "median ms": change["ms"].map(num), "IQR ms": change["iqr"].map(num), "runs": change["runs"],
                "vs previous": change["change"].map(lambda v: "" if np.isnan(v) else f"{v:+.1%}"),
                "change": change["verdict"]})
            classes = pd.DataFrame("", index=shown.index, columns=shown.columns)
            classes["change"] = change["verdict"].where(change["verdict"].isin(["slower", "faster"]), "")
            body.append(h.table(shown, numeric=("median ms", "IQR ms", "runs", "vs previous"), classes=classes))
        cases = series[series["suite"] == suite].drop_duplicates([*data.CASE, "hparams"])
        body_html = "".join(body)
        parts.append(h.details(f"{suite} ({len(cases)} cases)", body_html, len(suites) <= OPEN_SUITES))
    return "".join(parts)


def parity_section(latest: pd.DataFrame, runs: pd.DataFrame) -> str:
    cells = data.parity_cells(latest)
    if cells.empty:
        return h.none("No parity rows in these runs (checks=[parity]).")
    impls = sorted(cells["impl"].unique(), key=data.impl_rank)
    dtypes = sorted(cells["dtype"].unique(), key=data.dtype_rank)
    present = set(zip(cells["dtype"], cells["impl"]))
    columns = [(d, i) for d in dtypes for i in impls if (d, i) in present]
    index = cells.set_index(["machine", "suite", "dtype", "impl"])
    labels = {r["run"]: data.run_label(r) for _, r in runs.iterrows()}
    source = latest.drop_duplicates(["machine", "suite"]).set_index(["machine", "suite"])["run"]
    keys = _machine_keys(latest)
    out, classes, titles = [], [], []
    for machine, suite in sorted(set(zip(cells["machine"], cells["suite"]))):
        texts, cls, tips = [], [], []
        for d, i in columns:
            key = (machine, suite, d, i)
            if key not in index.index:
                texts.append(""), cls.append(""), tips.append("")
                continue
            c = index.loc[key]
            count = f" {c.n_worst}/{c.n}" if c.status not in ("pass",) or c.n_worst != c.n else f" {c.n}"
            texts.append(data.SHOWN[c.status] + count)
            cls.append(f"v-{c.status}")
            tips.append("; ".join(filter(None, [f"{data.SHOWN[c.status]}: {c['which']}", c["worst_at"]])))
        head = [machine] * len(keys) + [suite, labels.get(source.get((machine, suite)), "")]
        out.append(head + texts), classes.append(["nw"] * len(head) + cls), titles.append([""] * len(head) + tips)
    names = [*keys, "suite", "run", *(f"{i} {d}" for d, i in columns)]
    frame = pd.DataFrame(out, columns=names)
    note = ('<p class="note">Worst verdict over the hparam sets of the latest run with parity rows, and how many '
            'sets have it (pass 7: all seven pass; FAIL 2/7: two of seven fail). FAIL: past tolerance; xfail: a '
            'declared upstream deviation (docs/findings.md); n/a: the implementation does not take the set; ERR: it '
            'raised. Hover a cell for the sets and the worst error.</p>')
    return note + h.table(frame, classes=pd.DataFrame(classes, columns=names),
                          titles=pd.DataFrame(titles, columns=names))


def _bar(pct: float) -> str:
    if not np.isfinite(pct):
        return ""
    return f'<span class="bar" style="width:{max(0.0, min(pct, 100.0)):.0f}px"></span>{h.e(num(pct))} %'


def _by_suite(shown: pd.DataFrame, **kw) -> str:
    """One table; with more than OPEN_SUITES suites, a collapsed table per suite."""
    if shown["suite"].nunique() <= OPEN_SUITES:
        return h.table(shown, **kw)
    return "".join(h.details(f"{suite} ({len(part)} rows)", h.table(part.reset_index(drop=True), **kw), False)
                   for suite, part in shown.groupby("suite", sort=False))


def _drop_empty(frame: pd.DataFrame, metrics) -> pd.DataFrame:
    return frame.drop(columns=[m for m in metrics if m in frame and frame[m].isna().all()])


def roofline_section(latest: pd.DataFrame) -> str:
    keys = [*_machine_keys(latest), "suite", "impl", "dtype"]
    speed = latest[(latest["check"] == "speed") & latest["workload"].isin(data.MAIN_WORKLOADS)]
    metrics = [TIME_STEP_MS, TIME_STEP_MS_CV, SPEED_GB_PER_S, ROOFLINE_PCT, ROOFLINE_BYTES_PER_PARAM,
               ROOFLINE_PROBE_GB_PER_S, TIME_COMPILE_S]
    main = data.sort_cases(_drop_empty(data.wide(speed, keys, metrics), metrics))
    parts = []
    if main.empty:
        parts.append(h.none("No speed rows in these runs (checks=[speed])."))
    else:
        names = {TIME_STEP_MS: "median ms", TIME_STEP_MS_CV: "CV", SPEED_GB_PER_S: "GB/s",
                 ROOFLINE_PCT: "roofline", ROOFLINE_BYTES_PER_PARAM: "bytes/param",
                 ROOFLINE_PROBE_GB_PER_S: "probe GB/s", TIME_COMPILE_S: "compile s"}
        shown = main[keys].copy()
        for m in metrics:
            if m in main:
                fmt = {ROOFLINE_PCT: _bar, TIME_STEP_MS_CV: lambda v: f"{v:.0%}" if np.isfinite(v) else ""}.get(m, num)
                shown[names[m]] = main[m].map(fmt)
        parts += ['<p class="note">At the latest run with speed rows, on the main workload. roofline: the step\'s '
                  'bytes moved per second as a percentage of the bandwidth a copy of the same size reaches '
                  '(probe GB/s).</p>',
                  _by_suite(shown, numeric=[v for k, v in names.items() if k in main and k != ROOFLINE_PCT],
                            raw=("roofline",))]
    overhead = latest[(latest["check"] == "speed") & ~latest["workload"].isin(data.MAIN_WORKLOADS)
                      & (latest["metric"] == SPEED_OVERHEAD) & (latest["fqn"] == "")]
    if not overhead.empty:
        table = overhead.pivot_table(index=keys, columns="workload", values="value", aggfunc="first").reset_index()
        table = data.sort_cases(table)
        workloads = sorted(set(overhead["workload"]))
        parts += ["<h3>Overhead workloads (time relative to the main workload's per-parameter cost)</h3>",
                  _by_suite(table.assign(**{w: table[w].map(lambda v: f"{num(v)}x" if num(v) else "")
                                            for w in workloads}),
                            numeric=workloads)]
    parts.append(scaling_part(latest, keys))
    return "".join(parts)


def scaling_part(latest: pd.DataFrame, keys: list[str]) -> str:
    sc = latest[(latest["check"] == "scaling") & latest["workload"].str.startswith("params-")]  # the size sweep
    frame = data.wide(sc, [*keys, "workload"], [SCALING_PARAMS, TIME_STEP_MS, ROOFLINE_PCT])
    frame = frame.rename(columns={SCALING_PARAMS: "params"}).dropna(subset=["params", TIME_STEP_MS])
    if frame.empty:
        return ""
    parts = ["<h3>Scaling (step time and roofline % against the number of parameters)</h3>"]
    for key, part in frame.groupby([k for k in keys if k in ("machine", "suite")], sort=True):
        name = " on ".join(key if isinstance(key, tuple) else (key,))
        parts.append(charts.scaling(part, f"{name}: scaling", salt=f"scaling-{name}"))
    return "".join(parts)


def memory_section(latest: pd.DataFrame) -> str:
    keys = [*_machine_keys(latest), "suite", "impl", "dtype"]
    metrics = [MEM_STATE_BYTES_PER_PARAM, MEM_PEAK_TRANSIENT_BYTES_PER_PARAM, MEM_STATE_BYTES,
               MEM_PEAK_TRANSIENT_BYTES]
    frame = data.sort_cases(_drop_empty(data.wide(latest[latest["check"] == "memory"], keys, metrics), metrics))
    if frame.empty:
        return h.none("No memory rows in these runs (checks=[memory]).")
    names = {MEM_STATE_BYTES_PER_PARAM: "state B/param", MEM_PEAK_TRANSIENT_BYTES_PER_PARAM: "peak transient B/param",
             MEM_STATE_BYTES: "state bytes", MEM_PEAK_TRANSIENT_BYTES: "peak transient bytes"}
    shown = frame[keys].copy()
    for m in metrics:
        if m in frame:
            fmt = (lambda v: num(v, ",.0f")) if m in (MEM_STATE_BYTES, MEM_PEAK_TRANSIENT_BYTES) else num
            shown[names[m]] = frame[m].map(fmt)
    note = ('<p class="note">Optimizer state after one step on the speed workload, and the peak of memory the step '
            'allocates and frees (transient), per trained parameter.</p>')
    return note + _by_suite(shown, numeric=[names[m] for m in metrics if m in frame])


def findings_section(latest: pd.DataFrame, titles: dict[str, str]) -> str:
    found = data.findings(latest)
    if found.empty:
        return h.none("No declared deviation (xfail) in the latest runs.")
    shown = pd.DataFrame({"finding": found["finding"], "title": found["finding"].map(lambda f: titles.get(f, "")),
                          "suites": found["suites"], "impls": found["impls"], "dtypes": found["dtypes"],
                          "rows": found["rows"],
                          "example": found["detail"].map(lambda d: d if len(d) <= 160 else d[:157] + "...")})
    if not titles:
        shown = shown.drop(columns="title")
    tips = pd.DataFrame("", index=shown.index, columns=shown.columns)
    tips["example"] = found["detail"]
    source = ("titles from docs/findings.md" if titles
              else "docs/findings.md was not found beside the package: ids and details only")
    return f'<p class="note">Declared upstream deviations the latest runs still hit ({h.e(source)}).</p>' + h.table(
        shown, numeric=("rows",), titles=tips)


def build_html(runs: pd.DataFrame, rows: pd.DataFrame, titles: dict[str, str] | None = None) -> str:
    """The dashboard page for ``runs``/``rows`` (``optbench.engine.history.read_history``)."""
    latest = data.latest(rows, runs, set(rows["check"]))
    bodies = {"runs": runs_section(runs), "history": history_section(rows, runs),
              "parity": parity_section(latest[latest["check"] == "parity"], runs),
              "roofline": roofline_section(latest), "memory": memory_section(latest),
              "findings": findings_section(latest, titles or {})}
    sections = "".join(f'<section id="{key}"><h2>{h.e(SECTIONS[key])}</h2>{bodies[key]}</section>' for key in SECTIONS)
    return ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,"><title>optbench dashboard</title>'
            f"<style>{h.CSS}</style></head>\n<body><h1>optbench dashboard</h1>{sections}</body></html>\n")


def write_dashboard(runs: pd.DataFrame, rows: pd.DataFrame, out_dir=DEFAULT_OUT) -> Path:
    """Write ``out_dir/dashboard.html`` over ``runs`` and their ``rows`` (``optbench.engine.history.read_history``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "dashboard.html"
    path.write_text(build_html(runs, rows, data.finding_titles(FINDINGS_MD)), encoding="utf-8")
    return path
