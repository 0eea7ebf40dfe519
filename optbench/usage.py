"""Errors that are the user's to fix: reported in one line with exit code 2, no traceback; the exit codes."""

import argparse
import difflib
import functools
import sys

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_NOTHING_VERIFIED = 3  # no check produced a verdict (every case skipped, or none to run): not a PASS
EXIT_INCOMPLETE = 4  # the run ended before its plan did (the harness crashed, the disk filled); interrupted by a
# signal: 128 + its number (130 for Ctrl-C, 143 for SIGTERM)
# worst last: a usage error, an unfinished run, a failed check, nothing verified (a run with a fail row exits 1)
SEVERITY = (EXIT_OK, EXIT_NOTHING_VERIFIED, EXIT_CHECK_FAILED, EXIT_INCOMPLETE, 130, 143, EXIT_USAGE)


def worst(codes) -> int:
    """The worst of several runs' exit codes (a sweep's); a code optbench does not give counts as a failure."""
    return max(codes, key=lambda c: SEVERITY.index(c) if c in SEVERITY else SEVERITY.index(EXIT_CHECK_FAILED),
               default=EXIT_OK)


class UsageError(Exception):
    """A bad suite, device, dtype, implementation, candidate or path; the message is one line."""


class Parser(argparse.ArgumentParser):
    """A subcommand's argument parser whose mistakes are a one-line UsageError (argparse prints its usage block)."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} ('{self.prog} --help' shows its arguments)")


@functools.lru_cache(maxsize=None)
def say_once(message: str) -> None:
    """``message`` on stderr, once per process (a note, not an error: the run goes on)."""
    print(message, file=sys.stderr)


def did_you_mean(name: str, choices) -> str:
    """A hint naming the closest of ``choices`` to a mistyped ``name``, then all of them."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"{hint}available: {', '.join(choices)}"


def fail(message: str) -> int:
    """Say ``message`` on stderr as optbench's one-line error; the usage exit code."""
    print(f"optbench: error: {message}", file=sys.stderr)
    return EXIT_USAGE
