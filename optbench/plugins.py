"""Plugins: another package's suites, references, checks and adapter keys, found through entry points.

A library ships its own optbench support in its own package and declares it in its ``pyproject.toml``::

    [project.entry-points."optbench.suites"]
    mylib = "mylib.optbench"            # a package whose folder holds suite/*.yaml
    [project.entry-points."optbench.references"]
    signsgd = "mylib.optbench.signsgd"  # a reference module (optbench.reference's contract), as reference: signsgd
    [project.entry-points."optbench.checks"]
    mylib = "mylib.optbench.checks"     # a module whose @register_check classes register on import
    [project.entry-points."optbench.adapters"]
    mylib = "mylib.optbench.adapters"   # a module whose adapter keys register on import

Each group is loaded once per process, when optbench first needs it. A plugin that fails to load is one line on
stderr naming it, its package and why, and the rest still load; ``optbench list`` shows every plugin, where it came
from and whether it loaded.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

GROUPS = ("optbench.suites", "optbench.references", "optbench.checks", "optbench.adapters")


@dataclass(frozen=True)
class Plugin:
    """One entry point of an optbench group: ``value`` is the module it names; ``error`` why it did not load."""

    group: str
    name: str
    value: str
    package: str
    error: str = ""

    @property
    def where(self) -> str:
        return f"{self.name} = {self.value} (from {self.package})"


_loaded: dict[str, list[Plugin]] = {}


def declared(group: str) -> list[Plugin]:
    """The entry points of ``group`` installed here, by name, without importing them."""
    found = [Plugin(group, ep.name, ep.value, _package(ep)) for ep in metadata.entry_points(group=group)]
    return sorted(found, key=lambda p: p.name)


def _package(ep) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "?"


def load(group: str) -> list[Plugin]:
    """Import every module of ``group`` once (what registers checks and adapter keys); a failure is one line on
    stderr and a Plugin with its ``error``, never an exception."""
    if group not in _loaded:
        _loaded[group] = []  # a plugin that imports optbench again while loading finds the group loading already
        done = []
        for plugin in declared(group):
            try:
                importlib.import_module(plugin.value.partition(":")[0])
            except BaseException as exc:  # a plugin's bug (or its sys.exit) never stops optbench
                why = (str(exc).splitlines() or [""])[0][:200]
                plugin = Plugin(group, plugin.name, plugin.value, plugin.package, f"{type(exc).__name__}: {why}")
                print(f"optbench: plugin {plugin.where} in {group} did not load: {plugin.error}", file=sys.stderr)
            done.append(plugin)
        _loaded[group] = done
    return _loaded[group]


def suite_dirs() -> list[str]:
    """The folders of the ``optbench.suites`` plugins that loaded (each holds suite/*.yaml)."""
    out = []
    for plugin in load("optbench.suites"):
        module = sys.modules.get(plugin.value.partition(":")[0])
        if not plugin.error and module is not None and getattr(module, "__file__", None):
            out.append(str(Path(module.__file__).resolve().parent))
    return out


def reference_module(name: str) -> str | None:
    """The module path an ``optbench.references`` plugin gives for reference ``name`` (not imported), or None."""
    return next((p.value.partition(":")[0] for p in declared("optbench.references") if p.name == name), None)
