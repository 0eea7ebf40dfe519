"""``optbench mutants``: run a mutant catalogue and report how many the checks catch, per dtype."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from optbench.config import compose_config
from optbench.usage import EXIT_CHECK_FAILED, EXIT_OK, Parser, UsageError


def mutants_command(args: list[str]) -> int:
    parser = Parser(prog="optbench mutants", description=(
        "Run a catalogue of deliberately wrong optimizers, each alone at each dtype its suite runs, and report per "
        "dtype how many the checks catch and which check caught them. Exit 1 if any mutant is missed or any "
        "correct control fails."))
    parser.add_argument("overrides", nargs="*", help="config overrides for every run, e.g. parity.one_step=false")
    parser.add_argument("--catalogue", default="optbench.mutants",
                        help="package exporting MUTANTS (default: optbench.mutants)")
    parser.add_argument("--dtype", nargs="+", default=None, help="only these dtypes")
    parser.add_argument("--suite", nargs="+", default=None, help="only the mutants of these suites")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="runs in parallel (default: one per core)")
    parser.add_argument("--out", type=Path, default=None, help="also write mutants.md and mutants.csv here")
    ns = parser.parse_args(args)
    from optbench.engine import mutants
    from optbench.report.mutants import render as render_mutants
    from optbench.suite.spec import REAL_DTYPES

    try:
        trials = mutants.trials(ns.catalogue, ns.dtype, ns.suite, ns.overrides)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--catalogue {ns.catalogue}: {exc}") from None
    unknown = sorted(set(ns.dtype or ()) - set(REAL_DTYPES))
    if unknown or not trials:
        raise UsageError(f"unknown dtype {unknown[0]!r}" if unknown else "no mutant matches --dtype/--suite")
    compose_config(["suite=adam", *ns.overrides])  # a bad override is one line here, not once per run
    print(f"optbench mutants: {len(trials)} runs ({ns.catalogue}), {ns.jobs} at a time", file=sys.stderr)
    table = mutants.run_all(trials, ns.jobs)
    text = render_mutants(table)
    print(text)
    if ns.out:
        ns.out.mkdir(parents=True, exist_ok=True)
        (ns.out / "mutants.md").write_text(text)
        table.to_csv(ns.out / "mutants.csv", index=False)
    missed = (~table.control & ~table.failed).any() or (table.control & table.failed).any()
    return EXIT_CHECK_FAILED if missed else EXIT_OK
