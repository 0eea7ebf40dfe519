"""``optbench coverage``: which of torch's own optimizer option sets and error inputs the suites cover."""

from __future__ import annotations

from optbench.usage import EXIT_OK, UsageError


def coverage_command(args: list[str]) -> int:
    if args:
        raise UsageError(f"'optbench coverage' takes no arguments, got {' '.join(args)}")
    from optbench.suite.coverage import describe

    print(describe())
    return EXIT_OK
