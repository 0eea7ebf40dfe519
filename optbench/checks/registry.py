"""The check registry: a check is one class, registered with everything the rest of optbench needs to know of it.

``@register_check(...)`` on a ``Check`` class (``checks.base``) records an instance of it under its ``name``,
with its block of the run config (``config``: defaults, under the check's name, overridable as
``optbench run <name>.<key>=...``), whether a plain run selects it (``default``), whether it measures time or
memory (``alone``: its cases run alone, after the rest), whether it times steps (``timed``: with ``speed.threads``
torch threads, the others with ``check_threads``), how report.md shows its rows (``sections``: rows ->
[(title, DataFrame)]), whose statuses the report's summary line counts (``counted``: the ``check`` value of
its rows) and who judges a candidate's cases of it (``judged``, ``engine.judge``): None, its worker (a check that
measures, or judges only what it built itself); ``"trajectory"``, the parent, from the trajectory or the raise the
worker records; ``"answers"``, the parent, running the check's code again on the answers the worker recorded as the
check asked (``checks.tape``); ``"from_parity"``, the parent alone, from the trajectories
its group's parity cases left (the candidate's, as its recording gave it, and torch's for-loop stepped in the
parent): nothing of its own is recorded.
The runner, the config, the report and the summary iterate the registry, in run order within a group of cases
(``arrange``: the built-in checks first, in the order ``optbench.checks`` gives). ``unregister`` removes one (a
test's toy check).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from optbench.checks.base import Check

Sections = Callable[[pd.DataFrame], list[tuple[str, pd.DataFrame]]]
CONFIG_NODE = "optbench_checks"  # the run config's defaults entry holding every registered check's block


@dataclass(frozen=True)
class Registration:
    """One registered check and what the config, the report and the summary read of it."""

    check: Check
    config: dict | None = None
    default: bool = False
    alone: bool = False
    timed: bool = False
    sections: Sections | None = None
    counted: str | None = None
    judged: str | None = None


JUDGED_BY = (None, "trajectory", "answers", "from_parity")
REGISTRATIONS: dict[str, Registration] = {}
REGISTRY: dict[str, Check] = {}  # name -> check, in registration order


def register_check(*, config: dict | None = None, default: bool = False, alone: bool = False,
                   timed: bool = False, sections: Sections | None = None, counted: str | None = None,
                   judged: str | None = None):
    """Register the decorated ``Check`` class (see the module docstring); a second check of the same name is an
    error."""

    def register(cls: type) -> type:
        check = cls()
        if check.name in REGISTRY:
            raise ValueError(f"a check named {check.name!r} is registered already ({type(REGISTRY[check.name])})")
        if judged not in JUDGED_BY:
            raise ValueError(f"check {check.name!r}: judged={judged!r} is not one of {JUDGED_BY}")
        if config and check.name in _run_config_keys():
            raise ValueError(f"check {check.name!r}: its config block would replace the run config's own "
                             f"{check.name!r}: name the check otherwise")
        REGISTRATIONS[check.name] = Registration(check, dict(config) if config else None, default, alone,
                                                 timed, sections, counted, judged)
        REGISTRY[check.name] = check
        store_config_defaults()
        return cls

    return register


def arrange(first: list[str]) -> None:
    """Put the checks named in ``first`` first, in that order (the built-in checks' run order; a check registered
    later, by a plugin or a test, runs after them)."""
    order = [n for n in first if n in REGISTRY] + [n for n in REGISTRY if n not in first]
    for table in (REGISTRATIONS, REGISTRY):
        items = {n: table[n] for n in order}
        table.clear()
        table.update(items)
    store_config_defaults()


def unregister(name: str) -> None:
    REGISTRATIONS.pop(name, None)
    REGISTRY.pop(name, None)
    store_config_defaults()


def default_checks() -> list[str]:
    """What ``checks:`` is when a run names none."""
    return [name for name, r in REGISTRATIONS.items() if r.default]


def alone_checks() -> tuple[str, ...]:
    """The checks that measure time or memory: their cases run one at a time, after the rest."""
    return tuple(name for name, r in REGISTRATIONS.items() if r.alone)


def check_blocks() -> dict[str, dict]:
    """Each check's block of the run config, as registered: its keys and their defaults."""
    return {name: r.config for name, r in REGISTRATIONS.items() if r.config}


def config_defaults() -> dict:
    """The run config's entries the checks own: ``checks`` (the default selection) and each check's block."""
    return {"checks": default_checks(), **check_blocks()}


def store_config_defaults() -> None:
    """Put ``config_defaults()`` where the run config's defaults list finds it (Hydra's ConfigStore, as
    ``CONFIG_NODE``); every change to the registry does, so importing ``optbench.checks`` before composing a
    config is enough."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=CONFIG_NODE, node=config_defaults())


def _run_config_keys() -> set[str]:
    """The top-level keys of the run config file (``suites/config.yaml``), which no check's block may replace."""
    from optbench.suites import run_config

    return {str(k) for k in run_config()}


def report_sections(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Every registered check's report.md sections over ``rows``, in registration order; a section that raises is
    a one-line table saying so (a plugin's bug never costs the rest of the report)."""
    out = []
    for name, r in REGISTRATIONS.items():
        if r.sections is None:
            continue
        try:
            out += r.sections(rows)
        except Exception as exc:
            why = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            out.append((f"{name} (its section could not be rendered)", pd.DataFrame({"error": [why]})))
    return out


def counted_checks() -> list[str]:
    """The ``check`` values of rows whose statuses the summary line counts."""
    return [r.counted for r in REGISTRATIONS.values() if r.counted]


def judged_by(name: str) -> str | None:
    """Who judges a candidate's cases of the check ``name`` (``Registration.judged``; None for an unknown name)."""
    registration = REGISTRATIONS.get(name)
    return registration.judged if registration else None
