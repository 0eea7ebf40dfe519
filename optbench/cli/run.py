"""``optbench run``: the Hydra app (one run, or a sweep's job) behind a validating front.

Hydra has no subcommands: ``run_command`` checks the overrides (one line, exit 2, for a mistake), then hands
them to the ``@hydra.main`` app, so multirun (``-m``), ``--cfg job``, ``--info`` and ``--config-dir`` keep
working. Failed checks exit 1; a run that verified nothing (``optbench.results.verdict``) exits 3.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

import optbench.checks  # noqa: F401  (the checks' config blocks, which Hydra's app composes: optbench.checks.registry)
from optbench.config import CONFIG_MODULE, expand_globs, precheck, search_path
from optbench.engine.direct import exit_code, validated
from optbench.results import FINISHED
from optbench.usage import EXIT_CHECK_FAILED, UsageError, fail, worst

_exit_codes: list[int] = []


def _config_dirs_of_run() -> list[str]:
    """The ``--config-dir`` folders of the running Hydra app."""
    sources = HydraConfig.get().runtime.config_sources
    return [s.path for s in sources if s.provider == "command-line" and s.schema == "file"]


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_MODULE}", config_name="config")
def run_app(cfg: DictConfig) -> int:
    """One run (a sweep's job); its exit code, which a sweep's job also notes in job.json (optbench.engine.sweep)."""
    from optbench.engine.runner import SuiteRun

    try:
        results = SuiteRun(cfg, Path(HydraConfig.get().runtime.output_dir), config_dirs=_config_dirs_of_run()).run()
    except UsageError as exc:
        _exit_codes.append(fail(str(exc)))
        return _exit_codes[-1]
    _exit_codes.append(say_how_it_ended(results))
    if (results.meta.get("run") or {}).get("signal") and HydraConfig.get().mode == RunMode.MULTIRUN:
        # Ctrl-C or SIGTERM stops the sweep, not only this job: no later job starts (the merge names them)
        raise SystemExit(_exit_codes[-1])
    return _exit_codes[-1]


def say_how_it_ended(results) -> int:
    """Print where the results are and the verdict; the exit code (128 + the signal for an interrupted run)."""
    out, run = results.out_dir, results.meta.get("run") or {}
    if (out / "results.json").is_file() and run.get("status") != "crashed" or run.get("status") == "interrupted":
        print(f"results: {out / 'results.json'} (+ results.csv)\nreport:  {out / 'report.md'}")
    if run.get("status") not in (None, FINISHED):
        rest = (f"'optbench resume {out}' runs the rest" if run.get("planned_cases") else
                "no case had started: run it again")
        print(f"optbench: {run['how']}: {run.get('finished_cases')} of {run.get('planned_cases')} cases ran; {rest}",
              file=sys.stderr)
    outcome = results.verdict  # computed over every row: once
    print("verdict:", outcome)
    return exit_code(results, outcome)


def run_command(args: list[str]) -> int:
    from hydra._internal.utils import get_args_parser  # Hydra's own flag parser: -m, --cfg job, ...

    flags, unknown = get_args_parser().parse_known_args(args)
    config_dirs = [str(Path(flags.config_dir).resolve())] if flags.config_dir else []
    if flags.config_dir and not Path(flags.config_dir).is_dir():
        raise UsageError(f"--config-dir {flags.config_dir}: no such directory")
    if sum(map(bool, (flags.multirun, flags.cfg, flags.info, flags.shell_completion))) > 1:
        raise UsageError("-m, --cfg, --info and --shell-completion go one at a time (to see a sweep's config, "
                         "drop -m: --cfg job shows one job's, --cfg hydra the launcher's)")
    globs = expand_globs(flags.overrides, config_dirs)  # +matrix=glob(*): the explicit list Hydra would sweep
    flags.overrides = [globs.get(o, o) for o in flags.overrides]
    args = [globs.get(a, a) for a in args]
    precheck(flags.overrides + unknown, config_dirs)
    from optbench.engine import sweep

    if flags.multirun and not (flags.cfg or flags.info or flags.help or flags.hydra_help):
        sweep.validate(flags.overrides, config_dirs)  # each swept value composed once; writes nothing
    elif not (flags.multirun or flags.cfg or flags.info or flags.help or flags.hydra_help):
        from optbench.engine.out_dir import make_writable

        # validates suite, device, dtypes, impls, candidate, options, jobs, out_dir; writes nothing
        make_writable(validated(flags.overrides, config_dirs, keep_plan=True).results.out_dir, keep=False)
    _exit_codes.clear()
    saved_argv = sys.argv
    sys.argv = ["optbench run", *args, *search_path()]  # the plugins' suites (--config-dir's: Hydra's own flag)
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
    return worst(_exit_codes)
