"""Which suites exist: discovered from the suite files, built-in and in ``--config-dir`` folders.

A suite file names an ``optimizer`` and a ``reference``; a meta-suite (``smoke``, ``all``) names
``members: all`` and runs every such suite file found, optionally trimmed to some hparam sets and dtypes.
A suite with ``optimizer: null`` (``umup``) checks a ``candidate=`` only and is no member of ``all``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from optbench.suite.spec import Suite
from optbench.suites import CONFIG_MODULE
from optbench.usage import UsageError


def suite_files(config_dirs=()) -> dict[str, object]:
    """Suite name -> file, built-in first; a file of the same name in a config dir wins."""
    folders = [resources.files(CONFIG_MODULE) / "suite"] + [Path(d) / "suite" for d in config_dirs]
    found = {}
    for folder in folders:
        if folder.is_dir():
            for entry in sorted(folder.iterdir(), key=lambda p: p.name):
                if entry.name.endswith(".yaml"):
                    found[entry.name[: -len(".yaml")]] = entry
    return found


def suite_names(config_dirs=()) -> list[str]:
    return sorted(suite_files(config_dirs))


def _load(entry) -> DictConfig:
    return OmegaConf.create(entry.read_text(encoding="utf-8"))


def optimizer_suite_names(config_dirs=()) -> list[str]:
    """The single-optimizer suites (every file with a ``reference`` and an ``optimizer`` of its own), for
    ``members: all``."""
    return [name for name, entry in suite_files(config_dirs).items()
            if "reference" in (cfg := _load(entry)) and cfg.get("optimizer") is not None]


def candidate_suite_names(config_dirs=()) -> list[str]:
    """Suites with a ``reference`` but no optimizer of their own (``optimizer: null``): they check a
    ``candidate=`` only, so ``members: all`` leaves them out (a meta-suite takes no candidate)."""
    return [name for name, entry in suite_files(config_dirs).items()
            if "reference" in (cfg := _load(entry)) and cfg.get("optimizer") is None]


def is_meta(suite_cfg: DictConfig) -> bool:
    return "members" in suite_cfg


def resolve(suite_cfg: DictConfig, config_dirs=()) -> list[Suite]:
    """The suites a run checks: the one configured, or a meta-suite's members."""
    if not is_meta(suite_cfg):
        try:
            return [Suite.from_config(suite_cfg)]
        except Exception as exc:  # a malformed user suite file is the user's to fix
            raise UsageError(f"suite {suite_cfg.get('name', '?')!r} is malformed: "
                             f"{type(exc).__name__}: {exc}") from None
    members = suite_cfg.members
    names = optimizer_suite_names(config_dirs) if members == "all" else [str(m) for m in members]
    files = suite_files(config_dirs)
    unknown = [n for n in names if n not in files]
    if unknown:
        raise UsageError(f"meta-suite {suite_cfg.name!r} names unknown suites: {', '.join(unknown)}")
    suites = [Suite.from_config(_load(files[n])) for n in names]
    keep = suite_cfg.get("hparams")
    if keep == "first":
        suites = [s.restricted(hparams=[s.hparams[0].name]) for s in suites]
    elif keep:
        suites = [s.restricted(hparams=[str(h) for h in keep]) for s in suites]
    return suites


def suite_by_name(name: str, config_dirs=()) -> Suite:
    """One single-optimizer suite by name."""
    files = suite_files(config_dirs)
    if name not in files:
        raise UsageError(f"unknown suite {name!r}")
    return Suite.from_config(_load(files[name]))
