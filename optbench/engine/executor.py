"""Running cases in this process: a case's rows, whatever the code under test does, from a fresh unit state.

``Executor.execute`` runs one (check, case): an exception, ``SystemExit`` included, becomes an ``error`` row of the
case, and every case records what it cost (``run.case_s``). ``run_unit`` runs a unit's requests in order from the
same state whatever ran before it in the process (scratch, torch's settings, RNGs, compiled graphs reset): which
worker runs which unit never changes a row. The worker process and ``jobs=0`` both run units through it.
"""

from __future__ import annotations

import logging
import random
import sys
import time
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from optbench.cases import Case, RunContext
from optbench.checks.registry import REGISTRATIONS, judged_by
from optbench.metrics import CASE_ERROR, RUN_CASE_S
from optbench.reference import ContractError
from optbench.results import row
from optbench.rows import bounded, first_words


def quiet_torch() -> None:
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    # a compiled step calls the optimizer's original step, which the scheduler's call counter does not see
    warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)` before")
    torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)


@contextmanager
def threads(n: int | None):
    """Run with ``n`` intra-op threads (None: leave torch's setting), restoring it afterwards."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def recording_path(folder, index: int) -> Path:
    """Where the planned case ``index`` writes its recording for the judge (``engine.judge``)."""
    return Path(folder) / f"case-{int(index)}.npz"


def judged_apart(check, case: Case) -> bool:
    """Whether a case's verdict is the judge's (``engine.judge``), from what its worker records: a candidate's
    case of a check registered ``judged="trajectory"`` or ``"answers"`` (``checks.registry``)."""
    return judged_by(check.name) in ("trajectory", "answers") and case.impl is not None and case.impl.is_candidate


class Executor:
    """Runs the cases of a plan in this process, with the run's ``ctx`` and ``seed``; ``record_dir``: a candidate's
    parity case also writes its recording there (``recording_path``), for the judge (``engine.judge``)."""

    def __init__(self, ctx: RunContext, seed: int, record_dir: str | None = None):
        self.ctx, self.seed, self.record_dir = ctx, seed, record_dir
        self.threads = torch.get_num_threads()  # this process's own, before any code under test ran

    def reset_for_unit(self) -> None:
        """What a unit may see of the units before it in this process: nothing that changes a row."""
        self.ctx.scratch.clear()
        # torch's process-wide settings as torch starts: code under test that changed one changes no later unit
        torch.set_default_dtype(torch.float32)
        torch.set_default_device(None)
        torch.set_grad_enabled(True)
        torch.autograd.set_detect_anomaly(False)
        if torch.are_deterministic_algorithms_enabled() or torch.is_deterministic_algorithms_warn_only_enabled():
            torch.use_deterministic_algorithms(False)  # only then: its first call imports inductor (2 s)
        torch.set_num_threads(self.threads)
        torch.manual_seed(self.seed)
        np.random.seed(self.seed % 2**32)
        random.seed(self.seed)
        if "torch._dynamo" in sys.modules:  # graphs compiled (shapes marked dynamic) by an earlier unit
            torch._dynamo.reset()

    def run_unit(self, plan: list, requests: list, fresh: bool = True, started=None, progress=None):
        """Run one unit's ``requests`` (``[index, "run" | "replay", {crashed part: how}]`` into ``plan``, as
        ``Unit.requests`` gives them), from a fresh unit state unless ``fresh`` is False; yields
        ``(index, mode, rows, line)`` per request (a replay only rebuilds the scratch a later case reads: its rows
        are not recorded). ``started(index)`` is called as each case begins, ``progress(index, what)`` as the case
        says which part of it runs."""
        if fresh:
            self.reset_for_unit()
        for index, mode, *crashed in requests:
            if started is not None:
                started(index)
            quiet = self.ctx.progress
            if progress is not None:
                self.ctx.progress = lambda what, i=index: progress(i, what)
            self.ctx.crashed = dict(crashed[0]) if crashed else {}
            if self.record_dir and judged_apart(*plan[index]):  # a replay too: a resumed run's judge may need it
                self.ctx.recording_to = recording_path(self.record_dir, index)
            try:
                yield (index, mode, *self.execute(*plan[index]))
            finally:
                self.ctx.progress, self.ctx.crashed, self.ctx.recording_to = quiet, {}, None

    def execute(self, check, case: Case) -> tuple[list[dict], str]:
        """Run one case here: its rows (an exception, ``SystemExit`` included, becomes an ``error`` row) and
        console line. The checks registered ``timed`` run with ``speed.threads`` torch threads, the rest with
        ``check_threads``."""
        settings, registered = self.ctx.settings, REGISTRATIONS.get(check.name)
        timed = registered is not None and registered.timed
        with_threads = settings.speed.threads if timed else settings.check_threads
        started = time.perf_counter()
        try:
            with threads(with_threads):
                outcome = check.run(case, self.ctx)
            rows, line = outcome.rows, outcome.line
        except (Exception, SystemExit) as exc:  # a crashing implementation is a finding, not a harness failure
            where = traceback.extract_tb(exc.__traceback__)[-1]
            message = bounded(first_words(str(exc)))
            detail = (f"{check.name}: {message}" if isinstance(exc, ContractError)  # names its module: no location
                      else f"{check.name}: {type(exc).__name__}: {message} "
                           f"({Path(where.filename).name}:{where.lineno})")
            rows = [row(case.labels, check=check.name, metric=CASE_ERROR, value=1, status="error", detail=detail)]
            line = f"  ERROR {check.name} {case.impl_name} {case.dtype} {case.labels['hparams']}: {detail}"
        if rows:  # what each case cost, so a slow suite can be read off its results
            labels = {k: rows[0][k] for k in ("suite", "optimizer", "impl", "dtype", "hparams", "device", "workload")}
            rows.append(row(labels, check=check.name, metric=RUN_CASE_S, value=time.perf_counter() - started, unit="s"))
        return rows, line
