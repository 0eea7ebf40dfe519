"""Which suites exist: discovered from the suite files, built-in, of plugins and in ``--config-dir`` folders.

A suite file names an ``optimizer`` and a ``reference``; a meta-suite (``smoke``, ``all``) names
``members: all`` and runs every such suite file found, optionally trimmed to some hparam sets and dtypes.
A suite with ``optimizer: null`` (``umup``) checks a ``candidate=`` only and is no member of ``all``.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

import optbench.plugins as plugins
from optbench.suite.spec import Suite
from optbench.suites import CONFIG_MODULE
from optbench.usage import UsageError, say_once
from optbench.yaml_loader import loader


def suite_files(config_dirs=()) -> dict[str, object]:
    """Suite name -> file: built-in, then the ``optbench.suites`` plugins' (``optbench.plugins``), then the config
    dirs'; a later file of the same name wins."""
    dirs = [*plugins.suite_dirs(), *config_dirs]
    folders = [resources.files(CONFIG_MODULE) / "suite"] + [Path(d) / "suite" for d in dirs]
    found = {}
    for folder in folders:
        if folder.is_dir():
            for entry in sorted(folder.iterdir(), key=lambda p: p.name):
                if entry.name.endswith(".yaml"):
                    found[entry.name[: -len(".yaml")]] = entry
    return found


def replacing_file(name: str, config_dirs=()):
    """The suite file of a plugin or a config dir that replaces the built-in suite ``name`` (None when the built-in
    is the one, or there is none of that name). Hydra finds the built-in first, so the run takes this file's
    content in its place (``Planner``): a user's ``suite/sgd.yaml`` is what ``suite=sgd`` runs, as documented."""
    builtin = resources.files(CONFIG_MODULE) / "suite" / f"{name}.yaml"
    entry = suite_files(config_dirs).get(name)
    return entry if entry is not None and builtin.is_file() and str(entry) != str(builtin) else None


def replaced(suite_cfg: DictConfig, config_dirs=()) -> DictConfig:
    """``suite_cfg`` as Hydra composed it, or the content of the file that replaces that built-in suite
    (``replacing_file``); a meta-suite cannot be replaced (its file sets run defaults Hydra has applied already)."""
    entry = replacing_file(str(suite_cfg.get("name", "")), config_dirs)
    if entry is None:
        return suite_cfg
    if is_meta(suite_cfg):
        raise UsageError(f"{entry}: a meta-suite file cannot replace the built-in {suite_cfg.name!r}: name it "
                         "otherwise")
    return _load(entry)


def suite_names(config_dirs=()) -> list[str]:
    return sorted(suite_files(config_dirs))


def _load(entry) -> DictConfig:
    """A suite file (a copy: callers may change it), or a one-line UsageError naming the file (and line) when
    it is not a suite file. Each file's text is parsed once per process (a run reads each file several times)."""
    return copy.deepcopy(_read(entry))


def _read(entry) -> DictConfig:
    """A suite file as parsed, shared: only to read (``_load`` is the copy to change; a deep copy of an
    OmegaConf tree costs milliseconds, and listing the suites reads every file dozens of times)."""
    return _parsed(entry.name, entry.read_text(encoding="utf-8"), str(entry))


@lru_cache(maxsize=256)
def _parsed(name: str, text: str, where: str) -> DictConfig:
    import yaml

    entry = Path(where)
    stem = name[: -len(".yaml")]
    try:
        parsed = yaml.load(text, Loader=loader())
        cfg = OmegaConf.create({} if parsed is None else parsed)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{entry}{at}: not valid YAML: {problem}") from None
    except Exception as exc:
        raise UsageError(f"{entry}: not a suite file: {str(exc).splitlines()[0] if str(exc) else exc!r}") from None
    if not isinstance(cfg, DictConfig):
        raise UsageError(f"{entry}: not a suite file (a suite file is a mapping: name, optimizer, reference, ...)")
    named = OmegaConf.select(cfg, "suite.name") if "suite" in cfg and "name" not in cfg else cfg.get("name")
    if named != stem:  # a meta-suite file (@package _global_) names itself under suite:
        raise UsageError(f"{entry}: says name: {named!r}, but a suite is named by its file: name: {stem}")
    return cfg


def check_suite_file(name: str, config_dirs=()) -> None:
    """Read the suite file ``suite=name`` selects: a YAML error or a wrong ``name:`` is a UsageError."""
    files = suite_files(config_dirs)
    if name in files:
        _read(files[name])


def optimizer_suite_names(config_dirs=()) -> list[str]:
    """The single-optimizer suites (every file with a ``reference`` and an ``optimizer`` of its own), for
    ``members: all``."""
    return [name for name, entry in suite_files(config_dirs).items()
            if "reference" in (cfg := _read(entry)) and cfg.get("optimizer") is not None]


def candidate_suite_names(config_dirs=()) -> list[str]:
    """Suites with a ``reference`` but no optimizer of their own (``optimizer: null``): they check a
    ``candidate=`` only, so ``members: all`` leaves them out (a meta-suite takes no candidate)."""
    return [name for name, entry in suite_files(config_dirs).items()
            if "reference" in (cfg := _read(entry)) and cfg.get("optimizer") is None]


def is_meta(suite_cfg: DictConfig) -> bool:
    return "members" in suite_cfg



def resolve(suite_cfg: DictConfig, config_dirs=()) -> list[Suite]:
    """The suites a run checks: the one configured, or a meta-suite's members."""
    if not is_meta(suite_cfg):
        try:
            return [_with_reference(Suite.from_config(suite_cfg))]
        except UsageError:
            raise
        except Exception as exc:  # a malformed user suite file is the user's to fix
            raise UsageError(f"suite {suite_cfg.get('name', '?')!r} is malformed: "
                             f"{type(exc).__name__}: {exc}") from None
    members = suite_cfg.members
    names = optimizer_suite_names(config_dirs) if members == "all" else [str(m) for m in members]
    files = suite_files(config_dirs)
    unknown = [n for n in names if n not in files]
    if unknown:
        raise UsageError(f"meta-suite {suite_cfg.name!r} names unknown suites: {', '.join(unknown)}")
    suites = []
    for n in names:
        try:
            suites.append(Suite.from_config(_load(files[n])))
        except UsageError:
            raise
        except Exception as exc:  # a malformed user suite file is the user's to fix
            raise UsageError(f"{files[n]}: suite {n!r} is malformed: {type(exc).__name__}: {exc}") from None
    missing = [s for s in suites if s.optimizer and "." not in s.optimizer
               and not hasattr(torch.optim, s.optimizer)]
    if missing:  # an older torch: the suites of optimizers it lacks cannot run here, the rest can
        say_once(f"optbench: suite={suite_cfg.name} leaves out {', '.join(s.name for s in missing)}: torch "
                  f"{torch.__version__} has no {', '.join('torch.optim.' + s.optimizer for s in missing)}")
        suites = [s for s in suites if s not in missing]
    keep = suite_cfg.get("hparams")
    return [s.selected(keep) for s in suites] if keep else suites


def _with_reference(suite: Suite) -> Suite:
    """``suite``, its reference loaded now: one that cannot be imported is a one-line usage error, not an error
    row per case."""
    try:
        suite.reference
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"suite {suite.name!r}: reference {suite.reference_name!r} cannot be loaded: {exc} (a "
                         "built-in name from 'optbench list', or a module importable from the working directory)"
                         ) from None
    return suite


def suite_by_name(name: str, config_dirs=()) -> Suite:
    """One single-optimizer suite by name."""
    files = suite_files(config_dirs)
    if name not in files:
        raise UsageError(f"unknown suite {name!r}")
    return Suite.from_config(_load(files[name]))
