"""Composed configs kept for the life of a process: Hydra's defaults list once per choice of config groups.

A compose spends most of its time building the defaults list and loading the files it names (0.15-0.2 s on these
2 cores; 40% of a one-case run in a test's process). The overrides of plain values (``steps=8``,
``out_dir=...``, ``parity.one_step=false``) change none of that: they are applied to the composed config
afterwards, by Hydra's own ``_apply_overrides_to_config``, the same call on the same kind of config as in
Hydra's compose. So a process that composes many runs (the tests, ``optbench mutants``, the pytest gate) composes
the config of its group choices once and applies each run's value overrides to a copy of it; the first compose of
a choice is Hydra's as it is (a command that composes once pays nothing for the keeping), the second keeps it.

What is kept is keyed by every override that is not a plain value (config groups, packages, ``hydra.*``), the
search path, the bytes of every file on it (an edited suite file composes anew) and the ConfigStore's nodes (a
check registered later, ``optbench.checks.registry``, composes anew). Sweeps and anything Hydra
would refuse go to Hydra as they are (``plain``), so an error reads as Hydra's.
"""

from __future__ import annotations

import copy
import hashlib
from importlib import resources
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from optbench.suites import CONFIG_MODULE

KEPT = 32  # group choices kept per process (a run composes one; a test process a few dozen)
_kept: dict[tuple, tuple] = {}
_seen: set[tuple] = set()  # group choices composed once: kept from the second time


def compose_with(plain: Callable[[list[str]], DictConfig], overrides: list[str], dirs: list[str]) -> DictConfig:
    """``plain(overrides)`` (Hydra's compose), reusing what an earlier call composed for the same group choices;
    ``dirs``: the folders on the search path besides optbench's own (the plugins', ``--config-dir``'s)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:
        return plain(overrides)  # Hydra says why
    groups = group_names(dirs)
    if any(o.is_sweep_override() for o in parsed):
        return plain(overrides)
    values = [o for o in parsed if is_plain_value(o, groups)]
    choices = [o.input_line for o in parsed if not is_plain_value(o, groups)]
    nodes = stored_nodes()
    key = (tuple(choices), tuple(dirs), fingerprint(dirs), tuple(map(id, nodes)))
    if key not in _kept and key not in _seen:  # once: as Hydra composes it, nothing kept (a command composes once)
        _seen.add(key)
        return plain(overrides)
    if key not in _kept:
        if len(_kept) >= KEPT:
            _kept.pop(next(iter(_kept)))
        _kept[key] = (nodes, plain(choices))  # the nodes kept alive: their ids are not reused while keyed
    cfg = copy.deepcopy(_kept[key][1])
    OmegaConf.clear_cache(cfg)  # no resolved ${now:} (out_dir's) carried from one run to the next
    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    return cfg


def is_plain_value(override, groups: set[str]) -> bool:
    """An override Hydra applies to the composed config (not a config group, package or ``hydra.*`` one)."""
    head = override.key_or_group.lstrip("+~").replace("/", ".").split(".")[0]
    if override.package is not None or head == "hydra":
        return False
    return head not in groups or isinstance(override.value(), dict)  # a dict is a value even for a group (Hydra)


def group_names(dirs: list[str]) -> set[str]:
    """Every config group's first path component on the search path (folders), and the ConfigStore's."""
    from hydra.core.config_store import ConfigStore

    names = {k for k, v in ConfigStore.instance().repo.items() if isinstance(v, dict)}
    for folder in _folders(dirs):
        names.update(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("__"))
    return names


def stored_nodes() -> tuple:
    """Every config in Hydra's ConfigStore as stored now (a check registered later stores its blocks' node
    anew: another object)."""
    from hydra.core.config_store import ConfigStore

    out, folders = [], [ConfigStore.instance().repo]
    while folders:
        for value in folders.pop().values():
            (folders if isinstance(value, dict) else out).append(value)
    return tuple(out)


def fingerprint(dirs: list[str]) -> str:
    """A digest of every config file on the search path: its path and its bytes."""
    digest = hashlib.blake2b(digest_size=16)
    for folder in _folders(dirs):
        for path in sorted(folder.rglob("*.yaml")):
            digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _folders(dirs: list[str]) -> list[Path]:
    own = Path(str(resources.files(CONFIG_MODULE)))
    return [own, *(Path(d) for d in dirs if Path(d).is_dir())]


def forget() -> None:
    """Drop every kept config (the tests that compare a kept compose with a fresh one)."""
    _kept.clear()
    _seen.clear()

