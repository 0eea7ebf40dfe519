"""Errors that are the user's to fix: reported in one line with exit code 2, no traceback."""

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad suite, device, dtype, implementation, candidate or path; the message is one line."""
