"""A run from Python: ``optbench.run(["suite=adam", "dtype=float32"])``.

The overrides are those of ``optbench run``; the config is composed once with Hydra's compose API, then planned
and run as the command runs it (the same planner, workers, checks, results.json, report.md). What it leaves out is
Hydra's app: no ``.hydra/`` folder in out_dir, no sweeps (``-m``), no ``--cfg``; a small run takes 40% less time
(the app composes the config twice more: 0.9 s against 1.5 s for a one-case run on the CI machine). A bad override
or out_dir is a ``UsageError``, before anything is written. ``exit_code`` is the code ``optbench run`` exits with.
"""

from __future__ import annotations

from pathlib import Path

from optbench.config import compose_config, expand_globs, precheck
from optbench.results import Results


def run(overrides: list[str] | tuple[str, ...] = (), config_dirs=(), echo=print) -> Results:
    """Run ``overrides`` (as ``optbench run`` takes them; ``config_dirs``: its ``--config-dir`` folders) in this
    process's control and return its results (``.verdict``, ``.rows``, ``.out_dir``); ``echo`` gets its lines."""
    config_dirs = [str(Path(d).resolve()) for d in config_dirs]
    overrides = list(overrides)
    if globs := expand_globs(overrides, config_dirs):
        from optbench.usage import UsageError

        raise UsageError(f"{next(iter(globs))}: a glob is a sweep, which optbench.run does not run (optbench run -m)")
    precheck(overrides, config_dirs)
    return validated(overrides, config_dirs, echo).run()


def validated(overrides: list[str], config_dirs=(), echo=print, keep_plan: bool = False):
    """The run ``overrides`` describe (a ``SuiteRun``), everything about it checked before anything is written: the
    config composed and resolved, out_dir new or empty, and a candidate imported, inspected and built in a worker
    (a UsageError, one line, for what is wrong). ``optbench run`` checks a run so before Hydra's app starts, and
    ``keep_plan``s the candidate's plan for the app's run."""
    from optbench.engine.out_dir import refuse_reuse
    from optbench.engine.runner import SuiteRun

    cfg = compose_config(overrides, config_dirs)
    out_dir = Path(str(cfg.out_dir))
    run = SuiteRun(cfg, out_dir, echo=echo, config_dirs=config_dirs)
    if run.candidate_in_workers:  # its import, inspection and build checked in a worker, never here
        run.blueprint(keep=keep_plan)
    refuse_reuse(out_dir)  # before Hydra writes its .hydra/ there
    return run


def exit_code(results: Results, outcome=None) -> int:
    """The code ``optbench run`` exits with for ``results``: 128 + the signal that interrupted it, else its
    verdict's (``outcome``, if computed already: 0 pass, 1 a check failed, 3 nothing verified)."""
    signal = (results.meta.get("run") or {}).get("signal")
    return 128 + signal if signal else (outcome or results.verdict).exit_code
