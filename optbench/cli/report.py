"""``optbench report``: re-render a saved run's report, or write the dashboard over many runs."""

from __future__ import annotations

from pathlib import Path

from optbench.checks.registry import counted_checks, report_sections
from optbench.results import load_run, verdict
from optbench.usage import EXIT_OK, Parser, UsageError


def report_command(args: list[str]) -> int:
    parser = Parser(prog="optbench report", description=(
        "Re-render the report of a saved run, or (--dashboard) write one HTML page over many runs."))
    parser.add_argument("results", type=Path, nargs="*", help=(
        "results.json, or the run directory holding it; with --dashboard any number of history folders, run "
        "folders and results files (default: the configured history_dir)"))
    parser.add_argument("--out", type=Path, default=None, help=(
        "where to write report.md and plots (default: beside the results); with --dashboard, dashboard.html "
        "(default: reports/dashboard)"))
    parser.add_argument("--dashboard", action="store_true", help="write DIR/dashboard.html over every run found")
    parser.add_argument("--trust-edited", action="store_true",
                        help="read a results.json whose content no longer matches its digest (edited after the run)")
    parser.add_argument("--screenshot", type=Path, default=None,
                        help="with --dashboard: also a PNG of it, rendered in headless Chromium")
    parser.add_argument("--machine", default=None, help="with --dashboard: only runs whose machine slug contains this")
    parser.add_argument("--torch", default=None, help="with --dashboard: only runs whose torch version contains this")
    ns = parser.parse_args(args)
    if ns.dashboard:
        from optbench.cli.dashboard import dashboard_command

        return dashboard_command(ns.results, ns.out, ns.screenshot, ns.machine, ns.torch)
    if len(ns.results) != 1 or ns.screenshot or ns.machine or ns.torch:
        raise UsageError("'optbench report' takes one results file or run directory (many, --screenshot, --machine "
                         "and --torch go with --dashboard)")
    from optbench.report import render_report

    meta, rows = load_run(ns.results[0], ns.trust_edited)
    out = ns.out or (ns.results[0] if ns.results[0].is_dir() else ns.results[0].parent)
    out.mkdir(parents=True, exist_ok=True)
    print(f"report: {render_report(meta, rows, out, report_sections, counted_checks())}")
    # the run's, as rendered: an unfinished run's is INCOMPLETE whatever its rows say
    print("verdict:", verdict(rows, (meta.get("config") or {}).get("checks") or (), meta.get("run")))
    return EXIT_OK
