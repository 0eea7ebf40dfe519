"""Units: how a run's plan is cut for worker processes. A unit is a group of cases that share scratch (parity
leaves trajectories that cross reads; forms and speed compare with an earlier case of their group; errors' last
case sums up its implementation's inputs), which run in one process in plan order, or else one case. Units of the
checks registered ``alone`` (speed, memory, scaling: they measure) are kept apart: they run after the rest, one at a
time."""

from __future__ import annotations

from dataclasses import dataclass, field

from optbench.checks.registry import alone_checks

SHARES_SCRATCH = ("parity", "cross", "forms", "speed", "errors")  # cases that read what an earlier one left


@dataclass
class Unit:
    """Plan indices that run in one process in order (a group sharing scratch, or one case)."""

    items: list[int]
    done: list[int] = field(default_factory=list)  # recorded already: replayed, not rerun, after a crash
    lost: list[int] = field(default_factory=list)  # recorded as the case its worker died in: never rerun
    deaths: int = 0
    crashed: dict[int, dict[str, str]] = field(default_factory=dict)  # index -> {part it died in: how}

    def requests(self) -> list[list]:
        """What a worker is sent: the finished cases to replay, then the cases to run (with the parts of each
        that killed a worker before, which the case leaves out: ``RunContext.part``)."""
        return ([[i, "replay"] for i in self.done]
                + [[i, "run", self.crashed.get(i, {})] for i in self.items
                   if i not in self.done and i not in self.lost])


def cut_into_units(entries) -> tuple[list[Unit], list[Unit]]:
    """The plan (its blueprint's entries) cut into units: (those that may run side by side, the timing ones)."""
    parallel: list[Unit] = []
    timing: list[Unit] = []
    last, alone = None, alone_checks()
    for index, entry in enumerate(entries):
        into = timing if entry.check in alone else parallel
        key = entry.group if entry.check in SHARES_SCRATCH else None
        if key is not None and key == last and into and into[-1].items[-1] == index - 1:
            into[-1].items.append(index)
        else:
            into.append(Unit([index]))
        last = key
    return parallel, timing


def unfinished(units: list[Unit], finished) -> list[Unit]:
    """The units with cases not in ``finished`` (plan indices): a resumed run's finished cases are replayed,
    unrecorded, where a later case of their unit reads their scratch, else left out."""
    out = []
    for unit in units:
        done = [i for i in unit.items if i in finished]
        if len(done) < len(unit.items):
            out.append(Unit(unit.items, done=done if len(unit.items) > 1 else []))
    return out


COMPILE_COST = 20  # a compiled case costs about this many eager cases (it compiles on CPU: 10-25 s against ~0.5 s)


def longest_first(units: list[Unit], entries) -> list[Unit]:
    """The units in the order workers should take them: the costliest (compiled cases) first, so that no
    worker is left compiling alone at the end of the parallel phase. Order never changes a row: each unit
    starts from a fresh state and rows are written in plan order."""
    def cost(unit: Unit) -> int:
        return sum(COMPILE_COST if entries[i].compiled else 1 for i in unit.items)
    return sorted(units, key=cost, reverse=True)
