"""``optbench resume DIR``: continue an interrupted (or killed) run from its journal, running only the cases it
had not finished; the finished ones are kept as they were (and replayed, unrecorded, where a later case of
their group reads their scratch). The result is the run an uninterrupted one would have written."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from optbench.journal import JOURNAL, read
from optbench.usage import Parser, UsageError


def resume_command(args: list[str]) -> int:
    parser = Parser(prog="optbench resume", description=(
        "Continue an interrupted run in its own folder: only its unfinished cases run; the verdict and exit code "
        "are the whole run's."))
    parser.add_argument("run_dir", type=Path, help="the out_dir of the interrupted run (it holds journal.jsonl)")
    ns = parser.parse_args(args)
    journal = ns.run_dir / JOURNAL
    if not journal.is_file():
        finished = (ns.run_dir / "results.json").is_file()
        raise UsageError(f"{ns.run_dir}: " + ("the run there finished: nothing to resume" if finished
                                              else f"no {JOURNAL} there (not an optbench run folder)"))
    record = read(journal)
    from optbench.cli.run import say_how_it_ended
    from optbench.engine.runner import SuiteRun

    config_dirs = [d for d in record.header.get("config_dirs") or []]
    for folder in config_dirs:
        if not Path(folder).is_dir():
            raise UsageError(f"{journal}: the run's --config-dir {folder} is gone")
    run = SuiteRun(OmegaConf.create(record.header["config"]), ns.run_dir, config_dirs=config_dirs)
    print(f"optbench: resuming {ns.run_dir}: {len(record.cases)} of {len(record.planned)} cases had finished")
    return say_how_it_ended(run.run(resume=record))
