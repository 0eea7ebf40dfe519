"""The ``optbench`` command: ``run`` (Hydra app), ``list``, ``report``, ``coverage``, ``mutants`` and ``compare``.

Hydra has no subcommands, so ``main`` pops the subcommand and, for ``run``, hands the remaining
arguments to the ``@hydra.main`` app: multirun (``-m``), ``--cfg job``, ``--info`` and
``--config-dir`` keep working. Mistakes the user can fix answer in one line with exit code 2;
failed checks exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from optbench.catalog import CONFIG_MODULE, suite_names
from optbench.errors import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE, UsageError
from optbench.selection import did_you_mean

COMMANDS = ("run", "list", "report", "coverage", "mutants", "compare", "merge")
USAGE = """usage: optbench run suite=<name> [device=cpu|cuda] [dtype=...] [steps=N] [impl=[...]] [checks=[...]]
                    [candidate=pkg.mod.Class] [candidate_kwargs='{...}'] [options='{...}'] [--config-dir DIR] [-m] [--cfg job]
       optbench list
       optbench report <results.json | run directory> [--out DIR]
       optbench report --dashboard [history dir | run dir | results.json ...] [--out DIR] [--screenshot PNG]
       optbench coverage
       optbench mutants [--catalogue tests.mutants] [--dtype D ...] [--suite S ...] [--jobs N] [--out DIR] [override ...]
       optbench compare <baseline> <new> [--threshold 0.05] [--alpha 0.01] [--confidence 0.95] [--out FILE.md]
       optbench merge <sweep dir>"""

_exit_codes: list[int] = []


def fail(message: str) -> int:
    print(f"optbench: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def config_names(group: str, config_dirs=()) -> list[str]:
    if group == "suite":
        return suite_names(config_dirs)
    from importlib import resources

    folder = resources.files(CONFIG_MODULE) / group
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def precheck(overrides: list[str], config_dirs=()) -> None:
    """Reject unknown suite/device names (also in sweeps) before Hydra composes anything."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as exc:
        raise UsageError(f"cannot parse overrides: {str(exc).splitlines()[0]}") from None
    for override in parsed:
        group = override.get_key_element()
        if group in ("suite", "device"):
            values = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.get_value_element_as_str()]
            for value in values:
                known = config_names(group, config_dirs)
                if value not in known:
                    raise UsageError(f"unknown {group} '{value}': {did_you_mean(value, known)}")


def _config_dirs_of_run() -> list[str]:
    """The ``--config-dir`` folders of the running Hydra app."""
    sources = HydraConfig.get().runtime.config_sources
    return [s.path for s in sources if s.provider == "command-line" and s.schema == "file"]


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_MODULE}", config_name="config")
def run_app(cfg: DictConfig) -> int:
    """One run (a sweep's job); its exit code, which a sweep's job also notes in job.json (optbench.sweep)."""
    from optbench.runner import SuiteRun

    try:
        results = SuiteRun(cfg, Path(HydraConfig.get().runtime.output_dir), config_dirs=_config_dirs_of_run()).run()
    except UsageError as exc:
        _exit_codes.append(fail(str(exc)))
        return _exit_codes[-1]
    out = results.out_dir
    print(f"results: {out / 'results.json'} (+ results.csv)\nreport:  {out / 'report.md'}")
    print("verdict:", "FAIL" if results.failed else "PASS")
    _exit_codes.append(EXIT_CHECK_FAILED if results.failed else EXIT_OK)
    return _exit_codes[-1]


def run_command(args: list[str]) -> int:
    from hydra._internal.utils import get_args_parser  # Hydra's own flag parser: -m, --cfg job, ...

    flags, unknown = get_args_parser().parse_known_args(args)
    config_dirs = [str(Path(flags.config_dir).resolve())] if flags.config_dir else []
    if flags.config_dir and not Path(flags.config_dir).is_dir():
        raise UsageError(f"--config-dir {flags.config_dir}: no such directory")
    precheck(flags.overrides + unknown, config_dirs)
    from optbench import sweep

    if flags.multirun and not (flags.cfg or flags.info or flags.help or flags.hydra_help):
        sweep.validate(flags.overrides, config_dirs)  # each swept value composed once; writes nothing
    elif not (flags.multirun or flags.cfg or flags.info or flags.help or flags.hydra_help):
        from optbench.runner import SuiteRun

        # validates suite, device, dtypes, impls, candidate, options; writes nothing
        SuiteRun(compose_config(flags.overrides, config_dirs), Path("."), config_dirs=config_dirs)
    _exit_codes.clear()
    saved_argv = sys.argv
    sys.argv = ["optbench run", *args]
    try:
        run_app()
    except SystemExit as exc:  # Hydra's exit after printing an exception: in a sweep, a job that raised or died
        if not flags.multirun:
            raise
        _exit_codes.append(exc.code if isinstance(exc.code, int) else EXIT_CHECK_FAILED)
    finally:
        sys.argv = saved_argv
        if flags.multirun:  # jobs in other processes cannot append to _exit_codes: the merged results tell
            _exit_codes.extend(sweep.finish())
    return max(_exit_codes, default=EXIT_OK)


def compose_config(overrides: list[str], config_dirs=()) -> DictConfig:
    """Compose once with Hydra's compose API so a bad override is one line, not Hydra's error page."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    searchpath = [f"hydra.searchpath=[{','.join('file://' + d for d in config_dirs)}]"] if config_dirs else []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            return compose(config_name="config", overrides=[*searchpath, *overrides])
    except Exception as exc:
        raise UsageError(str(exc).strip().splitlines()[0]) from None
    finally:
        GlobalHydra.instance().clear()


def list_command(args: list[str]) -> int:
    if args:
        raise UsageError(f"'optbench list' takes no arguments, got {' '.join(args)}")
    from optbench.listing import describe

    print(describe())
    return EXIT_OK


def coverage_command(args: list[str]) -> int:
    if args:
        raise UsageError(f"'optbench coverage' takes no arguments, got {' '.join(args)}")
    from optbench.coverage import describe

    print(describe())
    return EXIT_OK


def report_command(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="optbench report", description=(
        "Re-render the report of a saved run, or (--dashboard) write one HTML page over many runs."))
    parser.add_argument("results", type=Path, nargs="*", help=(
        "results.json, or the run directory holding it; with --dashboard any number of history folders, run "
        "folders and results files (default: the configured history_dir)"))
    parser.add_argument("--out", type=Path, default=None, help=(
        "where to write report.md and plots (default: beside the results); with --dashboard, dashboard.html "
        "(default: reports/dashboard)"))
    parser.add_argument("--dashboard", action="store_true", help="write DIR/dashboard.html over every run found")
    parser.add_argument("--screenshot", type=Path, default=None, help="with --dashboard: also a PNG of it, rendered in headless Chromium")
    parser.add_argument("--machine", default=None, help="with --dashboard: only runs whose machine slug contains this")
    parser.add_argument("--torch", default=None, help="with --dashboard: only runs whose torch version contains this")
    ns = parser.parse_args(args)
    if ns.dashboard:
        from optbench.report.dashboard import dashboard_command

        return dashboard_command(ns.results, ns.out, ns.screenshot, ns.machine, ns.torch)
    if len(ns.results) != 1 or ns.screenshot or ns.machine or ns.torch:
        raise UsageError("'optbench report' takes one results file or run directory (many, --screenshot, --machine "
                         "and --torch go with --dashboard)")
    from optbench.report import render_report

    meta, rows = load_run(ns.results[0])
    out = ns.out or (ns.results[0] if ns.results[0].is_dir() else ns.results[0].parent)
    out.mkdir(parents=True, exist_ok=True)
    print(f"report: {render_report(meta, rows, out)}")
    return EXIT_OK


def mutants_command(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="optbench mutants", description=(
        "Run a catalogue of deliberately wrong optimizers, each alone at each dtype its suite runs, and report per "
        "dtype how many the checks catch and which check caught them. Exit 1 if any mutant is missed or any "
        "correct control fails."))
    parser.add_argument("overrides", nargs="*", help="config overrides for every run, e.g. parity.one_step=false")
    parser.add_argument("--catalogue", default="tests.mutants", help="package exporting MUTANTS (default: tests.mutants)")
    parser.add_argument("--dtype", nargs="+", default=None, help="only these dtypes")
    parser.add_argument("--suite", nargs="+", default=None, help="only the mutants of these suites")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs in parallel (default: one per core)")
    parser.add_argument("--out", type=Path, default=None, help="also write mutants.md and mutants.csv here")
    ns = parser.parse_args(args)
    from optbench import mutants

    try:
        trials = mutants.trials(ns.catalogue, ns.dtype, ns.suite, ns.overrides)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--catalogue {ns.catalogue}: {exc}") from None
    unknown = sorted(set(ns.dtype or ()) - set(mutants.DTYPE_ORDER))
    if unknown or not trials:
        raise UsageError(f"unknown dtype {unknown[0]!r}" if unknown else "no mutant matches --dtype/--suite")
    compose_config(["suite=adam", *ns.overrides])  # a bad override is one line here, not once per run
    print(f"optbench mutants: {len(trials)} runs ({ns.catalogue}), {ns.jobs} at a time", file=sys.stderr)
    table = mutants.run_all(trials, ns.jobs)
    text = mutants.render(table)
    print(text)
    if ns.out:
        ns.out.mkdir(parents=True, exist_ok=True)
        (ns.out / "mutants.md").write_text(text)
        table.to_csv(ns.out / "mutants.csv", index=False)
    missed = (~table.control & ~table.failed).any() or (table.control & table.failed).any()
    return EXIT_CHECK_FAILED if missed else EXIT_OK


def load_run(arg: Path) -> tuple:
    """(meta, rows) of a results.json or of the run directory holding one; a bad path is a UsageError."""
    from optbench.report import load_results

    path = arg / "results.json" if arg.is_dir() else arg
    if not path.is_file():
        raise UsageError(f"no results file at {path}")
    try:
        return load_results(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def compare_command(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="optbench compare", description=(
        "Compare two runs (say main vs a branch): per timing case the ratio of median step times, its "
        "confidence interval and the Mann-Whitney U p-value on the timing rounds; a case is slower/faster only "
        "when p < alpha and the ratio is beyond 1 +- threshold. Also lists verdicts that newly fail. Exit 1 if "
        "any case is slower or any verdict newly fails."))
    parser.add_argument("baseline", type=Path, help="results.json, or the run directory holding it")
    parser.add_argument("new", type=Path, help="results.json, or the run directory holding it")
    parser.add_argument("--threshold", type=float, default=0.05, help="smallest change flagged (default 0.05: 5%%)")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level (default 0.01)")
    parser.add_argument("--confidence", type=float, default=0.95, help="of the ratio's interval (default 0.95)")
    parser.add_argument("--out", type=Path, default=None, help="also write the comparison (Markdown) to this file")
    ns = parser.parse_args(args)
    if not ns.threshold > 0:
        raise UsageError(f"--threshold {ns.threshold}: need a number > 0 (0.05 is 5%)")
    for flag in ("alpha", "confidence"):
        if not 0 < getattr(ns, flag) < 1:
            raise UsageError(f"--{flag} {getattr(ns, flag)}: need a number between 0 and 1")
    from optbench import compare

    (base_meta, base), (new_meta, new) = load_run(ns.baseline), load_run(ns.new)
    if differ := compare.machine_differences(base_meta, new_meta):
        print(f"optbench: warning: the runs were measured on different machines ({differ}); their times are not "
              "like for like", file=sys.stderr)
    if differ := compare.timing_config_differences(base_meta, new_meta):
        print(f"optbench: warning: the runs timed different workloads ({differ}); same-named cases are not like for like",
              file=sys.stderr)
    result = compare.compare(base, new, compare.Rule(ns.threshold, ns.alpha, ns.confidence))
    text = compare.render(result)
    print(text)
    if ns.out:
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(text + "\n", encoding="utf-8")
    return EXIT_CHECK_FAILED if result.regressed else EXIT_OK


def merge_command(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="optbench merge", description=(
        "Merge the jobs of a sweep (optbench run -m) into one results.json and report.md in its folder, as the "
        "sweep does at its end; exit code the worst job's. For a sweep whose launching process died, or a job "
        "re-run by hand."))
    parser.add_argument("sweep_dir", type=Path, help="the sweep's folder (hydra.sweep.dir)")
    ns = parser.parse_args(args)
    from optbench import sweep

    return sweep.remerge(ns.sweep_dir)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return EXIT_OK if args else EXIT_USAGE
    command, rest = args[0], args[1:]
    handlers = {"run": run_command, "list": list_command, "report": report_command, "coverage": coverage_command,
                "mutants": mutants_command, "compare": compare_command, "merge": merge_command}
    if command not in handlers:
        return fail(f"unknown command '{command}': {did_you_mean(command, COMMANDS)}")
    try:
        return handlers[command](rest)
    except UsageError as exc:
        return fail(str(exc))


if __name__ == "__main__":
    sys.exit(main())
