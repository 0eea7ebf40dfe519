"""Complex parameters: torch's documented view_as_real rule as the reference, complex workloads, torch's
variants passing at complex64/complex128, rejections as unsupported rows, and wrong complex optimizers failing."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from optbench.hyperparameters import constructor_defaults
from optbench.implementations import Implementation
from optbench.numerics.trajectory import run_trajectory
from optbench.reference import load_reference
from optbench.reference.complex import as_complex, joined, pairs
from optbench.suite.spec import HparamSet
from optbench.workloads import build
from optbench.workloads.complex import complexify
from optbench.workloads.model import SparseGrad
from tests.conftest import QUICK_TIMING, run_inline

CPU = torch.device("cpu")
SMALL = {"width": 8, "layers": 1, "vocab": 16, "grad_log10_range": (-8.0, 2.0)}


def run(tmp_path, *args):
    return run_inline([*args, "workload.width=8", "workload.layers=1", "workload.vocab=16", *QUICK_TIMING,
                       f"out_dir={tmp_path}"])


def rows(tmp_path):
    return json.loads((tmp_path / "results.json").read_text())["rows"]


def errors(optimizer: str, flags: dict, dtype, options=None, workload="transformer", steps=6, reference=None):
    cls = getattr(torch.optim, optimizer)
    wl = complexify(build(workload, seed=0, steps=steps, **SMALL), seed=0)
    if optimizer == "LBFGS":  # F17: torch's LBFGS cannot train a non-contiguous parameter (complex or not)
        wl = wl.restricted(lambda spec: spec.kind != "noncontiguous")
    traj = run_trajectory(Implementation("impl", cls, flags), HparamSet("h", options or {}),
                          load_reference(reference or optimizer.lower()), constructor_defaults(cls), wl, dtype, CPU,
                          one_step=True)
    return traj.errors


def test_adapter_is_the_view_as_real_rule():
    """Complex in, complex out; the real reference sees (re, im) pairs; state shaped like them goes back."""
    rng = np.random.default_rng(0)
    z, g = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2)), rng.standard_normal((3, 2)) * (1 - 2j)
    adam, hp = load_reference("adam"), {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0}
    cx = as_complex(adam)
    new, state = cx.update(z, g, cx.init(z, hp), hp)
    real_new, real_state = adam.update(pairs(z), pairs(g), adam.init(pairs(z), hp), hp)
    assert np.array_equal(pairs(new), real_new) and np.iscomplexobj(state["exp_avg_sq"])
    per_part = (1 - 0.999) * (g.real**2 + 1j * g.imag**2)  # not g * g, not |g|**2
    assert np.allclose(state["exp_avg_sq"], per_part, rtol=1e-12, atol=0)
    assert (not np.allclose(state["exp_avg_sq"], (1 - 0.999) * g * g)
            and not np.allclose(per_part, (1 - 0.999) * abs(g)**2))
    assert state["step"] == 1.0  # scalars stay real
    assert np.all(as_complex(load_reference("rprop")).init(z, {"lr": 0.01})["step_size"] == 0.01 + 0.01j)  # as torch
    assert np.all(as_complex(load_reference("adagrad")).init(z, {"initial_accumulator_value": 0.5})["sum"]
                  == 0.5 + 0.5j)
    zero_dim = np.asarray(1.0 - 2.0j)
    assert pairs(zero_dim).shape == (2,) and joined(pairs(zero_dim)).shape == () and joined(pairs(zero_dim)) == zero_dim
    with pytest.raises(ValueError, match="no complex form"):
        as_complex(load_reference("adafactor"))


def test_complex_workload_is_seeded_and_keeps_magnitudes_and_structure():
    base = build("zoo_sparse", seed=3, steps=4, grad_log10_range=(-8.0, 2.0))
    a, b = complexify(base, seed=3), complexify(base, seed=3)
    for name in base.names:
        assert np.array_equal(a.init[name], b.init[name]) and np.allclose(np.abs(a.init[name]), np.abs(base.init[name]))
    g, g0 = a.grads[0]["emb.dup.weight"], base.grads[0]["emb.dup.weight"]
    assert isinstance(g, SparseGrad) and np.array_equal(g.indices, g0.indices) and not g.coalesced
    assert np.allclose(np.abs(g.values), np.abs(g0.values)) and np.abs(g.values.imag).max() > 0
    assert all((x is None) == (y is None) for x, y in zip(a.grads[2].values(), base.grads[2].values()))
    assert not np.array_equal(complexify(base, seed=4).init["emb.dup.weight"], a.init["emb.dup.weight"])
    params = a.materialize(torch.complex64, CPU)
    assert all(p.dtype == torch.complex64 for p in params.values())


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("optimizer, options", [
    ("SGD", {"momentum": 0.9, "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"weight_decay": 0.1, "amsgrad": True}),
    ("RMSprop", {"centered": True, "momentum": 0.5}),
    ("Rprop", {}),
])
def test_torch_for_loop_and_foreach_pass_at_complex(optimizer, options, dtype):
    for flags in ({"foreach": False}, {"foreach": True}):
        errs = errors(optimizer, flags, dtype, options)
        assert set(errs.kind) == {"trajectory", "one-step"} and "param" in set(errs.tensor)
        over = errs[errs.err_eps > errs.tol]
        assert over.empty, over.head()


def test_lbfgs_complex_matches_the_real_pair_reference():
    errs = errors("LBFGS", {}, torch.complex64, {"history_size": 5, "max_iter": 5}, workload="objective", steps=3)
    assert {"d", "prev_flat_grad"} <= set(errs.tensor)  # torch's flat real state, compared as is
    assert (errs.err_eps <= errs.tol).all(), errs[errs.err_eps > errs.tol].head()


def test_sparse_adagrad_complex_departs_from_the_rule_f26():
    """F26: Adagrad's sparse path squares complex gradients (dense passes); the suite declares it."""
    dense = errors("Adagrad", {"foreach": False}, torch.complex64, {"lr": 0.1}, workload="zoo", steps=3)
    assert (dense.err_eps <= dense.tol).all()
    with np.errstate(invalid="ignore"):  # the one-step restart from torch's complex accumulator takes sqrt(<0)
        sparse = errors("Adagrad", {"foreach": False}, torch.complex64, {"lr": 0.1}, workload="zoo_sparse", steps=3)
    assert (sparse[sparse.kind == "trajectory"].err_eps > 1e3).any()
    text = (Path(__file__).parents[1] / "suites" / "suite" / "adagrad.yaml").read_text()
    assert "finding: F26" in text and 'dtype: "complex*"' in text


def test_rejected_optimizers_and_variants_are_unsupported_rows_with_torchs_message(tmp_path):
    # every case unsupported: nothing verified (exit 3), never a PASS
    assert run(tmp_path / "a", "suite=adafactor", "dtype=complex64", "checks=[parity]", "steps=2") == 3
    got = {(r["impl"], r["status"]) for r in rows(tmp_path / "a")
           if r["check"] == "parity" and r["metric"].startswith("case.")}
    assert {("for-loop", "unsupported"), ("foreach", "unsupported")} <= got
    detail = {r["detail"] for r in rows(tmp_path / "a") if r["status"] == "unsupported"}
    assert any("Adafactor does not support complex parameters" in d for d in detail)
    assert run(tmp_path / "b", "suite=sparseadam", "dtype=complex128", "impl=[for-loop]", "checks=[parity]",
               "steps=2") == 3
    assert any("SparseAdam does not support complex parameters" in r["detail"]
               for r in rows(tmp_path / "b") if r["status"] == "unsupported")
    assert run(tmp_path / "c", "suite=sgd", "dtype=complex64", "impl=[for-loop,fused]", "options={momentum: 0.9}",
               "checks=[parity,cross]", "steps=3") == 0
    by_impl = {r["impl"]: r for r in rows(tmp_path / "c") if r["check"] == "parity" and not r["fqn"]
               and r["metric"] in ("parity.max_err_eps", "case.unsupported")}
    assert by_impl["for-loop"]["status"] == "pass"
    assert by_impl["fused"]["status"] == "unsupported" and "floating point Tensors" in by_impl["fused"]["detail"]


@pytest.mark.parametrize("candidate, suite, options", [
    ("tests.candidates.ConjugateGradSGD", "sgd", "{momentum: 0.9}"),
    ("tests.candidates.ComplexSquareAdam", "adam", "{}"),
    ("tests.candidates.ModulusSquareAdam", "adam", "{}"),
])
def test_wrong_complex_arithmetic_fails_parity(candidate, suite, options, tmp_path):
    code = run(tmp_path, f"suite={suite}", f"candidate={candidate}", "impl=[candidate]", f"options={options}",
               "dtype=complex64", "checks=[parity]", "steps=3")
    assert code == 1
    assert any(r["status"] == "fail" and r["impl"].startswith("candidate") for r in rows(tmp_path))


def test_a_correct_candidate_passes_at_complex(tmp_path):
    assert run(tmp_path, "suite=adam", "candidate=torch.optim.Adam", "impl=[candidate]", "options={}",
               "dtype=complex64", "checks=[parity]", "steps=3") == 0


def test_a_complex_dtype_typo_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_inline(["suite=sgd", "dtype=complex"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown dtype 'complex'" in err and "complex64" in err and len(err.splitlines()) == 1


def test_complex_dtypes_inherit_the_deviations_of_their_parts_dtype():
    """complex128 is stepped as float64 parts: a float64 declaration holds for it, without ever claiming an xpass."""
    from optbench.suite.spec import Deviation, Suite

    f06 = Deviation(finding="F06", reason="float32 eta", dtype="float64")
    f26 = Deviation(finding="F26", reason="sparse", dtype="complex*", hparams="sparse")
    assert f06.matches_dtype("complex128") and not f06.matches_dtype("complex64") and not f06.matches_dtype("float32")
    assert f26.matches_dtype("complex64") and not f26.matches_dtype("float64")
    suite = Suite(name="s", optimizer=None, reference_name="sgd", dtypes=("float64",),
                  hparams=(HparamSet("sparse", {}),), roundtrip_hparams="sparse", deviations=(f06, f26))
    assert [d.intermittent for d in suite.deviations_for("for-loop", "float64", "sparse")] == [False]
    assert [(d.finding, d.intermittent) for d in suite.deviations_for("for-loop", "complex128", "sparse")] == [
        ("F06", True), ("F26", False)]
