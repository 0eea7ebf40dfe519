"""graphcore's u-muP Adam (unit_scaling.optim.Adam) through the umup suite: the reference, the workload's metadata,
parity of the real optimizer and of mutants, the allow_non_unit_scaling_params rows, and the findings F32-F36."""

import json
import types

import numpy as np
import pytest
import torch

from optbench.cases import Case
from optbench.checks.error_inputs import ErrorsCheck, error_inputs
from optbench.implementations import Implementation
from optbench.reference import umup_adam
from optbench.suite.catalog import candidate_suite_names, optimizer_suite_names, suite_by_name
from optbench.workloads import build
from tests.conftest import QUICK_TIMING, run_inline

CANDIDATE = "candidate=unit_scaling.optim.Adam"
SMALL = ["workload.width=16", "workload.vocab=32", "history_dir=null"]  # 16: fan-ins of 16 and 64, a vocab of 32


@pytest.fixture
def uo():
    return pytest.importorskip("unit_scaling.optim")


def run(tmp_path, *args):
    return run_inline(["suite=umup", *args, *SMALL, *QUICK_TIMING, f"out_dir={tmp_path}"])


def rows(tmp_path):
    return json.loads((tmp_path / "results.json").read_text())["rows"]


def verdicts(tmp_path):
    return {(r["dtype"], r["hparams"]): (r["status"], r["value"]) for r in rows(tmp_path)
            if r["check"] == "parity" and r["metric"] in ("parity.max_err_eps", "case.error") and r["fqn"] == ""}


def over_tolerance(tmp_path) -> set[str]:
    """FQNs whose one-step error (each step from the candidate's own state) is past the 16-eps tolerance."""
    return {r["fqn"] for r in rows(tmp_path)
            if r["metric"] == "parity.one_step_max_err_eps" and r["fqn"] and r["value"] > 16}


# --- the suite, the workload and the reference (no unit-scaling needed) ---

def test_umup_is_a_candidate_only_suite_left_out_of_all():
    assert "umup" in candidate_suite_names() and "umup" not in optimizer_suite_names()
    suite = suite_by_name("umup")
    assert suite.optimizer is None and not suite.candidate_named and suite.workload == "umup"


def test_workload_tags_parameters_as_unit_scaling_modules_do():
    wl = build("umup_plain", seed=0, steps=2, width=16, layers=3, vocab=32, grad_log10_range=(-8.0, 2.0))
    meta = wl.meta
    assert meta["embed.weight"] == {"mup_type": "weight", "mup_scaling_depth": None}  # uu.Embedding
    assert meta["layers.2.mlp.up_proj.weight"] == {"mup_type": "weight", "mup_scaling_depth": 3}  # uu.DepthSequential
    assert (meta["layers.0.attn.q_proj.bias"]["mup_type"] == "bias"
            and meta["layers.1.norm2.weight"]["mup_type"] == "norm")
    assert meta["head.weight"] == {"mup_type": "output", "mup_scaling_depth": None}  # uu.LinearReadout
    assert "extra.pos_embed.weight" not in meta  # the one plain parameter
    assert wl.specs[-1].name == "head.pad.weight" and wl.specs[-1].numel == 0  # zero-size, last
    params = wl.materialize(torch.float32, torch.device("cpu"))
    assert (params["layers.0.attn.k_proj.weight"].mup_scaling_depth == 3
            and not hasattr(params["extra.pos_embed.weight"], "mup_type"))
    plain = build("transformer", seed=0, steps=2, width=16, layers=3, vocab=32, grad_log10_range=(-8.0, 2.0))
    assert np.array_equal(plain.init["embed.weight"], wl.init["embed.weight"])  # the transformer's values, bit for bit
    assert np.array_equal(plain.grads[1]["layers.2.mlp.down_proj.weight"], wl.grads[1]["layers.2.mlp.down_proj.weight"])


def test_reference_scales_lr_by_the_documented_rule():
    scale = umup_adam.lr_scale
    assert scale({"mup_type": "weight", "mup_scaling_depth": None}, (64, 16), False) == 16**-0.5  # hidden: fan_in
    assert scale({"mup_type": "weight", "mup_scaling_depth": None}, (32000, 16), False) == 16**-0.5  # embedding: width
    assert scale({"mup_type": "weight", "mup_scaling_depth": 4}, (8, 3, 5), False) == pytest.approx(0.5 * 15**-0.5)
    for kind in ("bias", "norm", "output"):
        assert scale({"mup_type": kind, "mup_scaling_depth": 9}, (7,), False) == pytest.approx(1 / 3)
    assert scale(None, (3, 4), True) == 1.0
    with pytest.raises(ValueError, match="must reject"):
        scale(None, (3, 4), False)
    with pytest.raises(ValueError, match="at least 2 dims"):
        scale({"mup_type": "weight", "mup_scaling_depth": None}, (), False)


def test_reference_decay_is_weight_decay_over_the_scaled_lr_and_never_mutates_inputs():
    rng = np.random.default_rng(0)
    p, g = rng.standard_normal((4, 16)), rng.standard_normal((4, 16))
    hp = {"lr": 0.01, "weight_decay": 0.1, "independent_weight_decay": True,
          "param_meta": {"mup_type": "weight", "mup_scaling_depth": None}}
    before = p.copy(), g.copy()
    new, state = umup_adam.update(p, g, umup_adam.init(p, hp), hp)
    assert np.array_equal(p, before[0]) and np.array_equal(g, before[1])
    lr = 0.01 * 16**-0.5
    expected = (1 - 0.9) * (g + 0.1 / lr * p)  # L2 inside Adam's first moment, coefficient weight_decay / lr
    np.testing.assert_allclose(state["exp_avg"], expected, rtol=1e-14)
    documented, _ = umup_adam.update(p, g, umup_adam.init(p, hp), {**hp, "independent_weight_decay_as": "decoupled"})
    plain, _ = umup_adam.update(p * (1 - 0.1), g, umup_adam.init(p, hp), {**hp, "weight_decay": 0.0})
    np.testing.assert_allclose(documented, plain, rtol=1e-14)  # the documented form: p *= 1 - weight_decay


# --- unit_scaling.optim.Adam itself ---

@pytest.mark.slow  # (slow tier; CI keeps u-muP's mutants and findings)
def test_real_optimizer_passes_parity_at_every_dtype_and_the_error_inputs(uo, tmp_path):
    code = run(tmp_path, CANDIDATE, "checks=[parity,errors]", "steps=5")
    assert code == 0, [(r["hparams"], r["dtype"], r["detail"]) for r in rows(tmp_path)
                       if r["status"] in ("fail", "error")]
    found = verdicts(tmp_path)
    suite = suite_by_name("umup")
    expected = {(d, h.name) for h in suite.hparams for d in suite.dtypes if h.dtypes is None or d in h.dtypes}
    assert set(found) == expected and all(status == "pass" for status, _ in found.values()), found
    errors = {r["hparams"]: r["status"] for r in rows(tmp_path) if r["metric"] == "errors.rejected"}
    assert errors["a parameter without u-muP metadata"] == "pass"  # allow_non_unit_scaling_params=False
    assert errors["sparse gradients"] == errors["a parameter in two param groups"] == "pass"
    assert {h for h, s in errors.items() if s == "xfail"} == {
        "named and unnamed params in one group", "named and unnamed param groups",  # F32
        "params given as a single Tensor", "a parameter twice in one param group", "a 0-dim weight",
        "a weight with fan-in 0",  # F33
        "a negative learning rate", "a negative weight_decay"}  # F35


def test_allow_non_unit_scaling_params_steps_the_plain_parameter_at_the_unscaled_lr(uo, tmp_path):
    code = run(tmp_path, CANDIDATE, "checks=[parity]", "dtype=float64", "steps=4",
               "options={lr: 0.01, weight_decay: 0.1, allow_non_unit_scaling_params: true}",
               "suite.workload=umup_plain")
    assert code == 0
    plain = [r for r in rows(tmp_path) if r["metric"] == "parity.max_err_eps" and r["fqn"] == "extra.pos_embed.weight"]
    assert plain and max(r["value"] for r in plain) < 4  # against the reference's unscaled lr (and 0.1 / lr decay)
    group = uo.Adam([torch.nn.Parameter(torch.ones(3, 5))], lr=0.01, allow_non_unit_scaling_params=True).param_groups[0]
    assert group["lr"] == 0.01


def test_mutant_readout_scaled_as_a_hidden_weight_fails_on_the_readout_only(uo, tmp_path):
    code = run(tmp_path, "candidate=optbench.mutants.umup.ReadoutAsHiddenUmupAdam", "checks=[parity]", "dtype=float32",
               "steps=3", "options={lr: 0.01}")
    assert code == 1
    assert over_tolerance(tmp_path) == {"head.weight"}
    (status, _), = verdicts(tmp_path).values()
    detail = next(r["detail"] for r in rows(tmp_path) if r["metric"] == "parity.max_err_eps" and r["fqn"] == "")
    assert status == "fail" and "step 1 head.weight/param" in detail


def test_mutant_with_a_linear_depth_rule_fails_on_every_layer_parameter(uo, tmp_path):
    code = run(tmp_path, "candidate=optbench.mutants.umup.LinearDepthUmupAdam", "checks=[parity]", "dtype=float32",
               "steps=3", "options={lr: 0.01}")
    assert code == 1
    wl = build("umup", seed=0, steps=1, width=16, layers=2, vocab=32, grad_log10_range=(-8.0, 2.0))
    assert over_tolerance(tmp_path) == {s.name for s in wl.specs if s.name.startswith("layers.")}


def test_named_parameters_raise_and_round_trip_by_name_is_a_declared_xfail_F32(uo, tmp_path):
    model = torch.nn.Linear(4, 3)
    for p in model.parameters():
        p.mup_type, p.mup_scaling_depth = "weight", None
    with pytest.raises(AttributeError, match="'tuple' object has no attribute 'copy'"):
        uo.Adam(model.named_parameters(), lr=1e-3)
    # Built named (as candidate_named: true would build it), every case is an error naming the AttributeError ...
    code = run(tmp_path / "named", CANDIDATE, "checks=[parity]", "dtype=float32", "steps=2", "options={}",
               "suite.candidate_named=true")
    assert code == 1
    assert any("AttributeError: 'tuple' object has no attribute" in r["detail"] for r in rows(tmp_path / "named")
               if r["status"] == "error")
    # ... and as the suite builds it (plain tensors), the round trip by name is one xfail row per scenario, F32.
    code = run(tmp_path / "plain", CANDIDATE, "checks=[roundtrip]", "roundtrip.steps=3", "roundtrip.save_at=1")
    assert code == 0
    trips = [r for r in rows(tmp_path / "plain") if r["metric"].startswith("roundtrip.")
             and not r["metric"].startswith("roundtrip.positional")]
    assert trips and {r["status"] for r in trips} == {"xfail"} and all("F32" in r["detail"] for r in trips)
    assert all("records no param_names" in r["detail"] for r in trips)


def test_documented_lr_independent_decay_is_not_what_it_does_F34(uo, tmp_path):
    code = run(tmp_path, CANDIDATE, "checks=[parity]", "dtype=float64", "steps=2",
               "options={lr: 0.01, weight_decay: 0.1}", "suite.reference_options.independent_weight_decay_as=decoupled")
    assert code == 1 and over_tolerance(tmp_path)  # against the documented per-step decay p *= 1 - weight_decay
    code = run(tmp_path / "decoupled", CANDIDATE, "checks=[parity]", "dtype=float64", "steps=2",
               "options={lr: 0.01, weight_decay: 0.1, decoupled_weight_decay: true}",
               "suite.reference_options.independent_weight_decay_as=decoupled")
    assert code == 0  # torch.optim.Adam's decoupled form of the same coefficient is that decay


def test_add_param_group_skips_the_umup_scaling_F36(uo):
    """Records the current behaviour (F36): a group added later gets torch's default lr, unscaled."""
    first = torch.nn.Parameter(torch.ones(4, 16))
    late = torch.nn.Parameter(torch.ones(4, 64))
    for p in (first, late):
        p.mup_type, p.mup_scaling_depth = "weight", None
    opt = uo.Adam([first], lr=0.1)
    opt.add_param_group({"params": [late]})
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 / 4)
    assert opt.param_groups[1]["lr"] == 1e-3  # documented rule: 0.1 / sqrt(64) = 0.0125


def test_an_error_input_declared_for_a_finding_turns_xpass_once_it_is_rejected(uo):
    class ValidatingAdam(uo.Adam):
        """unit_scaling's Adam with the lr check torch does (F35 fixed)."""

        def __init__(self, params, lr=1e-3, *args, **kwargs):
            if not 0.0 <= float(lr):
                raise ValueError(f"Invalid learning rate: {lr}")
            super().__init__(params, lr, *args, **kwargs)

    suite = suite_by_name("umup")
    status = {}
    for cls in (uo.Adam, ValidatingAdam):
        impl = Implementation(f"candidate:{cls.__name__}", cls, is_candidate=True)
        index = next(i for i, e in enumerate(error_inputs(suite)) if e.desc == "a negative learning rate")
        scratch = types.SimpleNamespace(scratch={}, judging=None, recording_to=None)  # the run context: what it reads
        (row, *_) = ErrorsCheck().run(Case(suite, impl, label=str(index)), scratch).rows
        status[cls.__name__] = (row["status"], row["detail"][:3])
    assert status == {"Adam": ("xfail", "F35"), "ValidatingAdam": ("xpass", "F35")}
