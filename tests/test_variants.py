"""Capturable and CUDA-graphed steps (skips off CUDA, never passes), float32 master copies of a
lower-precision model, and the precision each tensor is kept in."""

import contextlib
import copy
import json
from dataclasses import replace

import pytest
import torch
from omegaconf import OmegaConf

from optbench.engine.selection import resolve_implementations
from optbench.implementations import Implementation, Stepper, torch_implementations
from optbench.implementations.graphed import GraphedStep
from optbench.implementations.master_weights import MasterStep, MasterWeights, master_copy, with_master_weights
from optbench.numerics.precision import precision_rows
from optbench.numerics.trajectory import run_trajectory
from optbench.reference import load_reference
from optbench.suite.catalog import resolve, suite_files
from optbench.suite.spec import HparamSet
from optbench.usage import UsageError
from optbench.workloads import build
from tests.conftest import QUICK_TIMING, run_inline

CPU = torch.device("cpu")
ADAMW = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "amsgrad": False, "maximize": False}


def suite(name: str):
    return resolve(OmegaConf.create(suite_files()[name].read_text()))[0]


def run(tmp_path, *args):
    return run_inline([*args, *QUICK_TIMING, f"out_dir={tmp_path}"])


def rows(tmp_path):
    return json.loads((tmp_path / "results.json").read_text())["rows"]


def verdicts(out, impl):
    return {(r["dtype"], r["hparams"]): r for r in out
            if r["impl"] == impl and r["metric"] == "parity.max_err_eps" and r["fqn"] == ""}


# --- capturable and graphed ---------------------------------------------------------------------

def test_capturable_and_graphed_are_offered_where_torch_can_capture():
    adam, sgd, adagrad = (torch_implementations(c) for c in (torch.optim.Adam, torch.optim.SGD, torch.optim.Adagrad))
    assert adam["capturable"].flags == {"foreach": False, "capturable": True} and not adam["capturable"].graphed
    assert adam["graphed"].flags == adam["capturable"].flags and adam["graphed"].graphed
    assert "capturable" not in sgd and sgd["graphed"].flags == {"foreach": False}  # SGD's step keeps no host state
    assert not {"capturable", "graphed"} & set(adagrad)  # its step counter lives on the host


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.RAdam,
                                 torch.optim.Rprop])
def test_off_cuda_they_say_needs_cuda_without_raising(cls):
    for name, impl in torch_implementations(cls).items():
        if name in ("capturable", "graphed"):
            for dtype in (torch.float32, torch.bfloat16):
                assert impl.available(CPU, dtype).startswith("needs CUDA: ")


def test_selection():
    cfg = OmegaConf.create({"impl": ["for-loop", "capturable", "graphed"]})
    assert [i.name for i in resolve_implementations(cfg, suite("adamw"), None)] == ["for-loop", "capturable", "graphed"]
    everything = [i.name for i in resolve_implementations(OmegaConf.create({"impl": "all"}), suite("adam"), None)]
    assert {"capturable", "graphed"} <= set(everything) and not any("+master32" in n for n in everything)
    with pytest.raises(UsageError, match="SGD has no implementation 'capturable'"):
        resolve_implementations(cfg, suite("sgd"), None)
    lenient = resolve_implementations(cfg, suite("adagrad"), None, lenient=True)  # a meta-suite member without them
    assert [i.name for i in lenient] == ["for-loop"]
    master = resolve_implementations(OmegaConf.create({"impl": ["for-loop+master32", "fused+master32"]}),
                                     suite("adamw"), None)
    assert ([i.name for i in master] == ["for-loop+master32", "fused+master32"]
            and all(isinstance(i, MasterWeights) for i in master))
    assert master[1].flags == {"fused": True} and master[0].checks == ("parity", "cross", "forms", "deviations")
    with pytest.raises(UsageError, match="has no implementation 'for-loop\\+master16'"):
        resolve_implementations(OmegaConf.create({"impl": ["for-loop+master16"]}), suite("adamw"), None)


def test_on_cpu_every_row_of_them_is_a_skip_saying_needs_cuda(tmp_path):
    assert run(tmp_path, "suite=sgd", "impl=[for-loop,graphed]", "dtype=[float32,bfloat16]", "steps=2",
               "speed.min_run_time=0.01", "options={momentum: 0.9}",
               "checks=[parity,cross,roundtrip,speed,memory,forms]") == 0
    theirs = [r for r in rows(tmp_path) if r["impl"] == "graphed" and r["metric"] != "run.case_s"]
    assert {(r["check"], r["dtype"]) for r in theirs} == {("parity", "float32"), ("parity", "bfloat16")}
    assert all(r["status"] == "skip" and "needs CUDA: " in r["detail"] for r in theirs)
    assert any(r["status"] == "pass" for r in rows(tmp_path) if r["impl"] == "for-loop")
    report = (tmp_path / "report.md").read_text()
    assert "needs CUDA" in report and "graphed float32" not in report  # not a column of the parity matrix


# --- float32 master copies ----------------------------------------------------------------------

def test_master32_passes_far_tighter_than_plain_bfloat16_and_reports_its_precision(tmp_path):
    assert run(tmp_path, "suite=adamw", "dtype=[bfloat16,float32]", "impl=[for-loop,for-loop+master32]", "steps=6",
               "options={weight_decay: 0.1}", "checks=[parity,cross,roundtrip,memory]") == 0
    out = rows(tmp_path)
    key = ("bfloat16", "options")
    plain, master = verdicts(out, "for-loop")[key], verdicts(out, "for-loop+master32")[key]
    assert plain["status"] == master["status"] == "pass" and master["value"] < plain["value"] / 1000
    tol = {r["impl"]: r["value"] for r in out if r["metric"] == "parity.tol_eps" and r["dtype"] == "bfloat16"}
    assert tol["for-loop+master32"] == pytest.approx(tol["for-loop"] * 2.0**-16)  # float32's tolerance, in bfloat16 eps
    mine = [r for r in out if r["impl"] == "for-loop+master32"]
    # no round-trip or memory rows (implementations.master_weights)
    assert {r["check"] for r in mine} == {"parity", "cross"}
    assert any(r["tensor"] == "model" and r["fqn"] for r in mine if r["metric"] == "parity.max_err_eps")
    skip = [r for r in mine if r["status"] == "skip"]
    assert len(skip) == 1 and skip[0]["dtype"] == "float32" and "bfloat16 or float16 model" in skip[0]["detail"]
    kept = {(r["impl"], r["tensor"]): r["detail"] for r in out
            if r["metric"] == "state.dtype" and r["dtype"] == "bfloat16"}
    assert kept[("for-loop", "exp_avg")] == "bfloat16" and kept[("for-loop", "step")] == "float32"
    assert kept[("for-loop+master32", "param")] == "float32" and kept[("for-loop+master32", "model")] == "bfloat16"
    assert kept[("for-loop+master32", "exp_avg_sq")] == "float32"
    report = (tmp_path / "report.md").read_text()
    assert "param bf16, step f32, exp_avg bf16, exp_avg_sq bf16" in report
    assert "param f32, model bf16, step f32, exp_avg f32, exp_avg_sq f32" in report


class ForgetsCopyBack(MasterWeights):
    """Bug: steps the masters but never copies them back into the model."""

    def build(self, groups, options=None):
        stepper = super().build(groups, options)
        inner = stepper.step

        def step(closure=None):
            for name, p in inner.model.items():
                inner.masters[name].grad = None if p.grad is None else p.grad.float()
            return inner.step()

        return replace(stepper, step=step)


class StepsTheModel(MasterWeights):
    """Bug: the optimizer steps the bfloat16 parameters themselves and calls them its masters."""

    def build(self, groups, options=None):
        model = {n: p for g in groups for n, p in g["params"]}
        stepper = Implementation.build(self, groups, options)
        return Stepper(stepper.optimizer, stepper.step, params=model, precision=torch.float32)


class UpcastsTooLate(MasterWeights):
    """Bug: rounds each master to the model's dtype before stepping it (bfloat16 state of mind)."""

    def build(self, groups, options=None):
        stepper = super().build(groups, options)
        inner = stepper.step

        def step(closure=None):
            with torch.no_grad():
                for name, p in inner.model.items():
                    inner.masters[name].copy_(inner.masters[name].to(p.dtype))
            return inner(closure)

        return replace(stepper, step=step)


def master_trajectory(cls, dtype=torch.bfloat16):
    base = Implementation("for-loop", torch.optim.AdamW, {"foreach": False})
    impl = cls(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "name": "for-loop+master32"})
    wl = build("zoo", seed=3, steps=8, grad_log10_range=(-8, 2))
    return run_trajectory(impl, HparamSet("h", {"weight_decay": 0.1}), load_reference("adamw"), ADAMW, wl, dtype, CPU,
                          one_step=True).errors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_correct_master_copies_pass(dtype):
    errors = master_trajectory(MasterWeights, dtype)
    assert not (errors.err_eps > errors.tol).any() and {"param", "model", "exp_avg"} <= set(errors.tensor)


@pytest.mark.parametrize("wrong", [ForgetsCopyBack, StepsTheModel, UpcastsTooLate])
def test_wrong_master_copies_fail(wrong):
    errors = master_trajectory(wrong)
    assert (errors.err_eps > errors.tol).any(), errors.groupby("tensor").err_eps.max()


def test_master_copy_keeps_values_names_and_layout():
    p = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.bfloat16).t())
    m = master_copy(p)
    assert m.dtype == torch.float32 and m.stride() == p.stride() and torch.equal(m.to(torch.bfloat16), p.detach())
    stepper = with_master_weights(Implementation("for-loop", torch.optim.SGD, {"foreach": False})).build(
        [{"params": [("w", p)]}], {"lr": 0.5})
    assert stepper.optimizer.param_groups[0]["param_names"] == ["w"] and stepper.params["w"] is not p
    p.grad = torch.ones_like(p)
    stepper.step()
    assert (torch.equal(p.detach(), stepper.params["w"].detach().to(torch.bfloat16))
            and isinstance(stepper.step, MasterStep))


# --- the precision each tensor is kept in -------------------------------------------------------

def test_precision_rows_one_per_key_or_per_fqn_where_they_differ():
    kept = {("a", "param"): "bfloat16", ("a", "exp_avg"): "float32", ("b", "param"): "bfloat16",
            ("b", "exp_avg"): "bfloat16", ("a", "step"): "python int"}
    out = precision_rows({"suite": "s"}, kept)
    by = {(r["fqn"], r["tensor"]): (r["detail"], r["value"]) for r in out}
    assert by == {("", "param"): ("bfloat16", 16), ("a", "exp_avg"): ("float32", 32),
                  ("b", "exp_avg"): ("bfloat16", 16), ("", "step"): ("python int", 64)}
    assert all(r["metric"] == "state.dtype" and r["status"] == "info" and r["unit"] == "bits" for r in out)


def test_a_candidate_keeping_float32_state_for_bfloat16_params(tmp_path):
    assert run(tmp_path, "suite=adamw", "candidate=tests.candidates.Float32StateAdamW", "impl=[candidate]",
               "dtype=bfloat16", "steps=5", "options={weight_decay: 0.1, amsgrad: true}", "checks=[parity]") == 0
    kept = {r["tensor"]: r["detail"] for r in rows(tmp_path) if r["metric"] == "state.dtype"}
    assert kept == {"param": "bfloat16", "step": "float32", "exp_avg": "float32", "exp_avg_sq": "float32",
                    "max_exp_avg_sq": "float32"}


# --- on a GPU ---------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("name, impls", [("adam", "[for-loop,capturable,graphed]"),
                                         ("adamw", "[for-loop,capturable,graphed]"), ("sgd", "[for-loop,graphed]")])
def test_capturable_and_graphed_parity_on_cuda(name, impls, tmp_path):
    run(tmp_path, f"suite={name}", "device=cuda", f"impl={impls}", "dtype=[float32,bfloat16]", "steps=12",
        "checks=[parity,cross]")
    out = rows(tmp_path)
    for impl in impls.strip("[]").split(",")[1:]:
        mine = [r for r in out if r["impl"] == impl]
        # a cross row is a skip where every tensor is under a declared deviation (F45: the parity row is an xfail)
        declared = {key for key, r in verdicts(mine, impl).items() if r["status"] == "xfail"}
        assert mine and not [r for r in mine if r["status"] in ("fail", "error", "xpass") or r["status"] == "skip"
                             and not (r["check"] == "cross" and (r["dtype"], r["hparams"]) in declared)]
        for dtype in ("float32", "bfloat16"):
            assert any(r["status"] in ("pass", "xfail") for (d, _), r in verdicts(mine, impl).items() if d == dtype)


class FakeGraphs:
    """torch.cuda's stream and graph API on CPU, for ``GraphedStep``'s bookkeeping: a capture runs nothing (what the
    step did inside it is undone), a replay runs the step again with the .grad tensors of capture time (the static
    ones a real graph's kernels read), whatever the parameters' .grad hold then."""

    def __init__(self, optimizer):
        self.optimizer, self.captures, self.replays = optimizer, 0, 0
        fakes = self

        class Graph:
            def replay(self):
                fakes.replays += 1
                params = [p for g in fakes.optimizer.param_groups for p in g["params"]]
                now = [p.grad for p in params]
                for p, grad in zip(params, self.grads):
                    p.grad = grad
                fakes.optimizer.step()
                for p, grad in zip(params, now):
                    p.grad = grad

        self.Graph = Graph

    @contextlib.contextmanager
    def graph(self, graph):
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        before = [p.detach().clone() for p in params], copy.deepcopy(self.optimizer.state_dict())
        yield
        self.captures += 1
        graph.grads = [p.grad for p in params]
        with torch.no_grad():
            for p, value in zip(params, before[0]):
                p.copy_(value)
        self.optimizer.load_state_dict(before[1])

    def install(self, monkeypatch):
        stream = type("Stream", (), {"wait_stream": lambda self, other: None})
        for name, fake in (("Stream", stream), ("current_stream", stream), ("CUDAGraph", self.Graph),
                           ("stream", lambda s: contextlib.nullcontext()), ("graph", self.graph)):
            monkeypatch.setattr(torch.cuda, name, fake)


def test_graphed_step_keeps_the_callers_gradients_and_steps_as_the_eager_step_on_fake_graphs(monkeypatch):
    """On CPU, with torch.cuda's graph API faked: each step leaves every .grad the caller's own tensor, unchanged;
    three eager steps, then one capture replayed, captured again when a float lr moves; the parameters and state
    end bit for bit where the plain step puts them. (On CUDA: the test below and the cuda suites.)"""
    torch.manual_seed(0)
    start = [torch.randn(5, 5), torch.randn(3), torch.randn(())]
    grads = [[torch.randn_like(p) for p in start] for _ in range(8)]
    finals = []
    for graphed in (False, True):
        params = [torch.nn.Parameter(p.clone()) for p in start]
        opt = torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, foreach=False)
        fakes = FakeGraphs(opt)
        if graphed:
            fakes.install(monkeypatch)
        step = GraphedStep(opt) if graphed else opt.step
        for i, step_grads in enumerate(grads):
            if i == 6:
                opt.param_groups[0]["lr"] = 0.005  # a scheduler moved it: captured again, never replayed stale
            for p, g in zip(params, step_grads):
                p.grad = g.clone()
            given = [(p.grad, p.grad.clone()) for p in params]
            step()
            assert all(p.grad is g and torch.equal(g, value) for p, (g, value) in zip(params, given))
        finals.append([p.detach().clone() for p in params] + [opt.state[p]["exp_avg_sq"] for p in params])
        if graphed:
            assert (step.eager_steps, fakes.captures, fakes.replays, len(step.graphs)) == (3, 2, 5, 2)
        monkeypatch.undo()
    assert all(torch.equal(a, b) for a, b in zip(*finals))


@pytest.mark.cuda
def test_graphed_step_replays_the_capturable_step_bit_for_bit():
    torch.manual_seed(0)
    start = [torch.randn(5, 5, device="cuda"), torch.randn(3, device="cuda"), torch.randn((), device="cuda")]
    grads = [[torch.randn_like(p) for p in start] for _ in range(8)]
    finals = []
    for graphed in (False, True):
        params = [torch.nn.Parameter(p.clone()) for p in start]
        opt = torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, foreach=False, capturable=True)
        step = GraphedStep(opt) if graphed else opt.step
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = g.clone()
            step()
        finals.append([p.detach().clone() for p in params] + [opt.state[p]["exp_avg_sq"] for p in params])
        if graphed:
            assert len(step.graphs) == 1 and step.eager_steps == 3
    assert all(torch.equal(a, b) for a, b in zip(*finals))


@pytest.mark.cuda
def test_master32_on_cuda(tmp_path):
    assert run(tmp_path, "suite=adamw", "device=cuda", "dtype=bfloat16", "impl=[foreach,foreach+master32]", "steps=8",
               "checks=[parity]") == 0
