"""Turn the run config into concrete choices: device, dtypes, implementations (or a UsageError)."""

from __future__ import annotations

import difflib

import torch
from omegaconf import DictConfig, ListConfig

from optbench.errors import UsageError
from optbench.kernels import TORCH_VARIANTS, Implementation, candidate_implementation, torch_implementations
from optbench.kernels.candidate import CandidateError
from optbench.kernels.torch_variants import optimizer_class
from optbench.suite import DTYPES, Suite


def did_you_mean(name: str, choices) -> str:
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"{hint}available: {', '.join(choices)}"


def _names(value, what: str) -> list[str]:
    if value is None or value == "all":
        return []
    names = list(value) if isinstance(value, (list, tuple, ListConfig)) else [value]
    if not names:
        raise UsageError(f"{what}=[] selects nothing")
    return [str(n) for n in names]


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device=cuda: CUDA is not available here (torch {torch.__version__}); use device=cpu")
    if name not in ("cpu", "cuda"):
        raise UsageError(f"unknown device '{name}': {did_you_mean(name, ['cpu', 'cuda'])}")
    return torch.device(name)


def resolve_dtypes(cfg: DictConfig, suite: Suite) -> list[str]:
    chosen = _names(cfg.dtype, "dtype") or list(suite.dtypes)
    for name in chosen:
        if name not in DTYPES:
            raise UsageError(f"unknown dtype '{name}': {did_you_mean(name, DTYPES)}")
    return chosen


def resolve_implementations(cfg: DictConfig, suite: Suite) -> list[Implementation]:
    """torch's variants (all, or ``impl=``), or with ``candidate=`` the candidate and the for-loop."""
    try:
        variants = torch_implementations(optimizer_class(suite.optimizer))
    except LookupError as exc:
        raise UsageError(str(exc)) from None
    names = _names(cfg.impl, "impl")
    if cfg.candidate:
        try:
            candidate = candidate_implementation(str(cfg.candidate))
        except CandidateError as exc:
            raise UsageError(str(exc)) from None
        return [candidate] + [variants[n] for n in (names or ["for-loop"]) if n != "candidate"]
    for name in names:
        if name not in variants:
            known = [v for v in TORCH_VARIANTS if v in variants]
            raise UsageError(f"{suite.optimizer} has no implementation '{name}': {did_you_mean(name, known)}")
    return [variants[n] for n in names] if names else list(variants.values())
