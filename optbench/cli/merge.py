"""``optbench merge``: merge a sweep's jobs into one results.json and report."""

from __future__ import annotations

from pathlib import Path

from optbench.usage import Parser


def merge_command(args: list[str]) -> int:
    parser = Parser(prog="optbench merge", description=(
        "Merge the jobs of a sweep (optbench run -m) into one results.json and report.md in its folder, as the "
        "sweep does at its end; exit code the worst job's. For a sweep whose launching process died, or a job "
        "re-run by hand."))
    parser.add_argument("sweep_dir", type=Path, help="the sweep's folder (hydra.sweep.dir)")
    ns = parser.parse_args(args)
    from optbench.engine import sweep

    return sweep.remerge(ns.sweep_dir)
