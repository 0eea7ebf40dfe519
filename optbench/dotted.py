"""Objects named by dotted path (``my_pkg.optim.MyAdam``), imported from the current directory or installed packages:
how ``candidate=``, a suite's ``reference:`` and a candidate spec's decoder are found."""

from __future__ import annotations

import importlib
import os
import sys


class CandidateError(ValueError):
    """The dotted path does not name an importable torch optimizer class."""


def importable_from_cwd() -> None:
    """Let ``candidate=`` and ``reference:`` name modules in the current directory, as ``python -m`` does."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def import_dotted(dotted_path: str, what: str = "candidate"):
    """The object a dotted path names (``my_pkg.optim.MyAdam``), from the current directory or installed packages."""
    importable_from_cwd()
    module_name, _, class_name = dotted_path.rpartition(".")
    if not module_name:
        raise CandidateError(f"{what} must be a dotted path like 'my_pkg.optim.MyAdam', got {dotted_path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CandidateError(f"cannot import {what} module {module_name!r}: {exc}") from None
    except (Exception, SystemExit) as exc:  # the module's own code raised while importing
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = str(exc).splitlines()[0] if str(exc) else ""
        raise CandidateError(f"{what} module {module_name!r} raised at import: {type(exc).__name__}: {message} "
                             f"({where.filename}:{where.lineno})") from None
    found = getattr(module, class_name, None)
    if found is None:
        raise CandidateError(f"module {module_name!r} has no attribute {class_name!r}")
    return found
