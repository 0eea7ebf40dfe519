"""``optbench calibrate``: the A/A spread of each timing case on this machine, for ``optbench compare
--calibration`` (optbench.perf.calibration)."""

from __future__ import annotations

from pathlib import Path

from optbench.usage import EXIT_OK, Parser, UsageError


def calibrate_command(args: list[str]) -> int:
    parser = Parser(prog="optbench calibrate", description=(
        "Read A/A runs (the same code and config, run again on this machine) and write each timing case's "
        "spread: the largest ratio between two runs' medians, minus one. optbench compare --calibration FILE "
        "then flags a case only beyond its spread (and --threshold)."))
    parser.add_argument("runs", nargs="*", type=Path, help="run directories or results.json files of one code and "
                                                           "config (two or more)")
    parser.add_argument("--history", nargs="?", const="", default=None, metavar="DIR",
                        help="instead: every group of runs of one commit (not dirty) and config in the run "
                             "history (default: history_dir, reports/history)")
    parser.add_argument("--out", type=Path, default=Path("calibration.json"), help="where to write it "
                                                                                    "(default calibration.json)")
    ns = parser.parse_args(args)
    from optbench.perf import calibration
    from optbench.results import load_run

    if ns.history is not None:
        if ns.runs:
            raise UsageError("optbench calibrate: runs or --history, not both")
        from optbench.engine.history import default_history_dir, read_history
        from optbench.report import load_results

        folder = Path(ns.history or default_history_dir() or "reports/history")
        if not folder.is_dir():
            raise UsageError(f"--history {folder}: no such directory")
        runs, _ = read_history([folder])
        loaded = [load_results(Path(p)) for p in runs["path"]]
        groups = [[loaded[i] for i in g] for g in calibration.groups_from_history(runs, [m for m, _ in loaded])]
        if not groups:
            raise UsageError(f"{folder}: no two runs of one commit (not dirty) and config to calibrate from; run the "
                             "same optbench run twice, or name A/A runs")
    else:
        if len(ns.runs) < 2:
            raise UsageError("optbench calibrate: name two or more A/A runs (the same code and config), or --history")
        groups = [[load_run(r) for r in ns.runs]]
    data = calibration.calibrate(groups)
    if not data["cases"]:
        raise UsageError("optbench calibrate: the runs share no timing case (speed or scaling) to calibrate")
    path = calibration.write(data, ns.out)
    top = ", ".join(f"{calibration.case_text(tuple(c[k] for k in calibration.CASE))} {c['spread']:.1%}"
                    for c in data["cases"][:5])
    print(f"A/A spread over {data['runs']} runs in {data['groups']} group(s), {len(data['cases'])} timing cases; "
          f"largest {data['threshold']:.1%}: {top}")
    print(f"calibration: {path} (optbench compare BASE NEW --calibration {path})")
    return EXIT_OK
