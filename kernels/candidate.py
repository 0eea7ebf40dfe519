"""User candidates: any importable optimizer class, checked against the suite's reference."""

from __future__ import annotations

import importlib

import torch

from .implementation import Implementation


class CandidateError(ValueError):
    """The dotted path does not name an importable torch optimizer class."""


def load_candidate_class(dotted_path: str) -> type:
    module_name, _, class_name = dotted_path.rpartition(".")
    if not module_name:
        raise CandidateError(f"candidate must be a dotted path like 'my_pkg.optim.MyAdam', got {dotted_path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CandidateError(f"cannot import candidate module {module_name!r}: {exc}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise CandidateError(f"module {module_name!r} has no attribute {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise CandidateError(f"candidate {dotted_path!r} is not a torch.optim.Optimizer subclass")
    return cls


def candidate_implementation(dotted_path: str) -> Implementation:
    """The candidate class, built with the suite's hyperparameters and nothing else."""
    return Implementation(f"candidate:{dotted_path.rpartition('.')[2]}", load_candidate_class(dotted_path), is_candidate=True)
