"""The ``optbench`` command: ``run`` (Hydra app), ``list``, ``report``, ``coverage``, ``mutants``, ``compare`` and
``calibrate``, ``merge`` and ``gpu-check``.

Hydra has no subcommands, so ``main`` pops the subcommand and, for ``run``, hands the remaining
arguments to the ``@hydra.main`` app: multirun (``-m``), ``--cfg job``, ``--info`` and
``--config-dir`` keep working. Mistakes the user can fix answer in one line with exit code 2;
failed checks exit 1; a run that verified nothing exits 3 (``optbench.usage``, README "Exit codes").
"""

from __future__ import annotations

import sys

from optbench.cli.calibrate import calibrate_command
from optbench.cli.compare import compare_command
from optbench.cli.coverage import coverage_command
from optbench.cli.gpu_check import gpu_check_command
from optbench.cli.listing import list_command
from optbench.cli.merge import merge_command
from optbench.cli.mutants import mutants_command
from optbench.cli.report import report_command
from optbench.cli.resume import resume_command
from optbench.cli.run import run_command
from optbench.usage import EXIT_OK, EXIT_USAGE, UsageError, did_you_mean, fail

COMMANDS = ("run", "resume", "list", "report", "coverage", "mutants", "compare", "calibrate", "merge", "gpu-check")
USAGE = """usage: optbench run suite=<name> [device=cpu|cuda] [dtype=...] [steps=N] [impl=[...]] [checks=[...]]
                    [candidate=pkg.mod.Class] [candidate_kwargs='{...}'] [options='{...}'] [--config-dir DIR] \
[-m] [--cfg job]
       optbench resume <run directory>
       optbench list
       optbench report <results.json | run directory> [--out DIR]
       optbench report --dashboard [history dir | run dir | results.json ...] [--out DIR] [--screenshot PNG]
       optbench coverage
       optbench mutants [--catalogue optbench.mutants] [--dtype D ...] [--suite S ...] [--jobs N] [--out DIR] \
[override ...]
       optbench compare <baseline> <new> [--threshold 0.05] [--alpha 0.01] [--confidence 0.95] \
[--calibration FILE] [--out FILE.md]
       optbench calibrate <A/A run> <A/A run> [...] | --history [DIR]  [--out calibration.json]
       optbench merge <sweep dir>
       optbench gpu-check [--dry-run] [--budget-s 540] [--only SECTION ...] [--out DIR]"""

def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return EXIT_OK if args else EXIT_USAGE
    command, rest = args[0], args[1:]
    handlers = {"run": run_command, "resume": resume_command, "list": list_command, "report": report_command,
                "coverage": coverage_command,
                "mutants": mutants_command, "compare": compare_command, "calibrate": calibrate_command,
                "merge": merge_command, "gpu-check": gpu_check_command}
    if command not in handlers:
        return fail(f"unknown command '{command}': {did_you_mean(command, COMMANDS)}")
    try:
        return handlers[command](rest)
    except UsageError as exc:
        return fail(str(exc))
    except OSError as exc:  # a path of the user's that cannot be read or written (--out into /proc, a file as a folder)
        where = f"{exc.filename}: " if exc.filename else ""
        return fail(f"{where}{exc.strerror or exc}")
    except KeyboardInterrupt:  # outside a run (which keeps what it measured and exits 130 itself)
        print("optbench: interrupted", file=sys.stderr)
        return 130


def entry() -> int:
    """``optbench`` (the console script) and ``python -m optbench``: ``main``, as the subreaper of the processes it
    starts; whatever of theirs is left when it ends is killed (``engine.descendants``)."""
    from optbench.engine import zygote
    from optbench.engine.descendants import adopt_orphans, kill_strays

    adopt_orphans()
    zygote.allow_fork_here()
    try:
        return main()
    finally:
        kill_strays()


if __name__ == "__main__":
    sys.exit(entry())
