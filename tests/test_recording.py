"""An implementation's recorded run (``numerics.recording``) is all the judge (``numerics.trajectory``) needs: data
that survives a trip through pickle, judged to the rows of the run that recorded it without the implementation
being built or stepped again; and the judge still fails a wrong step it is handed."""

import pickle

import torch

from optbench.implementations import Implementation
from optbench.numerics.recording import record_trajectory
from optbench.numerics.trajectory import judge_trajectory, run_trajectory
from optbench.reference import load_reference
from optbench.suite.spec import HparamSet
from optbench.workloads import build

CPU = torch.device("cpu")
DEFAULTS = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "amsgrad": False,
            "maximize": False}


class _NeverBuilt(Implementation):
    def build(self, *args, **kwargs):
        raise AssertionError("the judge built the implementation")


class _ForgetsDecay(torch.optim.AdamW):
    def __init__(self, params, **kwargs):
        super().__init__(params, **{**kwargs, "weight_decay": 0.0})


def test_a_recording_judged_after_a_pickle_trip_gives_the_run_s_rows_and_a_wrong_step_still_fails():
    hset = HparamSet("h", {"weight_decay": 0.1})
    wl = build("zoo", seed=5, steps=4, grad_log10_range=(-8, 2))
    reference = load_reference("adamw")
    for cls, passes in ((torch.optim.AdamW, True), (_ForgetsDecay, False)):
        impl = Implementation("for-loop", cls, {"foreach": False})
        ran = run_trajectory(impl, hset, reference, DEFAULTS, wl, torch.float32, CPU, one_step=True,
                             keep_snapshots=True)
        recording = pickle.loads(pickle.dumps(record_trajectory(impl, hset, wl, torch.float32, CPU, before=True)))
        judged = judge_trajectory(recording, _NeverBuilt("for-loop", cls, {"foreach": False}), hset, reference,
                                  DEFAULTS, wl, torch.float32, one_step=True, keep_snapshots=True)
        assert judged.errors.equals(ran.errors) and set(judged.errors["kind"]) == {"trajectory", "one-step"}
        assert judged.dtypes == ran.dtypes and len(judged.snapshots) == 4
        assert bool((judged.errors["err_eps"] <= judged.errors["tol"]).all()) == passes, cls
