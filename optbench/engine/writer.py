"""The run's one writer: each finished case into the journal at once, results.json/csv, the history copy and
report.md once at the end, interrupted or not.

``RunWriter.open`` starts the journal (or goes on with a resumed run's), ``record`` takes a finished case's rows
(journal, then the console; ``max_failures`` failing cases stop the run), ``finish`` writes the record of the run.
A disk that fills or a folder that goes away loses nothing the journal already holds.
"""

from __future__ import annotations

import time
from pathlib import Path

from optbench.checks.registry import counted_checks, report_sections
from optbench.consistency import contradicted
from optbench.engine.history import record_quietly
from optbench.engine.interrupts import MaxFailuresReached
from optbench.journal import JOURNAL, Journal, Record
from optbench.metrics import CASE_ERROR
from optbench.results import FAILING, FINISHED, SCHEMA_VERSION, Results, row
from optbench.rows import CASE_KEY, Row, bounded


class RunWriter:
    """Writes one run's ``results`` (its out_dir, meta and rows): the journal as cases finish, the rest at the end."""

    def __init__(self, results: Results, echo, max_failures: int = 0):
        self.results, self.echo, self.max_failures = results, echo, max_failures
        self.by_case: dict[int, list[dict]] = {}
        self.journal: Journal | None = None
        self.writing_s = 0.0  # the journal's share of the run: meta.run.journal_writing_s
        self.failed = 0  # cases with a fail or error row, for max_failures
        self.line, self.progress = echo, None

    def open(self, plan_size: int, header: dict, resume: Record | None = None) -> None:
        """Start the journal with ``header``, or go on with ``resume``'s (its finished cases counted as recorded)."""
        path = self.results.out_dir / JOURNAL
        if resume is not None:
            self.by_case.update({i: rows for i, rows in resume.cases.items() if 0 <= i < plan_size})
            self.journal = Journal(path, keep=resume.lines)
        else:
            self.journal = Journal(path, header)

    def show_on(self, bar) -> None:
        """Console lines through the progress ``bar`` (tqdm), which counts the cases recorded."""
        self.progress = bar
        bar.update(len(self.by_case))
        self.line = bar.write if not bar.disable else self.echo

    def record(self, index: int, rows: list[dict], line: str) -> None:
        """A finished case's rows (each checked, its text bounded: ``rows.Row``) into the journal, then the console
        (a line bounded too)."""
        started = time.perf_counter()
        rows = [Row.from_dict(r).as_dict() for r in rows]
        if why := contradicted(rows):  # a verdict its own figures deny: not the check's (optbench.consistency)
            labels, check = {k: rows[0][k] for k in CASE_KEY}, rows[0]["check"]
            rows.append(row(labels, check=check, metric=CASE_ERROR, value=1, status="error",
                            detail=f"its rows contradict themselves: {why}"))
            line = f"{line}\n  ERROR {check} {labels['impl']} {labels['dtype']} {labels['hparams']}: {why}"
        self.journal.case(index, rows)
        self.writing_s += time.perf_counter() - started
        self.by_case[index] = rows
        line = "\n".join(bounded(part) for part in line.split("\n")) if line else line
        if self.progress is not None:
            self.progress.update(1)
        if line:
            self.line(line)
        if self.max_failures and any(r["status"] in FAILING for r in rows):
            self.failed += 1
            if self.failed >= self.max_failures:
                raise MaxFailuresReached(self.failed)

    def finish(self, run: dict, history_dir=None) -> Results:
        """Write results.json/csv, end the journal (removed once results.json holds a finished run), keep a finished
        run in ``history_dir`` and render report.md (``results.meta["run"]`` says how the run ended already). A
        write that fails says where the finished cases are."""
        try:
            path = self.results.finish()
            if self.journal is not None:
                self.journal.end(run)
                self.journal.close()
                if run["status"] == FINISHED:
                    self.journal.path.unlink(missing_ok=True)  # results.json holds it all; a journal means unfinished
        except OSError as exc:
            self.echo(f"optbench: could not write the results ({exc}); every finished case is in "
                      f"{self.results.out_dir / JOURNAL}")
            self.results.meta["run"] = run | {"status": "crashed", "how": f"{run['how']}; results not written: {exc}"}
            return self.results
        from optbench.report import render_report  # here: workers never render (matplotlib is slow to import)

        if run["status"] == FINISHED:  # a history problem warns, never loses the run
            record_quietly(path, history_dir, self.echo)
        render_report(self.results.meta | {"schema_version": SCHEMA_VERSION}, self.results.table, Path(path).parent,
                      report_sections, counted_checks())
        return self.results
