"""A pytest plugin: each (check, case) of an optbench run as one test item, for a parity gate in CI.

    pytest -p optbench.gate --optbench "suite=adamw checks=[parity,cross] dtype=float32" --junitxml=optbench.xml

``--optbench`` takes the overrides of one ``optbench run`` (``--config-dir DIR`` may lead them) and may be
given once per run. Each run's plan (``SuiteRun.plan``) becomes items named
``<suite>::<check>::<impl>::<dtype>::<hparams>`` (JUnit: class ``adamw.parity.foreach.float32``, test
``default``), run in plan order, one at a time, in one worker process (``optbench.engine.pool``; ``jobs=0``:
in the pytest process itself), so cases of a group share their scratch as in ``optbench run``, and a case that
crashes, exits or hangs its worker fails its item (the worker is replaced) instead of ending pytest. An item's
outcome comes from the rows its case wrote: a ``fail`` or ``error`` row fails it (one line per such row); an
``xpass`` row (a declared deviation that no longer deviates) makes it XPASS, a pass that says so; ``xfail``
rows and no ``pass`` make it xfail; rows that verify nothing (``optbench.results.verdict``: only ``skip``,
``unsupported`` and ``info``) skip it with their reasons, and no row at all fails it; anything else (passes,
measurements) passes. A run with ``candidate=`` ends with ``<suite>::parity::<candidate>::checked``, which
fails when no hparam set could check the candidate; a run whose plan has no case is one failing item,
``<suite>::nothing-to-verify``. ``--optbench-out DIR`` keeps each run's results.json, results.csv and
report.md in ``DIR/<suite>/``. With pytest-benchmark installed, a timed case's rounds are also its item's
benchmark (``--benchmark-json``, ``--benchmark-autosave``, ``--benchmark-compare``; optbench.pytest_benchmark_bridge).

The plugin does nothing without ``--optbench``. With it and no test paths on the command line, only the
gate runs (a repository's own ``testpaths`` are not collected). It refuses ``-n`` (pytest-xdist): the
cases of a group must run in order in one process. docs/ci.md has a workflow.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

import pytest

from optbench import pytest_benchmark_bridge
from optbench.results import FAIL, FAILING, NO_VERDICT, NOTHING_VERIFIED, verdict

MAX_LINES = 20  # failing rows named in one item's message


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("optbench", "optbench parity gate (docs/ci.md)")
    group.addoption("--optbench", action="append", default=[], metavar="OVERRIDES",
                    help='the overrides of one optbench run, e.g. "suite=adamw checks=[parity,cross] dtype=float32" '
                         "(--config-dir DIR may lead them); each (check, case) is a test item; repeat for more runs")
    group.addoption("--optbench-out", default=None, metavar="DIR",
                    help="keep each run's results.json, results.csv and report.md in DIR/<suite>/")


def pytest_configure(config: pytest.Config) -> None:
    specs = config.getoption("optbench")
    if not specs:
        return
    if config.getoption("numprocesses", None) not in (None, 0, "0"):
        raise pytest.UsageError("--optbench runs its cases in order in one process: drop -n (pytest-xdist)")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = []  # no test paths named: the gate alone, not the repository's testpaths
    config.pluginmanager.register(Gate(specs, config.getoption("optbench_out")), "optbench-gate")


class CaseFailed(Exception):
    """A case wrote fail or error rows; the message names them, one line each."""


class GateRun:
    """One ``--optbench`` run: its SuiteRun, plan and output folder; started at its first item."""

    def __init__(self, spec: str, out: Path | None, taken: list[str]):
        from optbench.config import compose_config, precheck
        from optbench.engine.runner import SuiteRun
        from optbench.usage import UsageError

        args = shlex.split(spec)
        config_dirs = []
        if args[:1] == ["--config-dir"] and len(args) > 1:
            if not Path(args[1]).is_dir():
                raise pytest.UsageError(f"--optbench {spec!r}: --config-dir {args[1]}: no such directory")
            config_dirs, args = [str(Path(args[1]).resolve())], args[2:]
        self._tmp = None if out else tempfile.TemporaryDirectory(prefix="optbench-gate-")
        try:
            precheck(args, config_dirs)  # an unknown suite or device answers "did you mean"
            cfg = compose_config(args, config_dirs)
            self.suite = str(cfg.suite.name)
            count = sum(t == self.suite for t in taken)  # the same suite again: <suite>-2, ...
            self.name = f"{self.suite}-{count + 1}" if count else self.suite
            self.out = out / self.name if out else Path(self._tmp.name)
            self.run = SuiteRun(cfg, self.out, echo=self._echo, config_dirs=config_dirs)
            # an item is one case timed once: never repeats it says it ran
            if int(self.run.planner.settings.speed.repeats or 1) > 1:
                raise UsageError("speed.repeats: the gate times each case once, as an item; repeat with "
                                 "'optbench run' (or pytest-benchmark's own rounds)")
            self.plan = self.run.blueprint().entries
        except UsageError as exc:
            self.close()
            raise pytest.UsageError(f"--optbench {spec!r}: {exc}") from None
        self.started = self.finished = False
        self.lines: list[str] = []
        self.pool = None  # the worker process the cases run in (jobs=0: none, they run here)
        self._got: dict[int, tuple] = {}
        self._group, self._group_done, self._worker = None, [], None

    def _echo(self, line: str) -> None:
        self.lines.append(str(line))

    def run_case(self, index: int) -> tuple[list[dict], list[str]]:
        """The rows and console lines of the planned case ``index``."""
        self.lines = []
        if not self.started:
            self.run.start()
            self.started = True
        if self.run.jobs == 0:
            return self.run.run_case(*self.run.plan()[index]), self.lines
        return self._in_worker(index, self.plan[index].group), self.lines

    def _in_worker(self, index: int, group: str) -> list[dict]:
        from optbench.engine.units import Unit

        if self.pool is None:
            init = {"op": "init", "cfg": self.run.results.meta["config"], "config_dirs": self.run.config_dirs,
                    "sys_path": list(__import__("sys").path)}
            self.pool = self.run.pool(init, lambda i, rows, line: self._got.__setitem__(i, (rows, line)), jobs=1)
        fresh = group != self._group
        if fresh:
            self._group, self._group_done = group, []
        alive = any(w.number == self._worker for w in self.pool.workers)
        replay = self._group_done if not fresh and not alive else []  # a new worker mid-group: its scratch first
        self.pool.run([Unit([*replay, index], done=list(replay))], fresh=fresh)
        self._worker = self.pool.workers[0].number if self.pool.workers else None
        if self._worker is not None:  # it survived the case: a later case of the group may replay it
            self._group_done.append(index)
        rows, line = self._got.pop(index)
        self.run.results.extend(rows)
        if line:
            self._echo(line)
        return rows

    def finish(self, write: bool) -> list[dict]:
        """Close the run once (the candidate check; results and report when ``write``); the rows it added."""
        if self.finished or not self.started:
            return []
        self.finished = True
        first = len(self.run.results.rows)
        self.run.finish(write=write)
        return self.run.results.rows[first:]

    def close(self) -> None:
        if getattr(self, "pool", None) is not None:
            self.pool.close()
        if self._tmp is not None:
            self._tmp.cleanup()


class Gate:
    """The plugin's state once ``--optbench`` is given: its runs, their collectors, their results."""

    def __init__(self, specs: list[str], out: str | None):
        self.out = Path(out).resolve() if out else None
        self.runs: list[GateRun] = []
        for spec in specs:
            self.runs.append(GateRun(spec, self.out, [r.suite for r in self.runs]))

    def pytest_report_header(self) -> list[str]:
        where = f"; results in {self.out}" if self.out else ""
        runs = ", ".join(f"{r.name} ({len(r.plan)} cases)" for r in self.runs)
        where_run = "in this process" if any(r.run.jobs == 0 for r in self.runs) else "in one worker process"
        return [f"optbench gate: {runs}; {where_run}, in plan order{where}"]

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        report = yield
        if isinstance(collector, pytest.Session) and report.passed:
            # nodeid given: under the session pytest would lead it with '::'
            report.result.extend(RunCollector.from_parent(collector, name=run.name, nodeid=run.name, run=run)
                                 for run in self.runs)
        return report

    def pytest_sessionfinish(self) -> None:
        for run in self.runs:
            if self.out:
                run.finish(write=True)
            run.close()


class RunCollector(pytest.Collector):
    """One run's items, in plan order."""

    def __init__(self, *, run: GateRun, **kwargs):
        super().__init__(**kwargs)
        self.run = run

    def collect(self):
        seen: dict[str, int] = {}
        for index, entry in enumerate(self.run.plan):
            name = item_name(entry, self.run.suite)
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # cases alike in every label: numbered
                name = f"{name}::{seen[name]}"
            yield CaseItem.from_parent(self, name=name, check=entry.check, index=index)
        if not self.run.plan:  # a gate that collects nothing would pass, or exit 5 with no reason
            yield NothingItem.from_parent(self, name="nothing-to-verify")
        candidate = self.run.run.candidate_name()
        if candidate is not None and "parity" in self.run.run.checks:
            yield CandidateItem.from_parent(self, name=f"parity::{_part(candidate)}::checked")


def _part(text: str) -> str:
    """A piece of an item name: no ``::`` (the separator) and no brackets (pytest's parameter ids)."""
    return str(text).replace("::", ":").replace("[", "(").replace("]", ")")


def item_name(entry, suite: str) -> str:
    """``check::impl::dtype::hparams[::workload]``, empty parts left out; led by the case's suite in a
    meta-suite."""
    labels = entry.labels
    parts = [labels["suite"] if labels["suite"] != suite else "", entry.check, labels["impl"], labels["dtype"],
             labels["hparams"], labels.get("workload", "")]
    return "::".join(_part(p) for p in parts if p)


class CaseItem(pytest.Item):
    """One planned case of a run (``check``: its check's name)."""

    def __init__(self, *, check: str | None, index=None, **kwargs):
        super().__init__(**kwargs)
        self.check, self.index = check, index

    def runtest(self) -> None:
        rows, lines = self.parent.run.run_case(self.index)
        if lines:
            self.add_report_section("call", "optbench", "\n".join(lines))
        if self.check in pytest_benchmark_bridge.TIMING_CHECKS:  # its rounds, as pytest-benchmark's too
            pytest_benchmark_bridge.record(self, rows)
        judge(self, rows)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.nodeid


class CandidateItem(CaseItem):
    """The candidate was checked by at least one parity case (``optbench run`` says so at its end)."""

    def __init__(self, **kwargs):
        super().__init__(check=None, **kwargs)

    def runtest(self) -> None:
        gate = self.config.pluginmanager.get_plugin("optbench-gate")
        rows = self.parent.run.finish(write=gate.out is not None)
        if rows:  # none: the candidate was checked
            judge(self, rows)


class NothingItem(CaseItem):
    """A run whose plan has no case (no check has one for this suite, implementation and dtype): it fails."""

    def __init__(self, **kwargs):
        super().__init__(check=None, **kwargs)

    def runtest(self) -> None:
        checks = ", ".join(self.parent.run.run.checks)
        raise CaseFailed(f"NOTHING VERIFIED: the run has no case to run (checks: {checks}); "
                         "pick checks, implementations or dtypes that have cases")


def judge(item: pytest.Item, rows: list[dict]) -> None:
    """Turn a case's rows into the item's outcome (the module docstring has the rules)."""
    statuses = [r["status"] for r in rows if r["status"] != "info"]
    outcome = verdict(rows)
    if outcome.name == FAIL:
        failing = [r for r in rows if r["status"] in FAILING]
        lines = [_line(r) for r in failing[:MAX_LINES]]
        more = f"\n... and {len(failing) - MAX_LINES} more failing rows" if len(failing) > MAX_LINES else ""
        raise CaseFailed("\n".join(lines) + more)
    if not rows:
        raise CaseFailed("NOTHING VERIFIED: the case wrote no rows (a check must say what it did, a skip included)")
    if outcome.name == NOTHING_VERIFIED:
        pytest.skip(_reasons(rows, *NO_VERDICT) or outcome.why)
    if "xpass" in statuses:  # a declared deviation torch has fixed: pytest's XPASS (a pass), reason kept
        item.add_marker(pytest.mark.xfail(reason=_reasons(rows, "xpass"), strict=False))
    elif "xfail" in statuses and "pass" not in statuses:
        pytest.xfail(_reasons(rows, "xfail"))


def _reasons(rows: list[dict], *statuses: str) -> str:
    return "; ".join(dict.fromkeys(r["detail"] or r["metric"] for r in rows if r["status"] in statuses))


def _line(r: dict) -> str:
    where = "/".join(p for p in (r.get("fqn"), r.get("tensor")) if p)
    value = r.get("value")
    shown = f" {value:.3g}{' ' + r['unit'] if r.get('unit') else ''}" if isinstance(value, float) else ""
    text = f"{r['status'].upper()} {r['metric']}{' ' + where if where else ''}{shown}: {r['detail']}"
    return " ".join(text.split())
