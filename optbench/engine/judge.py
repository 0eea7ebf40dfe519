"""The judge of a candidate's cases: their verdicts from what its worker recorded, in the parent, which never
imports the code under test.

A candidate's parity, declared-raise (deviations) and error-input cases (``executor.judged_apart``) run in a worker
as any case does, which records what the candidate did into the run's ``recordings/`` folder instead of judging it
(``numerics.recording_file``: a trajectory, what it raised, or its answers to an invalid input,
``checks.error_attempts.Answering``). The parent hands each recording to its ``Judge``, a thread of the parent
process (which has never imported, inspected or built the candidate; the float64 references and optbench's checks
there are as they were loaded), which checks a trajectory against the case it planned itself (``of_the_case``:
names, steps, shapes, precision, its own start and the workload's gradients) and writes the case's rows with the
check's own code. What it knows of the candidate's class (its defaults, whether it is another class than the
suite's, whether the suite's deviations cover it) is what the plan found (``Blueprint.judging``). A case whose worker
wrote no recording keeps only rows that give no verdict (error, unsupported, skip, fail): a pass, xpass or xfail
without one is refused. A refused recording, or a judgement that raises, is an error row; one past
``case_timeout_s`` is given up (an error row) and the judge goes on in a fresh thread. Recordings are deleted once
judged unless ``parity.keep_recordings`` is set.

A candidate's hyperparameter forms (the forms check) are judged as its parity cases are, each against its float twin
judged before it (kept by dtype and form); which forms the plan made of the class is what the plan found it takes
(``checks.forms.form_facts``). A candidate's round-trip and error-input cases are judged from the answers their worker
recorded (``judged="answers"`` in the check's registration, ``checks.registry``).

A candidate's cross case is judged here too: its side is the trajectory the judge took from its parity recording
(kept until the cross case of its group comes), torch's for-loop is stepped here (the worker's shared a process with
the candidate). A resumed run's worker records a finished parity case again as it rebuilds its group, for the judge
to take the trajectory from.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

from optbench.cases import Case, Judging, RunContext
from optbench.checks import REGISTRY
from optbench.checks.parity import parity_workload
from optbench.checks.registry import judged_by
from optbench.engine.blueprint import Blueprint, error_outcome
from optbench.engine.executor import Executor, recording_path
from optbench.engine.judged_cases import JudgedCases
from optbench.engine.selection import suite_variants
from optbench.hyperparameters import from_data
from optbench.implementations.torch_variants import BASELINE
from optbench.metrics import RUN_CASE_S
from optbench.numerics.recording_file import Answers, Raised, RecordingError, largest, load_recording, of_the_case
from optbench.state.scenarios import SCENARIOS
from optbench.suite.spec import DTYPES

VERDICTS = ("pass", "xpass", "xfail")  # statuses only the judge gives a judged case
ANSWERS_BYTES = 1 << 20  # the most an error input's recorded answers may unpack to


class Refused(Exception):
    """A recording the judge will not judge from: the case is an error row that says why."""


class Judge:
    """Judges the recordings of a run's candidate parity cases, one at a time, in a thread of this process; each
    result goes to ``events`` as ``(judge, {"ev": "judged", "index", "rows", "line"})``."""

    def __init__(self, planner, blueprint: Callable[[], Blueprint], candidate: str, folder: Path, keep: bool,
                 timeout_s: float, events: queue.Queue):
        self.planner, self.blueprint, self.candidate = planner, blueprint, candidate
        self.folder, self.keep, self.timeout_s, self.events = Path(folder), keep, float(timeout_s), events
        self.jobs: queue.Queue = queue.Queue()
        self.pending: dict[int, float | None] = {}  # index -> when its judging began (None: queued)
        self.generation = 0  # a thread given up on (past the timeout) finds it changed and sends nothing
        self._ctx: RunContext | None = None
        self._thread: threading.Thread | None = None
        self.kept: dict[int, dict] = {}  # a cross case's index -> the candidate's trajectory its parity left
        self.replaying: set[int] = set()  # finished cases judged again for their trajectory alone (no rows)
        self.uncounted: list[str] = []  # statuses of error inputs its worker answered itself (skip, unsupported)
        self.cases = JudgedCases(planner, blueprint, candidate)
        self.forms: dict[tuple[str, str], list] = {}  # (dtype, form) -> its trajectory, which later forms compare with

    def wants(self, index: int) -> bool:
        blueprint = self.blueprint()
        entry = blueprint.entries[index]
        return (judged_by(entry.check) is not None and blueprint.candidate is not None
                and entry.labels["impl"] == blueprint.candidate)

    def take(self, index: int, rows: list[dict], line: str) -> tuple[list[dict], str] | None:
        """A judged case's rows from its worker: queued for judging (None) where it wrote its recording (a cross
        case: always), else the rows to record now (a verdict among them refused)."""
        check = self.blueprint().entries[index].check
        if judged_by(check) == "from_parity" or recording_path(self.folder, index).is_file():
            self._queue(index, [r for r in rows if r.get("metric") == RUN_CASE_S])  # what the case cost
            return None
        if not any(r.get("status") in VERDICTS for r in rows):
            if check == "errors":  # (counted in the judge's summing-up line)
                self.uncounted.extend(r["status"] for r in rows if r.get("metric") != RUN_CASE_S)
            return rows, line
        return self._error(index, "its worker sent a verdict without a recording: a candidate's verdict here is "
                                  "the judge's, from what the worker records")

    def replayed(self, index: int) -> None:
        """A finished case its worker ran again to rebuild its group (no rows): a parity case whose trajectory a
        cross case still needs, or a form whose trajectory later forms are compared with (a resumed run), is judged
        again from what it recorded, for that alone."""
        if index in self.pending:  # still being judged from its first run, which keeps its trajectory
            return
        path = recording_path(self.folder, index)
        entry = self.blueprint().entries[index]
        cross = self.cases.cross_of(index) if entry.check == "parity" else None
        if entry.check == "forms":
            needed = (entry.labels["dtype"], entry.labels["hparams"]) not in self.forms
        else:
            needed = cross is not None and cross not in self.kept
        if needed and path.is_file():
            self.replaying.add(index)
            self._queue(index, None)
        elif not self.keep:
            path.unlink(missing_ok=True)

    def forget(self, indices: list[int]) -> None:
        """Delete what a worker recorded for these cases before they run: only a recording written by this run of
        the case is judged (a killed run, resumed into its out_dir, may have left one)."""
        for index in indices:
            if index not in self.pending:  # (one queued for judging is this run's)
                recording_path(self.folder, index).unlink(missing_ok=True)

    def _queue(self, index: int, cost: list[dict] | None) -> None:
        self.pending[index] = None
        self.jobs.put((index, cost))
        if self._thread is None or not self._thread.is_alive():
            self._start()

    @property
    def busy(self) -> bool:
        return bool(self.pending)

    def deadline(self) -> float | None:
        began = [t for t in self.pending.values() if t is not None]
        return min(began) + self.timeout_s if began else None

    def given_up(self, now: float) -> list[tuple[int, list[dict], str]]:
        """The judgements past ``case_timeout_s``, as error rows; the rest go on in a fresh thread."""
        late = [i for i, t in self.pending.items() if t is not None and now - t > self.timeout_s]
        if not late:
            return []
        for index in late:
            del self.pending[index]
        self.generation += 1
        self._ctx = None  # the stuck thread keeps its own
        self._start()
        return [(i, *self._error(i, f"judging its recording ran past case_timeout_s={self.timeout_s:g} s"))
                for i in late if i not in self.replaying]  # (a replay's case has its rows: its cross skips)

    def done(self, event: dict) -> tuple[int, list[dict], str] | None:
        """A ``judged`` event's case and rows, once (None for one given up on, or judged again for its trajectory
        alone)."""
        index = event["index"]
        self.replaying.discard(index)
        if self.pending.pop(index, "gone") == "gone" or event["rows"] is None:
            return None
        return index, event["rows"], event["line"]

    def close(self) -> None:
        """Stop judging (what is still queued stays unrecorded, as a worker's unfinished cases do); the recordings
        no case was judged from (a worker that died after writing one) go too, unless kept, and then the folder if
        nothing else is in it."""
        self.generation += 1
        self.jobs.put((None, []))
        for path in [] if self.keep else self.folder.glob("case-*.npz"):
            path.unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:
            pass

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._serve, args=(self.generation,), daemon=True)
        self._thread.start()

    def _serve(self, generation: int) -> None:
        while generation == self.generation:
            index, cost = self.jobs.get()
            if index is None or generation != self.generation:
                self.jobs.put((index, cost))  # not this thread's: the next one's
                return
            if index not in self.pending:
                continue
            self.pending[index] = time.monotonic()
            try:
                check = self.blueprint().entries[index].check
                judged = judged_by(check)
                rows, line = (self._cross if judged == "from_parity" else self._answered if judged == "answers"
                              else self._judged)(index)
            except Refused as exc:
                rows, line = self._error(index, str(exc))
            except Exception as exc:  # a harness bug: the case is an error, never a silent pass or a lost case
                rows, line = self._error(index, f"the judge failed: {type(exc).__name__}: {exc}")
            finally:
                if self._ctx is not None:  # (the error inputs' counts go on, for their summing-up line)
                    for key in [k for k in self._ctx.scratch if k[0] != "errors"]:
                        del self._ctx.scratch[key]
            if generation == self.generation:
                self.events.put((self, {"ev": "judged", "index": index, "line": line,
                                        "rows": None if cost is None else rows + cost}))

    def _cross(self, index: int) -> tuple[list[dict], str]:
        """A candidate's cross case: its trajectory as its parity recording gave it, against torch's for-loop
        stepped here."""
        ctx = self._context()
        case = self.cases.case(index, ctx)
        ctx.scratch.clear()
        ctx.scratch.update(self.kept.pop(index, {}))
        baseline = suite_variants(case.suite).get(BASELINE)
        if baseline is not None:  # planned as the run planned it (a set not for it: skipped); its rows are its worker's
            ctx.impls = {case.suite.name: [baseline]}
            try:
                planned = next((c for c in REGISTRY["parity"].cases(case.suite, ctx)
                                if c.labels == {**case.labels, "impl": BASELINE}), None)
            finally:
                ctx.impls = {}
            if planned is not None:
                Executor(ctx, self.planner.seed).execute(REGISTRY["parity"], planned)
        rows, line = Executor(ctx, self.planner.seed).execute(REGISTRY[self.blueprint().entries[index].check], case)
        return [r for r in rows if r.get("metric") != RUN_CASE_S], line

    def _answered(self, index: int) -> tuple[list[dict], str]:
        """A candidate's error-input or round-trip case, from the answers its worker recorded, which the check's
        own code reads back as it asks the same questions (``checks.error_attempts.Answering``,
        ``checks.tape.Tape``)."""
        check = self.blueprint().entries[index].check

        def answers_in(path: Path, case: Case, ctx: RunContext) -> Answers:
            if check == "errors":
                bound = ANSWERS_BYTES
            else:  # a round-trip: a few trajectories' worth a scenario; derivatives: a trajectory's worth
                steps = int(ctx.settings.roundtrip.steps if check == "roundtrip" else ctx.steps)
                bound = largest(ctx.workload(case.suite, case.hset, case.dtype, steps=steps)) * len(SCENARIOS)
            answers = load_recording(path, bound)
            if not isinstance(answers, Answers):
                raise RecordingError(f"it holds no answers to {'an error input' if check == 'errors' else check}")
            return answers
        case, answers = self._load(index, answers_in)
        ctx = self._context()
        if check == "errors":
            counts = ctx.scratch.setdefault(("errors", case.impl_name), {})
            while self.uncounted:
                status = self.uncounted.pop()
                counts[status] = counts.get(status, 0) + 1
        # (what its hparam sets are completed from, for a check that reads them: differentiable, quantized, ...)
        ctx.judging = Judging(answers, self._defaults(case), bool((self.blueprint().judging or {}).get("foreign",
                                                                                                      False)))
        ctx.impls = {case.suite.name: [*self.cases.variants(case.suite.name), case.impl]}  # (what the plan ran)
        try:
            rows, line = Executor(ctx, self.planner.seed).execute(REGISTRY[check], case)
        finally:
            ctx.judging, ctx.impls = None, {}
        return [r for r in rows if r.get("metric") != RUN_CASE_S], line

    def _judged(self, index: int) -> tuple[list[dict], str]:
        """A candidate's parity case, or a case of a deviation that makes its step raise on some parameters, from
        the trajectory (or what it raised) its worker recorded."""
        check = REGISTRY[self.blueprint().entries[index].check]

        def trajectory_in(path: Path, case: Case, ctx: RunContext):
            workload = check.workload(case, ctx) if check.name == "deviations" else parity_workload(case, ctx)
            recording = load_recording(path, largest(workload))
            if isinstance(recording, Raised):  # what it raised: matched against a declared raise by the check
                return recording
            return of_the_case(recording, workload, DTYPES[case.dtype], ctx.device)
        case, recording = self._load(index, trajectory_in)
        ctx = self._context()
        facts = self.blueprint().judging or {}
        ctx.judging = Judging(recording, self._defaults(case), bool(facts.get("foreign", False)))
        if check.name == "forms" and (case.dtype, case.label) in self.forms:  # the twin it is compared with
            ctx.scratch[("form", case.label)] = self.forms[(case.dtype, case.label)]
        try:
            rows, line = Executor(ctx, self.planner.seed).execute(check, case)
        finally:
            ctx.judging = None
        if check.name == "forms" and ctx.scratch.get(("form", case.hset.name)) is not None:
            self.forms[(case.dtype, case.hset.name)] = ctx.scratch[("form", case.hset.name)]
        cross = self.cases.cross_of(index) if check.name == "parity" else None
        if cross is not None:  # what the cross case of its group compares
            self.kept[cross] = {key: ctx.scratch[key] for key in (("snapshots", case.impl_name),
                                                                   ("declared", case.impl_name)) if key in ctx.scratch}
        return [r for r in rows if r.get("metric") != RUN_CASE_S], line

    def _defaults(self, case: Case) -> dict:
        """The reference defaults a candidate's hparam sets are completed from: the suite's torch optimizer's, or
        what the plan found of the candidate's class (``Refused`` where one cannot be rebuilt from data)."""
        if case.suite.optimizer_class() is not None:
            return case.suite.defaults()
        try:  # (a library's sentinel default, which no reference reads, as a placeholder)
            return {k: from_data(v, opaque=True) for k, v in (self.blueprint().judging or {}).get("defaults",
                                                                                                  {}).items()}
        except ValueError as exc:
            raise Refused(f"its recording cannot be judged apart: {exc}") from None

    def _load(self, index: int, read: Callable[[Path, Case, RunContext], object]) -> tuple[Case, object]:
        """The planned case ``index`` and what ``read(path, case, ctx)`` takes from its recording, which goes once
        read, unless kept; one refused (or a case the judge cannot plan) raises ``Refused``."""
        path = recording_path(self.folder, index)
        try:
            case = self.cases.case(index, self._context())
            return case, read(path, case, self._context())
        except (RecordingError, LookupError) as exc:
            raise Refused(f"its recording was refused: {exc}") from exc
        finally:
            if not self.keep:
                path.unlink(missing_ok=True)

    def _context(self) -> RunContext:
        if self._ctx is None:
            self._ctx = self.new_context()
        return self._ctx

    def new_context(self) -> RunContext:
        """A context to plan the run's cases in, the judging thread's aside."""
        p = self.planner
        return RunContext(settings=p.settings, device=p.device, steps=p.steps, seed=p.seed, impls={}, dtypes=p.dtypes,
                          compile_dtypes=None, checks=tuple(p.selected_checks()),
                          candidate_name=self.blueprint().candidate or "")

    def _error(self, index: int, detail: str) -> tuple[list[dict], str]:
        return error_outcome(self.blueprint().labels_of(index), detail)
