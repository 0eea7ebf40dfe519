"""Resharding with torch.distributed: save sharded on N ranks with DCP, continue on M ranks and in one
plain process, compare with the uninterrupted single-process run (``optbench.checks.reshard_ranks``).

Opt-in: ``checks=[reshard]``, settings under ``reshard:`` in suites/config.yaml. One case per for-loop,
foreach and fused implementation, on the suite's ``roundtrip_hparams`` at ``reshard.dtype``; one row per
direction (``from_ranks -> to_ranks`` and ``from_ranks -> a single process``). A step torch cannot run
on sharded parameters (a DTensor op without a sharding rule, sparse gradients, ...) is a ``skip`` with
its exception's first line; one that runs and lands elsewhere than the uninterrupted run is a ``fail``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.deviations import declared_status
from optbench.checks.registry import register_check
from optbench.metrics import RESHARD_MAX_ERR_EPS
from optbench.numerics.one_step import update_eps
from optbench.report.tables import CASE, num
from optbench.results import row
from optbench.settings import Settings as RunSettings
from optbench.suite.spec import DTYPES, Suite
from optbench.usage import UsageError

IMPLS = ("for-loop", "foreach", "fused")
BACKENDS = ("auto", "gloo", "nccl")


@dataclass(frozen=True)
class ReshardSettings:
    from_ranks: int
    to_ranks: tuple[int, ...]
    steps: int
    save_at: int
    dtype: str
    backend: str  # gloo or nccl (auto resolved by the device)
    timeout_s: float


def _positive(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        noun = "steps" if what in ("steps", "save_at") else "ranks"
        raise UsageError(f"reshard.{what} must be a positive integer (a number of {noun}), got {value!r}")
    return value


def settings(run: RunSettings, device: torch.device) -> ReshardSettings:
    """The ``reshard:`` block, validated (a bad value is a one-line UsageError)."""
    rc = run.reshard
    to = rc.get("to_ranks", 1)
    to_ranks = tuple(_positive(t, "to_ranks") for t in (to if isinstance(to, tuple) else [to]))
    steps, save_at = _positive(rc.get("steps", 6), "steps"), _positive(rc.get("save_at", 3), "save_at")
    if save_at >= steps:
        raise UsageError(f"reshard.save_at must be below reshard.steps ({steps}), got {save_at}")
    dtype, backend = str(rc.get("dtype", "float32")), str(rc.get("backend", "auto"))
    if dtype not in DTYPES:
        raise UsageError(f"reshard.dtype: unknown dtype {dtype!r} (one of {', '.join(DTYPES)})")
    if backend not in BACKENDS:
        raise UsageError(f"reshard.backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    timeout = rc.get("timeout_s", 120)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise UsageError(f"reshard.timeout_s must be a positive number of seconds, got {timeout!r}")
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    return ReshardSettings(_positive(rc.get("from_ranks", 2), "from_ranks"), to_ranks, steps, save_at, dtype, backend,
                    float(timeout))


def _ranks(n: int) -> str:
    return f"{n} rank{'s' * (n != 1)}"


def _closure_driven_reason(case: Case, workload) -> str:
    """Why a closure-driven optimizer (LBFGS) is not resharded, from what torch does when asked."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from optbench.checks.reshard_ranks import module_of, one_line

    model = module_of(workload.materialize(DTYPES[case.dtype], torch.device("cpu")))
    optimizer = case.hset.build(case.impl, dict(model.named_parameters()), workload.names).optimizer
    try:
        get_state_dict(model, optimizer)  # what a loading rank calls first, on a fresh optimizer
        why = "its step re-evaluates a loss, which the sharded ranks do not have (not run)"
    except Exception as exc:
        why = (f"get_state_dict on a fresh optimizer (the state to load into) raised {type(exc).__name__}: "
               f"{one_line(exc)}: DCP creates that state with step(closure=None)")
    return f"not run: closure-driven; {why}"



def _table(rows):
    """One line per case and rank count: the worst error after the resharded load, its verdict and how it ran."""
    sel = rows[rows["check"] == "reshard"]
    return sel[CASE].assign(**{"max err (eps)": sel["value"].map(num), "verdict": sel["status"],
                               "detail": sel["detail"]})


@register_check(
    counted="reshard",
    # opt-in: save sharded with DCP, continue on other rank counts. from_ranks: ranks that step first and save
    # (FSDP2 over a DeviceMesh of this size); to_ranks: ranks that load and continue (a list runs each, e.g.
    # [3,1]; a plain process always runs too); steps in all, compared with the uninterrupted single-process run at
    # parity tolerance; save_at: the step after which the checkpoint is saved; backend: auto, gloo on cpu and nccl
    # on cuda (one GPU per rank; fewer GPUs: a skip row); timeout_s: per group of ranks (a rank that hangs or dies
    # is an error, never a hang)
    config={"from_ranks": 2, "to_ranks": [1], "steps": 6, "save_at": 3, "dtype": "float32", "backend": "auto",
            "timeout_s": 120},
    sections=lambda rows: [("Resharded checkpoints (DCP: saved on some ranks, continued on others)", _table(rows))])
class ReshardCheck:
    """One case per for-loop/foreach/fused implementation, on the suite's ``roundtrip_hparams``."""

    name = "reshard"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        s = settings(ctx.settings, ctx.device)
        hset = suite.hparam_set(suite.roundtrip_hparams)
        return [Case(suite, impl, s.dtype, hset, ctx.device) for impl in ctx.impls[suite.name]
                if impl.name in IMPLS and not impl.is_candidate and not ctx.unavailable(impl, s.dtype)]

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        from optbench.checks.reshard_ranks import SINGLE, ReshardJob, reshard

        s = settings(ctx.settings, ctx.device)
        targets = (*s.to_ranks, SINGLE)
        names = [f"{_ranks(s.from_ranks)} -> {_ranks(t) if t is not SINGLE else 'a single process'}" for t in targets]
        workload = ctx.workload(case.suite, case.hset, case.dtype, steps=s.steps)
        skip = ""
        if case.suite.closure_driven:
            skip = _closure_driven_reason(case, workload)
        elif s.backend == "nccl":
            need, have = max(s.from_ranks, *s.to_ranks), torch.cuda.device_count()
            if have < need or not torch.distributed.is_nccl_available():
                skip = f"backend nccl needs {need} CUDA devices (found {have})"
        if skip:
            rows = [row(case.labels, check="reshard", metric=RESHARD_MAX_ERR_EPS, value=float("nan"), unit="eps",
                        status="skip", detail=f"{name}: {skip}") for name in names]
            return Outcome(rows, f"  SKIP  reshard {case.suite.name} {case.impl_name} {case.dtype}: {skip}")
        coarse = update_eps(case.suite, case.dtype)
        job = ReshardJob(case.impl, case.hset, workload, DTYPES[case.dtype], s.steps, s.save_at, s.backend, s.timeout_s,
                  update_eps=coarse)
        declared = case.suite.deviations_for(case.impl or case.impl_name, case.dtype, case.hset.name, check="reshard")
        rows, lines = [], []
        for name, d in zip(names, reshard(job, s.from_ranks, targets)):
            how = f"{name} via DCP (FSDP2, {s.backend}), saved after step {s.save_at}"
            if d.error:
                detail = f"{how}: cannot run sharded: {d.error}"
            else:
                where = f"at {d.worst}" if d.worst else "(bit for bit)"
                detail = (f"{how}, continued {s.steps - s.save_at} steps: max {d.max_err_eps:.3g} eps {where} "
                          f"(tolerance {d.tolerance:g}, {d.compared} tensors by FQN)")
                if d.shared_err_eps < d.max_err_eps:
                    detail += f"; the tensors both runs have: max {d.shared_err_eps:.3g} eps"
                if coarse:
                    detail += (f"; parameters in {case.suite.update_precision} eps of their displacement where "
                               f"smaller: the update is computed in {case.suite.update_precision} by design")
            status = d.status
            if declared and status in ("pass", "fail"):  # a recorded upstream reason
                status = declared_status(status, declared[0])
                detail += f"; declared: {declared[0].finding}: {declared[0].reason}"
            rows.append(row(case.labels, check="reshard", metric=RESHARD_MAX_ERR_EPS, value=d.max_err_eps,
                            unit="eps", status=status, detail=detail, step=s.steps,
                            finding=declared[0].finding if declared and status != d.status else ""))
            verdict = d.error or f"max {d.max_err_eps:.3g} eps (tolerance {d.tolerance:g})"
            label = f"{case.suite.name} {case.impl_name} {case.dtype}"
            lines.append(f"  {status.upper():5} reshard {label}: {name}: {verdict}")
        return Outcome(rows, "\n".join(lines))
