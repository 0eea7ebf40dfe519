"""Deliberately wrong optimizers ("mutants") that optbench must catch, and correct controls.

One module per optimizer; each holds hand-written optimizers that subclass the torch optimizer they
imitate (so they take exactly its constructor arguments) and carry exactly one bug, named in their
one-line docstring, plus ``MUTANTS`` (class -> suite where it must FAIL) and ``CONTROLS`` (class ->
suite where it must PASS), and optionally ``EXISTS_AT`` (class -> the dtypes its bug can exist at),
``CAUGHT_BY`` (class -> the check that must catch it), ``SHOWS_BY`` (class -> the steps before it shows) and
``SPECS`` (class -> the candidate spec it is judged through, a spec file's keys but ``class``: an 8-bit optimizer's
quantized state layout). Run one as ``candidate=optbench.mutants.<module>.<Class>`` (with a spec: a spec file naming
that class, ``optbench.engine.mutants.spec_file``). The catalogue below is discovered from the
modules, not listed by hand.
"""

from __future__ import annotations

import importlib
import pkgutil

MUTANTS: dict[str, str] = {}  # "module.Class" -> suite
CONTROLS: dict[str, str] = {}
EXISTS_AT: dict[str, tuple[str, ...]] = {}  # "module.Class" -> the dtypes its bug can exist at (default: all)
CAUGHT_BY: dict[str, str] = {}  # "module.Class" -> the check that must catch it (default: parity)
SPECS: dict[str, dict] = {}  # "module.Class" -> the candidate spec it is judged through (default: none)
SHOWS_BY: dict[str, int] = {}  # "module.Class" -> steps a run needs before its bug shows (default: the suite's
# STEPS, else 8: most bugs show at the first step, every other one by the third)
STEPS = {"lbfgs": 8, "muon": 10, "lion": 8, "adan": 8, "lamb": 8, "schedule_free_adamw": 8, "hf_adafactor": 8,
         "ademamix": 8, "adabelief": 8}
# steps per run (default 25, which reaches AdamW's bug from step 21); LBFGS (up to 20 updates a step) and Muon
# mutants show from their first steps, and their steps cost the most; those of the algorithms torch lacks show
# by step 3 (AdaBelief's rectification threshold by step 5)

for _info in pkgutil.iter_modules(__path__):
    try:
        _module = importlib.import_module(f"{__name__}.{_info.name}")
    except AttributeError as _exc:  # an older torch without the optimizer these mutants subclass (Muon < 2.9)
        if "module 'torch.optim' has no attribute" not in str(_exc):
            raise
        continue
    for _catalogue, _found in ((MUTANTS, getattr(_module, "MUTANTS", {})),
                               (CONTROLS, getattr(_module, "CONTROLS", {}))):
        _catalogue.update({f"{_info.name}.{cls}": suite for cls, suite in _found.items()})
    EXISTS_AT.update({f"{_info.name}.{cls}": tuple(d) for cls, d in getattr(_module, "EXISTS_AT", {}).items()})
    CAUGHT_BY.update({f"{_info.name}.{cls}": check for cls, check in getattr(_module, "CAUGHT_BY", {}).items()})
    SPECS.update({f"{_info.name}.{cls}": spec for cls, spec in getattr(_module, "SPECS", {}).items()})
    SHOWS_BY.update({f"{_info.name}.{cls}": int(n) for cls, n in getattr(_module, "SHOWS_BY", {}).items()})
