"""Resharding through torch.distributed.checkpoint (DCP): save on N ranks, load on M, continue.

The model holds a workload's named parameters under their FQNs (dotted names become submodules) and is
sharded with FSDP2 ``fully_shard`` on a 1-D DeviceMesh, so each parameter is a ``Shard(0)`` DTensor.
FSDP2 refuses 0-dim parameters (they are left out with ``ignored_params`` and made ``Replicate()``
DTensors on the same mesh) and non-contiguous ones (sharded from a contiguous copy: same values). No
forward or backward runs: each step's gradient is the workload's, which every rank has whole, cut to the
parameter's placement (``distribute_tensor(..., src_data_rank=None)``: no communication).

``reshard`` runs (a) every step uninterrupted in this process, unsharded; (b) ``save_at`` steps on
``from_ranks`` processes (gloo, or NCCL with one GPU each; rendezvous through a FileStore in a temporary
directory), then ``dcp.save`` of ``get_state_dict(model, optimizer)``, keyed by FQN; (c) a fresh model
and optimizer on ``to_ranks`` processes, or in this process with no process group and plain tensors
(``SINGLE``), whose own ``get_state_dict`` is filled in place by ``dcp.load`` (DCP reads each target
tensor's slice by FQN, whatever the saved sharding) and applied with ``set_state_dict``; they continue to
the last step. Every parameter and state tensor, gathered whole (``DTensor.full_tensor``), is compared
by FQN with (a) in eps of the dtype, against the parity tolerance ``tolerance_eps(steps)``.
"""

from __future__ import annotations

import datetime
import os
import pickle
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.multiprocessing as mp

from optbench.implementations import Implementation
from optbench.numerics.accuracy import err_eps, moved_err_eps, tolerance_eps
from optbench.numerics.recording import as_array, snapshot
from optbench.suite.spec import HparamSet
from optbench.workloads import Workload

Snapshot = dict[tuple[str, str], np.ndarray]
SINGLE = None  # a ``to_ranks`` entry: one plain process, no process group
# What the forkserver imports once, so that each rank it forks starts in milliseconds, not seconds.
PRELOAD = ("torch._dynamo", "torch.distributed.fsdp", "torch.distributed.checkpoint",
           "torch.distributed.checkpoint.state_dict")


class ReshardError(RuntimeError):
    """A rank died or timed out; the message is one line."""


class RankRaised(ReshardError):
    """A rank raised: the optimizer (or torch) cannot do this sharded. The message is one line."""


@dataclass(frozen=True)
class ReshardJob:
    """What every rank needs (pickled to the workers)."""

    impl: Implementation
    hset: HparamSet
    workload: Workload
    dtype: torch.dtype
    steps: int
    save_at: int
    backend: str = "gloo"  # or nccl (one CUDA device per rank)
    timeout_s: float = 120.0  # per group of ranks
    after_load: Callable | None = None  # (model, optimizer) -> None after loading: a test's deliberate mistake
    update_eps: float | None = None  # the update's precision by design, when coarser (Muon: bfloat16), see compare

    @property
    def device(self) -> torch.device:
        return torch.device("cuda" if self.backend == "nccl" else "cpu")


@dataclass(frozen=True)
class Direction:
    """One resharding, ``from_ranks`` -> ``to_ranks`` (``SINGLE``: a plain process), against run (a)."""

    from_ranks: int
    to_ranks: int | None
    max_err_eps: float = float("nan")
    worst: str = ""  # "fqn/tensor" of the largest error
    tolerance: float = float("nan")
    compared: int = 0  # tensors compared
    error: str = ""  # why it could not run (a rank raised), one line
    shared_err_eps: float = float("nan")  # the largest error over the tensors both runs have

    @property
    def status(self) -> str:
        return "skip" if self.error else "pass" if self.max_err_eps <= self.tolerance else "fail"


def module_of(params: dict[str, torch.nn.Parameter]) -> torch.nn.Module:
    """An ``nn.Module`` holding ``params`` under exactly their FQNs (``a.b.w``: submodules a, b)."""
    root = torch.nn.Module()
    for fqn, p in params.items():
        *path, leaf = fqn.split(".")
        owner = root
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, torch.nn.Module())
            owner = owner._modules[part]
        owner.register_parameter(leaf, p)
    return root


def _replace(model: torch.nn.Module, fqn: str, value: torch.Tensor, requires_grad: bool) -> None:
    owner, _, leaf = fqn.rpartition(".")
    model.get_submodule(owner).register_parameter(leaf, torch.nn.Parameter(value, requires_grad=requires_grad))


def shard(model: torch.nn.Module, mesh) -> None:
    """FSDP2 over ``mesh``; 0-dim parameters, which it refuses, replicated as DTensors."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, distribute_tensor

    for fqn, p in list(model.named_parameters()):  # "FSDP does not support non-contiguous parameters yet"
        if not p.is_contiguous():
            _replace(model, fqn, p.detach().contiguous(), p.requires_grad)
    scalars = {fqn: p for fqn, p in model.named_parameters() if p.dim() == 0}
    fully_shard(model, mesh=mesh, ignored_params=set(scalars.values()) or None)
    for fqn, p in scalars.items():  # "fully_shard doesn't support scalar parameters"
        _replace(model, fqn, distribute_tensor(p.detach(), mesh, [Replicate()], src_data_rank=None), p.requires_grad)


def _set_gradients(named: dict, workload: Workload, step: int, whole: dict) -> None:
    from torch.distributed.tensor import DTensor, distribute_tensor

    for fqn, p in named.items():
        g = workload.gradient(step, fqn, whole[fqn]) if p.requires_grad else None
        if g is not None and isinstance(p, DTensor):  # every rank has it whole: cut it, no communication
            g = distribute_tensor(g if g.is_sparse else g.contiguous(), p.device_mesh, p.placements, src_data_rank=None)
        p.grad = g


def gathered(optimizer: torch.optim.Optimizer, named: dict) -> Snapshot:
    """``recording.snapshot`` of whole tensors (a collective when sharded: every rank calls it)."""
    from torch.distributed.tensor import DTensor

    def whole(value):
        return value.full_tensor() if isinstance(value, DTensor) else value

    out = {}
    for fqn, p in named.items():
        out[(fqn, "param")] = as_array(whole(p))
        out.update({(fqn, key): array for key, value in optimizer.state.get(p, {}).items()
                    if (array := as_array(whole(value))) is not None})
    return out


def _run(job: ReshardJob, model: torch.nn.Module, steps: range, checkpoint: str | None = None):
    """Build the optimizer on ``model``'s parameters, optionally load ``checkpoint`` by FQN, step ``steps``."""
    from torch.distributed.checkpoint import load
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    named = dict(model.named_parameters())
    optimizer = job.hset.build(job.impl, named, job.workload.names).optimizer
    if checkpoint is not None:
        model_sd, optim_sd = get_state_dict(model, optimizer)  # creates the optimizer's state to load into
        state = {"model": model_sd, "optim": optim_sd}
        with warnings.catch_warnings():  # with no process group DCP warns that it loads in one process: it does
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            load(state, checkpoint_id=checkpoint, no_dist=not torch.distributed.is_initialized())
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        if job.after_load is not None:
            job.after_load(model, optimizer)
    whole = job.workload.materialize(job.dtype, job.device)
    for step in steps:
        _set_gradients(named, job.workload, step, whole)
        optimizer.step()
    return optimizer, named


def _worker(rank: int, world: int, job: ReshardJob, phase: str, folder: str) -> None:
    import torch.distributed as dist
    from torch.distributed.checkpoint import save
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    if job.backend == "gloo" and os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # every rank is on this machine
    device = torch.device("cuda", rank) if job.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(job.backend, init_method=f"file://{folder}/store-{phase}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=2 * job.timeout_s))  # the parent's deadline first
    try:
        model = module_of(job.workload.materialize(job.dtype, device))
        shard(model, init_device_mesh(device.type, (world,)))
        checkpoint = os.path.join(folder, "checkpoint")
        if phase == "save":
            optimizer, _ = _run(job, model, range(job.save_at))
            model_sd, optim_sd = get_state_dict(model, optimizer)
            save({"model": model_sd, "optim": optim_sd}, checkpoint_id=checkpoint)
        else:
            optimizer, named = _run(job, model, range(job.save_at, job.steps), checkpoint)
            result = gathered(optimizer, named)
            if rank == 0:
                with open(os.path.join(folder, f"result-{phase}.pkl"), "wb") as f:
                    pickle.dump(result, f)
        dist.barrier()
    except Exception as exc:  # the parent reports it in one line: "Type: first line of the message"
        with open(os.path.join(folder, f"error-{phase}-{rank}.txt"), "w") as f:
            f.write(f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")
        raise
    finally:
        dist.destroy_process_group()


def one_line(text, limit: int = 200) -> str:
    """The first non-empty line of ``text``, at most ``limit`` characters."""
    line = next((line.strip() for line in str(text).splitlines() if line.strip()), "no message")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _start_forkserver() -> None:
    """Each rank is forked from a fresh server that imported torch once (spawning a rank imports torch
    again, ~3 s each; forking this process would copy its threads). Starting it early overlaps that import."""
    from multiprocessing import forkserver

    mp.set_forkserver_preload([__name__, *PRELOAD])
    forkserver.ensure_running()


def _spawn(job: ReshardJob, world: int, phase: str, folder: str) -> None:
    """``_worker`` on ``world`` processes: a rank's exception is ``RankRaised``, a death or a timeout
    ``ReshardError``; the other ranks are killed, never left waiting."""
    _start_forkserver()
    context = mp.start_processes(_worker, args=(world, job, phase, folder), nprocs=world, join=False,
                                 start_method="forkserver")
    deadline = time.monotonic() + job.timeout_s
    try:
        while not context.join(timeout=max(deadline - time.monotonic(), 0.1)):
            if time.monotonic() >= deadline:
                raise ReshardError(f"{phase} on {world} rank(s) timed out after {job.timeout_s:g} s "
                                   f"(reshard.timeout_s)")
    except mp.ProcessRaisedException as exc:
        summary = os.path.join(folder, f"error-{phase}-{exc.error_index}.txt")
        what = open(summary).read() if os.path.exists(summary) else str(exc).strip().splitlines()[-1]
        raise RankRaised(f"rank {exc.error_index} of {world} raised {one_line(what)}") from None
    except mp.ProcessExitedException as exc:
        raise ReshardError(f"{phase}: rank {exc.error_index} of {world} died: {one_line(str(exc).strip())}") from None
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
            process.join(5)


def compare(actual: Snapshot, expected: Snapshot, eps: float, start: dict | None = None,
            update_eps: float | None = None) -> tuple[float, str, float]:
    """The largest error in eps over every (fqn, tensor) either side has; where ("" when all agree bit for
    bit; a tensor only one side has is an infinite error, said so); the largest over those both have.
    With ``update_eps`` (an update computed in a coarser precision by design) a parameter's error is in
    that eps of its displacement from ``start`` where smaller: a sharded step rounds such an update
    differently, a wrong one misses it by a whole update."""
    worst, where, shared = 0.0, "", 0.0
    for key in sorted(expected.keys() | actual.keys()):
        if key in actual and key in expected:
            e, note = err_eps(actual[key], expected[key], eps), ""
            if update_eps and key[1] == "param" and start is not None:
                e = min(e, moved_err_eps(actual[key], expected[key], start[key[0]], update_eps))
            shared = max(shared, e)
        else:
            e, note = float("inf"), " (only the " + ("uninterrupted" if key in expected else "loaded") + " run has it)"
        if e > worst:
            worst, where = e, "/".join(key) + note
    return worst, where, shared


def _plain(job: ReshardJob) -> torch.nn.Module:
    return module_of(job.workload.materialize(job.dtype, job.device))


def _continued(job: ReshardJob, ranks: int | None, folder: str) -> Snapshot:
    """(c): load the checkpoint on ``ranks`` ranks (``SINGLE``: here, no process group) and continue."""
    if ranks is not SINGLE:
        _spawn(job, ranks, f"load{ranks}", folder)
        with open(os.path.join(folder, f"result-load{ranks}.pkl"), "rb") as f:
            return pickle.load(f)
    try:
        return snapshot(*_run(job, _plain(job), range(job.save_at, job.steps), os.path.join(folder, "checkpoint")))
    except Exception as exc:  # as a rank's exception: it cannot be done
        raise RankRaised(f"this process raised {type(exc).__name__}: {one_line(exc)}") from exc


def reshard(job: ReshardJob, from_ranks: int, to_ranks: tuple[int | None, ...] = (SINGLE,)) -> list[Direction]:
    """Save after ``job.save_at`` steps on ``from_ranks`` ranks, continue on each of ``to_ranks``, compare
    with the uninterrupted run (a). A direction a rank raised in carries the reason in ``error``."""
    _start_forkserver()
    expected = snapshot(*_run(job, _plain(job), range(job.steps)))
    start = {fqn: as_array(p) for fqn, p in job.workload.materialize(job.dtype, torch.device("cpu")).items()}
    eps, tol = torch.finfo(job.dtype).eps, tolerance_eps(job.steps)
    out = []
    with tempfile.TemporaryDirectory(prefix="optbench-reshard-") as folder:
        try:
            _spawn(job, from_ranks, "save", folder)
        except RankRaised as exc:
            return [Direction(from_ranks, ranks, error=f"saving: {exc}") for ranks in to_ranks]
        for ranks in to_ranks:
            try:
                actual = _continued(job, ranks, folder)
            except RankRaised as exc:
                out.append(Direction(from_ranks, ranks, error=f"loading: {exc}"))
                continue
            worst, where, shared = compare(actual, expected, eps, start, job.update_eps)
            out.append(Direction(from_ranks, ranks, worst, where, tol, len(expected.keys() | actual.keys()), "",
                                 shared))
    return out
