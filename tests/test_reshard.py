"""Resharding with torch.distributed (gloo, CPU): save sharded on N ranks with DCP, continue on M ranks and
in a plain process, compare by FQN with the uninterrupted run; a wrong load fails, a hang times out."""

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.optim._muon as _muon
from torch.distributed.tensor import DTensor

from optbench.checks.reshard_ranks import SINGLE, ReshardError, ReshardJob, reshard
from optbench.cli import main
from optbench.implementations import torch_implementations
from optbench.numerics.one_step import update_eps
from optbench.suite.catalog import suite_by_name
from optbench.suite.spec import PARAM_FILTERS
from optbench.workloads import build

REPO = Path(__file__).parents[1]
SMALL = ["workload.width=16", "workload.layers=1", "workload.vocab=32"]


def job(suite="adamw", impl="for-loop", steps=4, save_at=2, optimizer=None, **kw) -> ReshardJob:
    s = suite_by_name(suite)
    hset = s.hparam_set(s.roundtrip_hparams)  # param groups with their own lr/betas/eps, amsgrad, maximize
    workload = build(s.workload_of(hset), seed=0, steps=steps, width=16, layers=1, vocab=32,
                     grad_log10_range=(-8.0, 2.0)).restricted(PARAM_FILTERS[s.params])
    implementation = torch_implementations(s.optimizer_class())[impl]
    if optimizer is not None:
        implementation = replace(implementation, optimizer_class=optimizer)
    return ReshardJob(implementation, hset, workload, torch.float32, steps, save_at,
                      update_eps=update_eps(s, "float32"), **kw)


class PerShardMuon(torch.optim.Muon):
    """A wrong sharded Muon: each rank orthogonalizes its own rows instead of the whole matrix."""

    def step(self, closure=None):
        whole = _muon._zeropower_via_newtonschulz

        def per_shard(grad, *args):
            if not isinstance(grad, DTensor):
                return whole(grad, *args)
            local = whole(grad.to_local(), *args)
            return DTensor.from_local(local, grad.device_mesh, grad.placements, shape=grad.shape, stride=grad.stride())

        _muon._zeropower_via_newtonschulz = per_shard
        try:
            return super().step(closure)
        finally:
            _muon._zeropower_via_newtonschulz = whole


def swap_exp_avg(model, optimizer):
    """A wrong load: two same-shaped parameters' exp_avg attached to each other (a positional mix-up)."""
    a, b = model.get_parameter("layers.0.attn.q_proj.weight"), model.get_parameter("layers.0.attn.k_proj.weight")
    state = optimizer.state
    state[a]["exp_avg"], state[b]["exp_avg"] = state[b]["exp_avg"], state[a]["exp_avg"]


def hang_on_rank_1(model, optimizer):
    if torch.distributed.get_rank() == 1:
        time.sleep(600)


@pytest.mark.parametrize("from_ranks, to_ranks", [pytest.param(2, (1, SINGLE), marks=pytest.mark.slow),  # (slow
                                                  (1, (2,))])  # tier; CI keeps 1 -> 2 ranks)
def test_adamw_reshards_by_fqn(from_ranks, to_ranks):
    directions = reshard(job(), from_ranks, to_ranks)
    assert [d.to_ranks for d in directions] == list(to_ranks)
    for d in directions:
        assert d.status == "pass", d
        assert d.max_err_eps == 0.0  # elementwise steps on shards: bit for bit
        assert d.compared > 30  # params and exp_avg/exp_avg_sq/max_exp_avg_sq/step of every FQN


def test_a_wrong_load_fails_on_the_swapped_fqns():
    (d,) = reshard(job(after_load=swap_exp_avg), 2, (1,))
    assert d.status == "fail" and d.max_err_eps > 1e3
    assert d.worst.startswith(("layers.0.attn.q_proj.weight/", "layers.0.attn.k_proj.weight/")), d.worst


@pytest.mark.slow  # (slow tier; CI keeps resharding 1 -> 2 ranks and a wrong load)
def test_muon_sharded_rounds_its_bfloat16_update_differently_and_a_per_shard_one_fails():
    (right,) = reshard(job("muon"), 2, (SINGLE,))
    (wrong,) = reshard(job("muon", optimizer=PerShardMuon), 2, (SINGLE,))
    assert right.status == "pass" and 0 < right.max_err_eps < 10, right  # a few bfloat16 eps of the displacement
    assert wrong.status == "fail" and wrong.max_err_eps > 2 * wrong.tolerance, wrong


def test_a_step_torch_cannot_shard_is_a_skip_with_its_reason():
    (d,) = reshard(job("sgd", "fused"), 2, (SINGLE,))
    assert d.status == "skip"
    assert "rank" in d.error and "_fused_sgd_" in d.error and "\n" not in d.error


@pytest.mark.slow  # (slow tier; CI keeps resharding 1 -> 2 ranks and a wrong load)
def test_a_hanging_rank_times_out_as_one_error():
    started = time.monotonic()
    with pytest.raises(ReshardError, match="timed out after 6 s"):
        reshard(job(after_load=hang_on_rank_1, timeout_s=6), 1, (2,))
    assert time.monotonic() - started < 45


@pytest.mark.skipif(torch.cuda.device_count() < 2 or not torch.distributed.is_nccl_available(),
                    reason="NCCL resharding needs 2 CUDA devices")
def test_nccl_reshards_on_gpus():
    for d in reshard(job(backend="nccl"), 2, (1, SINGLE)):
        assert d.status == "pass", d


def test_nccl_without_gpus_is_a_skip_row(tmp_path):
    if torch.cuda.device_count() >= 2:
        pytest.skip("has 2 CUDA devices: the NCCL test runs instead")
    code = main(["run", "suite=adamw", "checks=[reshard]", "impl=[for-loop]", "reshard.backend=nccl", *SMALL,
                 f"out_dir={tmp_path}"])
    assert code == 3  # every case skipped: nothing verified, not a PASS
    text = (tmp_path / "results.csv").read_text()
    assert "backend nccl needs 2 CUDA devices" in text and ",skip," in text


@pytest.mark.parametrize("value", ["reshard.from_ranks=0", "reshard.to_ranks=-1", "reshard.save_at=9"])
def test_bad_values_are_one_line_exit_2(value, capsys, tmp_path):
    assert main(["run", "suite=adamw", "checks=[reshard]", value, f"out_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("optbench: error: reshard.") and "\n" not in err


@pytest.mark.slow  # (the command's path is every CLI test's; resharding 2 -> 1 rank, 1 -> 2: above, in CI)
def test_cli_as_a_user_runs_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "optbench", "run", "suite=adamw", "checks=[reshard]",
                           "reshard.from_ranks=2", "reshard.to_ranks=3", "impl=[for-loop]", *SMALL,
                           f"out_dir={tmp_path}"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS  reshard adamw for-loop") == 2  # 2 -> 3 ranks, 2 -> a single process
    assert "2 ranks -> 3 ranks" in proc.stdout and "verdict: PASS" in proc.stdout
