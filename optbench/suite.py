"""A suite: one optimizer, its reference, the dtypes and hyperparameter sets to check it under.

Suites are data (``suites/suite/<name>.yaml``); this module turns the composed config into typed
objects and splits a workload's named parameters into torch param groups by glob patterns.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from types import ModuleType

import torch
from omegaconf import DictConfig, OmegaConf

from optbench.reference import REFERENCES

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def _hp(options) -> dict:
    """Hyperparameters as torch takes them: YAML lists become tuples (betas, eps pairs)."""
    plain = OmegaConf.to_container(options, resolve=True) if isinstance(options, DictConfig) else dict(options)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in plain.items()}


@dataclass(frozen=True)
class GroupSpec:
    """Parameters whose names match any of ``match`` go to a group with these option overrides."""

    match: tuple[str, ...]
    options: dict


@dataclass(frozen=True)
class HparamSet:
    name: str
    options: dict
    groups: tuple[GroupSpec, ...] = ()
    dtypes: tuple[str, ...] | None = None  # None: every dtype of the suite

    def group_options(self) -> list[dict]:
        """Full hyperparameters of each param group; group 0 holds everything unmatched."""
        return [dict(self.options)] + [{**self.options, **g.options} for g in self.groups]

    def assign(self, names: list[str]) -> list[list[str]]:
        """Split names into param groups (first matching pattern wins; unmatched go to group 0)."""
        assigned: list[list[str]] = [[] for _ in range(len(self.groups) + 1)]
        for name in names:
            index = next(
                (i + 1 for i, g in enumerate(self.groups) if any(fnmatch.fnmatchcase(name, m) for m in g.match)),
                0,
            )
            assigned[index].append(name)
        return assigned

    def param_groups(self, params: dict[str, torch.Tensor], order: list[str] | None = None) -> list[dict]:
        """torch param groups of (name, tensor) pairs; ``order`` permutes names within groups."""
        names = order if order is not None else list(params)
        return [
            {"params": [(n, params[n]) for n in group_names], **opts}
            for group_names, opts in zip(self.assign(names), self.group_options())
            if group_names
        ]


@dataclass(frozen=True)
class KnownFailure:
    """An upstream bug the suite declares: that FQN is checked on its own and expected to fail."""

    fqn: str
    reason: str


@dataclass(frozen=True)
class Suite:
    name: str
    optimizer: str
    reference_name: str
    dtypes: tuple[str, ...]
    hparams: tuple[HparamSet, ...]
    roundtrip_hparams: str
    sparse: bool = False
    known_failures: tuple[KnownFailure, ...] = ()

    def hparam_set(self, name: str) -> HparamSet:
        return next(h for h in self.hparams if h.name == name)

    @property
    def reference(self) -> ModuleType:
        return REFERENCES[self.reference_name]

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Suite:
        hparams = tuple(
            HparamSet(
                name=h.name,
                options=_hp(h.options),
                groups=tuple(GroupSpec(tuple(g.match), _hp(g.options)) for g in h.get("groups", [])),
                dtypes=tuple(h.dtypes) if h.get("dtypes") else None,
            )
            for h in cfg.hparams
        )
        return cls(
            name=cfg.name,
            optimizer=cfg.optimizer,
            reference_name=cfg.reference,
            dtypes=tuple(cfg.dtypes),
            hparams=hparams,
            roundtrip_hparams=cfg.get("roundtrip_hparams", hparams[0].name),
            sparse=bool(cfg.get("sparse", False)),
            known_failures=tuple(KnownFailure(k.fqn, " ".join(k.reason.split())) for k in cfg.get("known_failures", [])),
        )
