"""Deliberately wrong optimizers ("mutants") that optbench must catch, and correct controls.

One module per optimizer; each holds hand-written optimizers that subclass the torch optimizer they
imitate (so they take exactly its constructor arguments) and carry exactly one bug, named in their
one-line docstring, plus ``MUTANTS`` (class -> suite where it must FAIL) and ``CONTROLS`` (class ->
suite where it must PASS). Run one as ``candidate=tests.mutants.<module>.<Class>``. The catalogue
below is discovered from the modules, not listed by hand.
"""

from __future__ import annotations

import importlib
import pkgutil

MUTANTS: dict[str, str] = {}  # "module.Class" -> suite
CONTROLS: dict[str, str] = {}

for _info in pkgutil.iter_modules(__path__):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    for _catalogue, _found in ((MUTANTS, getattr(_module, "MUTANTS", {})), (CONTROLS, getattr(_module, "CONTROLS", {}))):
        _catalogue.update({f"{_info.name}.{cls}": suite for cls, suite in _found.items()})
