"""Turn a results file into ``report.md`` with its tables, the parity matrix and PNG plots.

``load_results`` reads and validates a results file; ``render_report`` writes the report beside it
(or where asked): summary, machine, configuration, parity matrix (Markdown + ``parity_matrix.png``), each check's
own sections (as its registration gives them: ``optbench.checks.registry``), cases without a verdict, and the plots.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from optbench.report import matrix, performance, plots, tables
from optbench.results import atomic_write, incomplete, load_results, normalize


def candidate_section(candidate: dict) -> list[str]:
    """The candidate: its class, the spec that adapts it, and its defaults beside the reference's values."""
    spec = tables.escape(candidate.get("spec") or "none (taken as written)")
    text = (f"{tables.escape(candidate.get('class'))} ({tables.escape(candidate.get('name'))}); candidate spec: "
            f"{spec}." + (f" {tables.escape(str(candidate['note']).rstrip('.'))}." if candidate.get("note") else "")
            + " It is built with the reference's value of every option its constructor takes (renames applied); "
              "`differs`: its own default is another value, which a user building it as documented would get.")
    table = pd.DataFrame(candidate.get("defaults") or [], columns=["option", "argument", "reference", "candidate",
                                                                  "built", "differs"])
    table = table.rename(columns={"candidate": "candidate's default", "built": "built with"})
    table["differs"] = table["differs"].map({True: "**differs**", False: ""})
    adapter = candidate.get("adapter") or {}
    declared = ("What its spec declares (each a documented difference the checks then allow; `conventions` are "
                "the reference's options, so the reference models them): "
                + "; ".join(f"**{k}** {tables.escape(v)}" for k, v in adapter.items()) + ".") if adapter else ""
    return ["## Candidate", text] + ([declared] if declared else []) + [tables.markdown(table.fillna(""))]


def render_report(meta: dict, rows: pd.DataFrame, out_dir: Path, sections=None, counted=()) -> Path:
    """Write ``out_dir/report.md`` and, unless the run said ``report.plots=false``, its PNG plots; return the
    report's path. ``sections``: rows -> [(title, table)], the checks' own sections, and ``counted``: the checks
    whose statuses the summary counts (``optbench.checks.registry.report_sections`` and ``counted_checks()``, which
    the callers above the checks pass)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = normalize(rows)
    cfg = meta.get("config") or {}
    suite = (cfg.get("suite") or {}).get("name") or ", ".join(dict.fromkeys(rows["suite"]))
    device = (cfg.get("device") or {}).get("name") or ", ".join(dict.fromkeys(rows["device"]))
    machine = pd.DataFrame(list((meta.get("machine") or {}).items()), columns=["key", "value"])
    wide = performance.speed_frame(rows)
    unfinished = incomplete(meta.get("run"))
    parts = ([f"**INCOMPLETE: {unfinished}: this report covers the cases that ran; "
              f"`optbench resume {out_dir}` runs the rest.**"] if unfinished else [])
    parts += [f"# optbench: {suite or '?'} on {device or '?'}",
              tables.summary(rows, cfg.get("checks") or (), meta.get("run"), counted),
             "## Machine", tables.markdown(machine.fillna("-")),
             "## Configuration", tables.markdown(tables.config_table(meta, rows))]
    if candidate := meta.get("candidate"):
        parts += candidate_section(candidate)
    plotting = (cfg.get("report") or {}).get("plots", True) is not False
    plots_drawn = (("step time", "step_time.png", plots.step_time, wide),
                   ("error vs step", "error_vs_step.png", plots.error_vs_step, rows),
                   ("price of quantization", "quantized_price.png", plots.quantized_price, rows),
                   ("scaling", "scaling.png", performance.scaling_plot, rows))
    if not plotting:
        for stale in ("parity_matrix.png", *(name for _, name, _, _ in plots_drawn)):
            (out_dir / stale).unlink(missing_ok=True)
    if not (cells := matrix.cells(rows)).empty:
        parts += ["## Parity matrix", "Worst error in units of the dtype's eps over every step, FQN and tensor "
                  "no declared deviation covers. `FAIL`: past tolerance; `xfail`: a declared upstream deviation "
                  "(see the deviations table and docs/findings.md); `n/a`: the implementation does not take that "
                  "hparam set; `ERR`: it raised.", matrix.markdown(cells)]
        if plotting and matrix.heatmap(cells, out_dir / "parity_matrix.png"):
            parts += ["![parity matrix](parity_matrix.png)"]
    shown = [*(sections(rows) if sections else []),
             ("Cases without a verdict (errors, unsupported, skipped)", tables.not_run(rows))]
    parts += [p for title, frame in shown if not frame.empty for p in (f"## {title}", tables.markdown(frame))]
    images = [f"![{alt}]({name})" for alt, name, plot, data in plots_drawn if plotting and plot(data, out_dir / name)]
    if images:
        parts += ["## Plots", *images]
    report = out_dir / "report.md"
    atomic_write(report, "\n\n".join(parts) + "\n")
    return report


__all__ = ["load_results", "render_report"]
