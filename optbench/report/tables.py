"""Turn a results JSON (schema_version 1) into a Markdown report with PNG plots.

``load_results`` reads and validates the file; ``render_report`` writes ``report.md`` with its
tables (parity, worst tensors, cross-implementation agreement, state_dict round-trip, speed,
memory, known failures, skips/errors) and the ``step_time.png`` / ``error_vs_step.png`` plots.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from optbench.results import COLUMNS, SCHEMA_VERSION  # noqa: E402
CASE = ["impl", "dtype", "hparams"]
FORLOOP = "for-loop"
PNG_META = {"Software": None}  # no version stamp: identical inputs give identical bytes


def load_results(path) -> tuple[dict, pd.DataFrame]:
    """Read a results file; return (metadata without ``rows``, DataFrame of the rows)."""
    def bad(reason: str) -> ValueError:
        return ValueError(f"{path}: not an optbench results file ({reason})")

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad(f"not JSON: {e}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise bad(f"top level is a JSON {type(data).__name__}, not an object")
    if "schema_version" not in data:
        raise bad("no schema_version")
    if data["schema_version"] != SCHEMA_VERSION:
        raise bad(f"schema_version {data['schema_version']!r}; only {SCHEMA_VERSION} is supported")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise bad("no 'rows' list")
    meta = {k: v for k, v in data.items() if k != "rows"}
    return meta, _normalize(pd.DataFrame(rows, columns=COLUMNS))


def _float(x) -> float:
    try:
        return float(x)  # also takes "inf", "-inf", "nan"
    except (TypeError, ValueError):
        return math.nan


def _normalize(rows: pd.DataFrame) -> pd.DataFrame:
    """Floats in ``value``, hashable text in ``hparams``, "" for missing text fields."""
    rows = rows.reindex(columns=COLUMNS).copy()
    rows["value"] = rows["value"].map(_float).astype(float)
    rows["hparams"] = rows["hparams"].map(
        lambda h: h if isinstance(h, str) else "" if h is None else json.dumps(h, sort_keys=True))
    text = ["impl", "dtype", "fqn", "tensor", "detail", "status", "check", "metric", "unit"]
    rows[text] = rows[text].fillna("").astype(str)
    return rows


def _num(v, fmt: str = ".3g") -> str:
    """``v`` to 3 significant digits (plain where short, 812 not 8.12e+02); "inf" for infinities."""
    v = _float(v)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    if fmt == ".3g" and 1e-3 <= abs(r := float(format(v, fmt))) < 1e6:
        return format(r, "g")
    return format(v, fmt)


def _eng(v) -> str:
    """Scientific notation like 1.23e6."""
    mantissa, _, exponent = _num(v, ".2e").partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def _join(a: pd.DataFrame, b: pd.DataFrame, **kw) -> pd.DataFrame:
    """Outer join keeping the order in which keys first appear (a's, then b's)."""
    return a.join(b, how="outer", **kw).reindex(a.index.append(b.index).unique())


def _table(df: pd.DataFrame) -> str:
    """Markdown pipe table of ``df`` (tabulate's when installed, else a minimal one)."""
    if df.empty:
        return "_none_"
    df = df.astype(str).apply(lambda c: c.str.replace("|", "\\|").str.replace("\n", " "))
    try:
        import tabulate  # noqa: F401
        return df.to_markdown(index=False)
    except ImportError:
        lines = ["| " + " | ".join(df.columns) + " |", "|" + "|".join("---" for _ in df.columns) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in df.itertuples(index=False)])


def _metric(rows: pd.DataFrame, metric: str, aggregate: bool = True) -> pd.DataFrame:
    sel = rows[rows["metric"] == metric]
    return sel[sel["fqn"] == ""] if aggregate else sel


def _by_case(rows: pd.DataFrame, metric: str, keys=CASE) -> pd.DataFrame:
    """One aggregate row per case key (first seen) with value/status/detail of ``metric``."""
    return _metric(rows, metric).drop_duplicates(keys).set_index(keys)[["value", "status", "detail"]]


def _summary(rows: pd.DataFrame) -> str:
    verdict = "FAIL" if rows["status"].isin(["fail", "error"]).any() else "PASS"
    rank = {"error": 4, "fail": 3, "skip": 2, "pass": 1}
    ranked = rows.assign(r=rows["status"].map(rank)).dropna(subset=["r"])
    worst = ranked.groupby(CASE, sort=False)["r"].max().value_counts()
    n = {s: int(worst.get(r, 0)) for s, r in rank.items()}
    known = rows[rows["check"] == "known_failure"]["status"].value_counts()
    return (f"**Overall: {verdict}.** Cases (impl x dtype x hparams): {n['pass']} passed, "
            f"{n['fail']} failed, {n['error']} errored, {n['skip']} skipped. Known upstream "
            f"failures: {int(known.get('xfail', 0))} xfail, {int(known.get('xpass', 0))} xpass.")


def _config_table(meta: dict, rows: pd.DataFrame) -> pd.DataFrame:
    cfg = meta.get("config") or {}
    suite = cfg.get("suite") or {}
    dtypes = suite.get("dtypes") or list(dict.fromkeys(rows["dtype"]))
    items = {"suite": suite.get("name"), "optimizer": suite.get("optimizer"), "steps": cfg.get("steps"),
             "dtypes": ", ".join(map(str, dtypes)),
             "hparams": ", ".join(dict.fromkeys(h for h in rows["hparams"] if h)),
             "seed": cfg.get("seed", (cfg.get("workload") or {}).get("seed")), "created": meta.get("created")}
    return pd.DataFrame([(k, v) for k, v in items.items() if v not in (None, "")], columns=["key", "value"])


def _parity(rows: pd.DataFrame) -> pd.DataFrame:
    verdict, tol = _by_case(rows, "parity.max_err_eps"), _by_case(rows, "parity.tol_eps")
    out = verdict.join(tol["value"].rename("tol")).reset_index()
    return pd.DataFrame({**{k: out[k] for k in CASE}, "max err (eps)": out["value"].map(_num),
                         "tol (eps)": out["tol"].map(_num), "verdict": out["status"], "detail": out["detail"]})


def _worst(rows: pd.DataFrame) -> pd.DataFrame:
    failing = _by_case(rows, "parity.max_err_eps").query("status == 'fail'").index
    per = _metric(rows, "parity.max_err_eps", aggregate=False)
    per = per[(per["fqn"] != "") & per.set_index(CASE).index.isin(failing)]
    groups = [g.sort_values("value", ascending=False, kind="stable").head(5)
              for _, g in per.groupby(CASE, sort=False)]
    top = pd.concat(groups) if groups else per
    return top[CASE + ["fqn", "tensor"]].assign(**{"max err (eps)": top["value"].map(_num)})


def _cross(rows: pd.DataFrame) -> pd.DataFrame:
    out = _by_case(rows, "parity.xmax_err_eps_vs_forloop").reset_index()
    return out[CASE].assign(**{"eps vs for-loop": out["value"].map(_num), "verdict": out["status"],
                               "detail": out["detail"]})


def _roundtrip(rows: pd.DataFrame) -> pd.DataFrame:
    rt = rows[rows["check"] == "roundtrip"]
    keys = ["impl", "dtype", "hparams"] if rt["dtype"].nunique() > 1 else ["impl", "hparams"]
    pos = _by_case(rt, "roundtrip.positional_misattributed", keys)
    name = _by_case(rt, "roundtrip.by_name_bitwise", keys)
    out = _join(pos.add_suffix("_p"), name).reset_index()
    return out[keys].assign(**{"positional misattributed": out["value_p"].map(lambda v: _num(v, ".0f")),
                               "positional detail": out["detail_p"].fillna(""),
                               "by-name bitwise": out["status"].fillna(""), "by-name detail": out["detail"].fillna("")})


def _speed_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """Wide frame of speed metrics per case, plus ``ratio`` = median / for-loop median (same dtype, hparams)."""
    sp = rows[(rows["check"] == "speed") & (rows["fqn"] == "")]
    if sp.empty:
        return pd.DataFrame()
    wide = sp.pivot_table(index=CASE, columns="metric", values="value", aggfunc="first", sort=False).reindex(
        columns=["time.step_ms", "time.step_ms_iqr", "speed.params_per_s", "speed.gb_per_s", "time.rounds"])
    wide = wide.reset_index()
    base = wide[wide["impl"] == FORLOOP].set_index(["dtype", "hparams"])["time.step_ms"]
    ref = [base.get((d, h), math.nan) for d, h in zip(wide["dtype"], wide["hparams"])]
    return wide.assign(ratio=wide["time.step_ms"] / np.array(ref, dtype=float))


def _speed(wide: pd.DataFrame) -> pd.DataFrame:
    return wide[CASE].assign(**{
        "median ms": wide["time.step_ms"].map(_num), "IQR ms": wide["time.step_ms_iqr"].map(_num),
        "params/s": wide["speed.params_per_s"].map(_eng),
        "GB/s": wide["speed.gb_per_s"].map(_num), "rounds": wide["time.rounds"].map(lambda v: _num(v, ".0f")),
        "x vs for-loop": wide["ratio"].map(lambda v: _num(v) + "x" if _num(v) else "")})


def _memory(rows: pd.DataFrame) -> pd.DataFrame:
    total, per = _by_case(rows, "mem.state_bytes"), _by_case(rows, "mem.state_bytes_per_param")
    out = _join(total, per["value"].rename("per").to_frame()).reset_index()
    return out[CASE].assign(**{"state bytes": out["value"].map(lambda v: _num(v, ",.0f")),
                               "bytes/param": out["per"].map(_num)})


def _save(fig, path: Path) -> bool:
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata=PNG_META)
    plt.close(fig)
    return True


def _plot_step_time(wide: pd.DataFrame, path: Path) -> bool:
    """Grouped bars: one group per dtype, one bar per impl (impl [hparams] if several); IQR/2 error bars."""
    if wide.empty or wide["time.step_ms"].notna().sum() == 0:
        path.unlink(missing_ok=True)
        return False
    many = wide["hparams"].nunique() > 1
    wide = wide.assign(label=wide["impl"] + (" [" + wide["hparams"] + "]" if many else ""))
    dtypes, labels = list(dict.fromkeys(wide["dtype"])), list(dict.fromkeys(wide["label"]))
    width = 0.8 / len(labels)
    fig, ax = plt.subplots(figsize=(max(8.0, 3 + 1.5 * len(dtypes) * max(1, len(labels) / 3)), 4.5))
    for i, label in enumerate(labels):
        sub = wide[wide["label"] == label].set_index("dtype").reindex(dtypes)
        x = np.arange(len(dtypes)) + (i - (len(labels) - 1) / 2) * width
        ax.bar(x, sub["time.step_ms"], width, yerr=sub["time.step_ms_iqr"].fillna(0) / 2, capsize=3, label=label)
    finite = wide["time.step_ms"][np.isfinite(wide["time.step_ms"]) & (wide["time.step_ms"] > 0)]
    if len(finite) and finite.max() / finite.min() > 50:
        ax.set_yscale("log")
    ax.set_xticks(np.arange(len(dtypes)), dtypes)
    ax.set(ylabel="median step time (ms)", title="Step time by implementation (error bars: IQR/2)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def _plot_error_vs_step(rows: pd.DataFrame, path: Path) -> bool:
    """Per-dtype log plot of ``parity.step_max_err_eps`` against step, with the 16 + t eps tolerance."""
    sel = _metric(rows, "parity.step_max_err_eps").dropna(subset=["step"])
    if sel.empty:
        path.unlink(missing_ok=True)
        return False
    v = sel["value"].to_numpy(dtype=float)
    pos = v[np.isfinite(v) & (v > 0)]
    floor = pos.min() if len(pos) else 1e-3
    top = 10 * (pos.max() if len(pos) else 1.0)
    sel = sel.assign(y=np.where(np.isposinf(v), top, np.where(np.isfinite(v) & (v > 0), v, floor)),
                     step=sel["step"].astype(float))
    dtypes = list(dict.fromkeys(sel["dtype"]))
    series = list(dict.fromkeys(zip(sel["impl"], sel["hparams"])))
    colors = {k: plt.get_cmap("tab10" if len(series) <= 10 else "tab20")(i % 20) for i, k in enumerate(series)}
    fig, axes = plt.subplots(len(dtypes), 1, sharex=True, squeeze=False, figsize=(9, 2.8 * len(dtypes) + 0.8))
    steps = np.arange(1, int(sel["step"].max()) + 1)
    for ax, dtype in zip(axes[:, 0], dtypes):
        for (impl, hp), line in sel[sel["dtype"] == dtype].groupby(["impl", "hparams"], sort=False):
            line = line.sort_values("step")
            ax.plot(line["step"], line["y"], marker=".", color=colors[(impl, hp)],
                    label=f"{impl} [{hp}]" if hp else impl)
        ax.plot(steps, 16 + steps, "k--", linewidth=1, label="tolerance 16 + t")
        ax.set(yscale="log", title=dtype, ylabel="max err (eps)")
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"Max error over tensors per step (0 drawn at {floor:.3g}, inf at {top:.3g})", fontsize="medium")
    axes[-1, 0].set_xlabel("step")
    return _save(fig, path)


def render_report(meta: dict, rows: pd.DataFrame, out_dir: Path) -> Path:
    """Write ``out_dir/report.md`` and its PNG plots; return the report's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = _normalize(rows)
    cfg = meta.get("config") or {}
    suite = (cfg.get("suite") or {}).get("name") or ", ".join(dict.fromkeys(rows["suite"].dropna().astype(str)))
    device = (cfg.get("device") or {}).get("name") or ", ".join(dict.fromkeys(rows["device"].dropna().astype(str)))
    machine = pd.DataFrame(list((meta.get("machine") or {}).items()), columns=["key", "value"])
    wide = _speed_frame(rows)
    parts = [f"# optbench: {suite or '?'} on {device or '?'}", _summary(rows),
             "## Machine", _table(machine.fillna("-")), "## Configuration", _table(_config_table(meta, rows)),
             "## Parity", _table(_parity(rows)), "## Worst tensors (failing cases, top 5)", _table(_worst(rows)),
             "## Cross-implementation agreement", _table(_cross(rows)),
             "## state_dict round-trip by name", _table(_roundtrip(rows)),
             "## Speed", _table(_speed(wide) if not wide.empty else wide),
             "## Memory", _table(_memory(rows))]
    for title, check in (("Known upstream failures", "known_failure"), ("Skipped / errors", "case")):
        if (rows["check"] == check).any():
            parts += [f"## {title}", _table(rows[rows["check"] == check][CASE + ["status", "detail"]])]
    images = [f"![{alt}]({name})" for alt, name, plot, data in (
        ("step time", "step_time.png", _plot_step_time, wide),
        ("error vs step", "error_vs_step.png", _plot_error_vs_step, rows)) if plot(data, out_dir / name)]
    if images:
        parts += ["## Plots", *images]
    report = out_dir / "report.md"
    report.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return report
