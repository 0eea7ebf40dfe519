"""User candidates: any importable optimizer class, checked against the suite's reference."""

from __future__ import annotations

import importlib
import os
import sys

import torch

from .adapter import Implementation


class CandidateError(ValueError):
    """The dotted path does not name an importable torch optimizer class."""


def importable_from_cwd() -> None:
    """Let ``candidate=`` and ``reference:`` name modules in the current directory, as ``python -m`` does."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def load_optimizer_class(dotted_path: str, what: str = "candidate") -> type:
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
    cls = getattr(module, class_name, None)
    if cls is None:
        raise CandidateError(f"module {module_name!r} has no attribute {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise CandidateError(f"{what} {dotted_path!r} is not a torch.optim.Optimizer subclass")
    return cls


def candidate_implementation(dotted_path: str, kwargs: dict | None = None) -> Implementation:
    """The candidate class, built with the suite's hyperparameters plus ``kwargs`` (candidate_kwargs)."""
    return Implementation(f"candidate:{dotted_path.rpartition('.')[2]}", load_optimizer_class(dotted_path),
                          is_candidate=True, extra_kwargs=dict(kwargs or {}))
