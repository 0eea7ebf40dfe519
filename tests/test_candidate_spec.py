"""Third-party optimizers adapted in YAML (a candidate spec), and told plainly what differs when they are not."""

import io
import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from optbench import load_state_dict_by_name
from optbench.adapters.spec import CandidateSpec
from optbench.engine.selection import candidate_spec
from optbench.state.names import StateDictNameError
from optbench.suite.spec import Suite
from tests.conftest import run_inline
from tests.thirdparty.other_adam import OtherAdam

SPEC = "tests/thirdparty/other_adam.yaml"
RUN = ["suite=adam", "dtype=float32", "steps=5", "history_dir=null"]

OTHER = "candidate:tests.thirdparty.other_adam.OtherAdam"  # the label of the spec's class


def rows_of(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["rows"]


def test_without_a_spec_the_rows_name_the_keys_each_side_keeps_and_its_own_error_messages_fail(tmp_path, capsys):
    out = tmp_path / "plain"
    code = run_inline([*RUN, "candidate=tests.thirdparty.other_adam.OtherAdam", "impl=[candidate]",
                       "checks=[parity,errors]", "options={lr: 0.01}", f"out_dir={out}"])
    assert code == 1
    parity = next(r for r in rows_of(out) if r["check"] == "parity" and r["metric"] == "parity.max_err_eps"
                  and r["fqn"] == "")
    assert parity["status"] == "fail"
    assert "state key(s) 'exp_avg', 'exp_avg_sq', 'step' kept only by the reference" in parity["detail"]
    assert "state key(s) 'grad_norm', 't' kept only by the implementation" in parity["detail"]
    negative_lr = next(r for r in rows_of(out) if r["check"] == "errors" and r["hparams"] == "a negative learning rate"
                       and r["impl"] == OTHER and r["status"] != "info")
    assert negative_lr["status"] == "fail" and "got AssertionError" in negative_lr["detail"]


def test_a_spec_adapts_names_state_and_rejections_and_the_report_shows_the_defaults(tmp_path, capsys):
    out = tmp_path / "adapted"
    code = run_inline([*RUN, f"candidate={SPEC}", "impl=[candidate,for-loop]",
                       "checks=[parity,cross,roundtrip,errors]", f"out_dir={out}"])
    said = capsys.readouterr().out
    rows = rows_of(out)
    assert code == 0, [(r["check"], r["hparams"], r["detail"]) for r in rows if r["status"] in ("fail", "error")]
    assert "warning: " + OTHER + "'s own defaults differ from the reference's: lr=0.01 (reference 0.001)" in said
    mine = [r for r in rows if r["impl"] == OTHER]
    verdicts = {r["hparams"]: r["status"] for r in mine if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""}
    assert verdicts["weight_decay"] == "pass" and verdicts["large_lr_l2"] == "pass"  # weight_decay reaches it as wd
    unsupported = {r["hparams"]: r["detail"] for r in mine if r["check"] == "parity" and r["status"] == "unsupported"}
    assert "its constructor takes no amsgrad" in unsupported["amsgrad_weight_decay"]
    errors = {r["hparams"]: r for r in mine if r["check"] == "errors" and r["status"] != "info"}
    assert errors["a negative learning rate"]["status"] == "pass"
    assert errors["a negative learning rate"]["detail"].startswith("rejected in its own words: AssertionError")
    assert errors["a 2-element Tensor lr"]["status"] == "unsupported"
    assert "torch.optim convention" in errors["a 2-element Tensor lr"]["detail"]
    trip = [r for r in mine if r["check"] == "roundtrip" and r["status"] not in ("", "info")]
    assert trip and all(r["status"] in ("pass", "skip") for r in trip)
    assert {r["hparams"] for r in trip} == {"default"}  # no amsgrad: the first set it takes
    assert sum(r["status"] == "pass" for r in trip) >= 15
    meta = json.loads((out / "results.json").read_text())["candidate"]
    assert meta["spec"] == SPEC and next(r for r in meta["defaults"] if r["option"] == "lr")["differs"]
    report = (out / "report.md").read_text()
    assert "## Candidate" in report and "| weight_decay           | wd " in report


def test_a_spec_never_hides_a_bug_and_max_failures_stops_at_the_first_failing_case(tmp_path):
    spec = tmp_path / "off_by_one.yaml"
    text = Path(SPEC).read_text().replace("other_adam.OtherAdam", "other_adam.OffByOneOtherAdam")
    spec.write_text(text)
    out = tmp_path / "run"
    code = run_inline([*RUN, f"candidate={spec}", "impl=[candidate]", "checks=[parity]", "max_failures=1",
                       f"out_dir={out}"])
    assert code == 1
    data = json.loads((out / "results.json").read_text())
    assert data["run"]["status"] == "stopped" and data["run"]["finished_cases"] < data["run"]["planned_cases"]
    assert [r["status"] for r in data["rows"] if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""] == ["fail"]


@pytest.mark.parametrize("text, message", [
    ("class: tests.thirdparty.other_adam.OtherAdam\nrenme: {weight_decay: wd}\n", "unknown key(s) renme"),
    ("rename: {weight_decay: wd}\n", "needs class:"),
    ("class: tests.thirdparty.other_adam.OtherAdam\nstate: {step: epoch}\n", "state.step=epoch"),
    ("class: [unclosed\n", "not a readable candidate spec"),
    ("class: tests.thirdparty.other_adam.OtherAdam\nrejects: [NotAnError]\n", "rejects: 'NotAnError' is no exception"),
    ("class: tests.thirdparty.other_adam.OtherAdam\nrename: {params: x}\n", "rename: params is the parameters"),
    ("class: tests.thirdparty.other_adam.OtherAdam\nrename: {beta1: 'betas[0]'}\n", "betas[0] needs fixed: betas"),
    ("class: tests.thirdparty.other_adam.OtherAdam\nrename: {eps: [a, 'b[1]']}\n", "a list spreads a sequence"),
    ("class: tests.thirdparty.other_adam.OtherAdam\nrename: {eps: {both: [a, b]}}\n", "is {each: [argument, ...]}"),
    ("class: tests.thirdparty.other_adam.OtherAdam\ngroup_schedule: sometimes\n", "group_schedule='sometimes'"),
])
def test_a_bad_spec_is_one_line_exit_2(tmp_path, capsys, text, message):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    assert run_inline([*RUN, f"candidate={spec}", f"out_dir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and str(spec) in err, err
    assert run_inline([*RUN, f"candidate={tmp_path / 'missing.yaml'}", f"out_dir={tmp_path / 'out'}"]) == 2
    assert "no such candidate spec file" in capsys.readouterr().err


def test_a_suites_candidates_entry_adapts_the_class_it_names():
    cfg = OmegaConf.create({"name": "adam", "optimizer": "Adam", "reference": "adam", "dtypes": ["float32"],
                            "hparams": [{"name": "default"}],
                            "candidates": [{"class": "tests.thirdparty.other_adam.OtherAdam",
                                            "rename": {"weight_decay": "wd"}}]})
    suite = Suite.from_config(cfg)
    assert candidate_spec("tests.thirdparty.other_adam.OtherAdam", suite).rename == {"weight_decay": "wd"}
    assert candidate_spec("torch.optim.Adam", suite).rename == {}  # any other class: taken as written


def test_fixed_arguments_never_override_a_hparam_set_and_the_state_view_maps_nested_and_group_steps():
    from optbench.implementations.candidate import candidate_implementation

    spec = CandidateSpec(cls="tests.thirdparty.other_adam.OtherAdam", rename={"weight_decay": "wd"},
                         fixed={"lr": 0.5, "fuse_updates": True}, state_keys={"moments.m": "exp_avg"},
                         ignore=("grad_norm",), step="group:epoch", decode="nested")
    impl = candidate_implementation(spec, {"lr": 1e-3, "weight_decay": 0.0, "amsgrad": False})
    p = torch.nn.Parameter(torch.ones(3))
    assert impl.build([{"params": [("p", p)]}], {"lr": 0.1}).optimizer.param_groups[0]["lr"] == 0.1
    optimizer = impl.build([{"params": [("p", p)]}], {"weight_decay": 0.2}).optimizer
    assert optimizer.param_groups[0]["lr"] == 0.5 and optimizer.param_groups[0]["wd"] == 0.2
    assert optimizer.param_groups[0]["fuse_updates"] is True and "amsgrad" not in optimizer.param_groups[0]
    p.grad = torch.ones(3)
    optimizer.step()
    optimizer.param_groups[0]["epoch"] = 7
    view = optimizer.per_parameter_state()[p]
    assert set(view) == {"exp_avg", "moments.v", "t", "step"} and view["step"] == 7
    assert torch.equal(view["exp_avg"], optimizer.state[p]["moments"]["m"])
    assert impl.skipped_state == frozenset({"grad_norm"})
    assert impl.options_not_taken({"weight_decay", "amsgrad"}) == ["amsgrad"]


def _saved(optimizer) -> dict:
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_nested_state_loads_by_name_with_each_parameter_and_a_wrong_nested_shape_is_refused():
    """A dict every parameter keeps is its own (it used to be taken for a group's bookkeeping and moved, whole, to
    the group's first parameter: the next step raised on shapes)."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    optimizer = OtherAdam(model.named_parameters(), lr=1e-3)
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    saved = _saved(optimizer)
    reordered = OtherAdam(list(reversed(list(model.named_parameters()))), lr=1e-3)
    load_state_dict_by_name(reordered, saved)
    assert all(torch.equal(reordered.state[p]["moments"]["m"], optimizer.state[p]["moments"]["m"])
               for p in model.parameters())
    reordered.step()
    grown = _saved(optimizer)
    first = grown["param_groups"][0]["params"][0]
    grown["state"][first]["moments"]["m"] = torch.zeros(5, 3)
    with pytest.raises(StateDictNameError, match=r"0.weight changed shape: its saved state moments.m has shape"):
        load_state_dict_by_name(OtherAdam(model.named_parameters(), lr=1e-3), grown)


def test_a_step_the_candidate_does_not_keep_is_left_out_on_both_sides_in_parity_and_cross(tmp_path):
    """``step: none`` (with its own count ignored): the reference's ``step`` is compared with nothing, in parity's
    trajectory and in cross against the for-loop; without it, both would see a key only one side keeps."""
    spec = tmp_path / "no_step.yaml"
    spec.write_text(Path(SPEC).read_text().replace("t: step}", "}").replace("ignore: [grad_norm]",
                                                                            "ignore: [grad_norm, t]\n  step: none"))
    out = tmp_path / "run"
    code = run_inline([*RUN, f"candidate={spec}", "impl=[candidate,for-loop]", "checks=[parity,cross]",
                       "options={lr: 0.01}", f"out_dir={out}"])
    rows = [r for r in rows_of(out) if r["impl"] == OTHER and r["status"] not in ("", "info")]
    assert code == 0, [r["detail"] for r in rows if r["status"] != "pass"]
    assert {r["check"] for r in rows} == {"parity", "cross"}
    assert not any(r["tensor"] == "step" for r in rows_of(out) if r["impl"] == OTHER)


class RequiredLr(torch.optim.Optimizer):
    """lr required (no default), momentum defaulting to another value than the reference's."""

    def __init__(self, params, lr, momentum=0.5):
        super().__init__(params, dict(lr=lr, momentum=momentum))


def test_the_defaults_table_flags_only_a_default_that_differs():
    from optbench.implementations.candidate import candidate_implementation, defaults_table

    reference = {"lr": 1e-3, "momentum": 0.0, "nesterov": False}
    table = {r["option"]: r for r in defaults_table(candidate_implementation(
        CandidateSpec(cls="tests.test_candidate_spec.RequiredLr"), reference), reference)}
    assert (table["lr"]["candidate"], table["lr"]["built"], table["lr"]["differs"]) == ("(no default)", 1e-3, False)
    momentum = table["momentum"]
    assert (momentum["candidate"], momentum["built"], momentum["differs"]) == (0.5, 0.0, True)
    assert (table["nesterov"]["candidate"], table["nesterov"]["differs"]) == ("(not taken)", False)


@pytest.mark.slow  # (slow tier; CI keeps a spec's names, state, rejections and keys)
def test_a_sign_decided_by_rounding_is_left_out_and_a_wrong_lion_still_fails_at_bfloat16(tmp_path):
    """Lion's step is lr * sign(c): where c is within rounding of 0 a correct bfloat16 step may take either sign.
    Those elements (counted) are left out of the one-step gate, and the free-running reference goes on from the
    implementation's outcome there; the mutants, whose bugs are not decided by rounding, still fail."""
    def run_lion(cls, out):
        return run_inline(["suite=lion", f"candidate=optbench.mutants.lion.{cls}", "dtype=bfloat16",
                           "checks=[parity]", "steps=15", "history_dir=null", f"out_dir={out}"])

    assert run_lion("CorrectLionMulAdd", tmp_path / "ok") == 0
    rows = rows_of(tmp_path / "ok")
    left_out = [r["value"] for r in rows if r["metric"] == "parity.one_step_decisions_left_out"]
    assert left_out and all(v > 0 for v in left_out)  # counted, per case
    assert any(r["metric"] == "parity.decisions_adopted" for r in rows)
    for mutant in ("LionWithL2Decay", "LionMomentumFirst", "LionInterpolatingWithBeta2"):
        assert run_lion(mutant, tmp_path / mutant) == 1, mutant


# (in CI pytorch-optimizer's: a third-party Lion at every dtype; rounding's signs left out at bfloat16: the test above)
@pytest.mark.parametrize("library", [pytest.param("lion_pytorch", marks=pytest.mark.slow),
                                     pytest.param("pytorch_optimizer", marks=pytest.mark.slow)])  # (slow tier; CI
# keeps test_cli's correct Lions and their mutants)
def test_third_party_lions_at_every_dtype(library, tmp_path):
    """lion-pytorch passes suite=lion at float64, float32 and bfloat16 (its bfloat16 signs near 0 are rounding's:
    left out, counted); pytorch-optimizer's Lion steps right, and fails only the name_aware round-trip: its own
    finding F38, declared for it (impl: candidate:pytorch_optimizer.*), so an xfail."""
    pytest.importorskip(library)
    code = run_inline(["suite=lion", f"candidate={library}.Lion", "checks=[parity,roundtrip,errors]", "steps=10",
                       "history_dir=null", f"out_dir={tmp_path}"])
    bad = {(r["check"], r["metric"]) for r in rows_of(tmp_path) if r["status"] in ("fail", "error")}
    assert code == 0 and not bad, bad
    xfail = {(r["metric"], r["finding"]) for r in rows_of(tmp_path) if r["status"] == "xfail"}
    assert xfail == (set() if library == "lion_pytorch" else {  # F48: maximize negates the caller's gradient
        ("roundtrip.name_aware", "F38"), ("parity.max_err_eps", "F48"), ("deviation.max_err_eps", "F48")})
    assert {r["dtype"] for r in rows_of(tmp_path) if r["check"] == "parity" and r["status"] == "pass"} == {
        "float64", "float32", "bfloat16"}


@pytest.mark.slow  # (slow tier; CI keeps a spec's names, state, rejections and keys)
def test_pytorch_optimizers_adan_against_the_reference_and_its_maximize_bug(tmp_path):
    """suite=adan through its adapter (no_prox renamed, the previous gradient's key mapped, a per-group step
    counter whose count the reference's bias corrections use): right, except under maximize, F39, declared for it
    and so an xfail whose rows state the error measured."""
    pytest.importorskip("pytorch_optimizer")
    code = run_inline(["suite=adan", "candidate=pytorch_optimizer.Adan", "checks=[parity]", "steps=10",
                       "dtype=[float64,float32]", "history_dir=null", f"out_dir={tmp_path}"])
    rows = rows_of(tmp_path)
    assert code == 0, [(r["dtype"], r["detail"][:120]) for r in rows if r["status"] in ("fail", "error")]
    verdicts = {(r["hparams"], r["dtype"]): r["status"] for r in rows
                if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""}
    assert {k for k, v in verdicts.items() if v != "pass"} == {("maximize", "float64"), ("maximize", "float32")}
    assert {v for (h, _), v in verdicts.items() if h == "maximize"} == {"xfail"}
    measured = [r for r in rows if r["metric"] == "deviation.max_err_eps" and r["finding"] == "F39"]
    assert measured and all(float(r["value"]) > 1e3 for r in measured)  # "inf" where the reference is 0


@pytest.mark.parametrize("options, exit_code", [("{}", 0), ("{adam_debias: false}", 1)])
def test_pytorch_optimizers_lamb_in_its_documented_mode_and_its_default_step_bug(options, exit_code, tmp_path):
    """suite=lamb: pytorch-optimizer's Lamb built as its docstring describes it (adam_debias=True: no bias
    correction, ||x|| clamped at 10, ||u|| + eps: the adapter's conventions) matches the reference; its default
    divides the step by 1 - beta1^t (F40: declared for the suite's library_default set only, a FAIL elsewhere)."""
    pytest.importorskip("pytorch_optimizer")
    code = run_inline(["suite=lamb", "candidate=pytorch_optimizer.Lamb", "checks=[parity]", "steps=10",
                       "dtype=float32", f"options={options}", "history_dir=null", f"out_dir={tmp_path}"])
    verdicts = [r["status"] for r in rows_of(tmp_path) if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""]
    assert code == exit_code and verdicts == ["fail" if exit_code else "pass"]
    report = (tmp_path / "report.md").read_text()  # what the adapter declares is in every report, in the open
    assert "**conventions** {'bias_correction': False, 'trust_ratio_eps': True, 'clamp_value': 10.0}" in report


@pytest.mark.slow  # (slow tier; CI keeps a spec's names, state, rejections and keys)
def test_schedulefree_in_train_mode_against_the_reference(tmp_path):
    """suite=schedule_free_adamw: the package's AdamWScheduleFree, put in train mode by the adapter (prepare:
    [train], without which it refuses to step), its per-group k, weight sum and lr_max counted over every step()
    call by the reference (a tensor without a gradient on some steps included): right at float32, round-trip by
    name included (its group counters follow the parameters into new groups)."""
    pytest.importorskip("schedulefree")
    code = run_inline(["suite=schedule_free_adamw", "candidate=schedulefree.AdamWScheduleFree", "steps=10",
                       "checks=[parity,roundtrip]", "dtype=float32", "history_dir=null", f"out_dir={tmp_path}"])
    rows = rows_of(tmp_path)
    assert code == 0, [(r["hparams"], r["detail"][:120]) for r in rows if r["status"] in ("fail", "error")]
    assert {r["metric"] for r in rows if r["check"] == "roundtrip" and r["status"] == "pass"} >= {
        "roundtrip.regrouped", "roundtrip.superset"}


def test_transformers_adafactor_against_its_documented_algorithm(tmp_path):
    """suite=hf_adafactor: transformers' Adafactor (relative step, parameter scaling, factored second moment whose
    row/column factors the by-name loader accepts as reductions of the parameter's shape) passes parity, the
    round-trip by name and its own input validation. transformers is in the [thirdparty] extra, not [test]."""
    pytest.importorskip("transformers")
    code = run_inline(["suite=hf_adafactor", "candidate=transformers.optimization.Adafactor", "steps=10",
                       "checks=[parity,roundtrip,errors]", "dtype=float32", "history_dir=null", f"out_dir={tmp_path}"])
    assert code == 0, [(r["hparams"], r["detail"][:120]) for r in rows_of(tmp_path) if r["status"] in ("fail", "error")]


def test_transformers_adafactor_resumed_at_bfloat16_is_f71():
    """Its float32 state for bfloat16 parameters comes back rounded from torch's load_state_dict (F71): the same-order
    round-trip at bfloat16 is that finding's xfail, the by-name scenarios (which keep the saved dtypes) pass."""
    pytest.importorskip("transformers")
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        code = run_inline(["suite=hf_adafactor", "candidate=transformers.optimization.Adafactor", "impl=[candidate]",
                           "checks=[roundtrip]", "dtype=bfloat16", "roundtrip.scenarios=[same_order,reversed]",
                           "history_dir=null", f"out_dir={out}/run"])
        verdicts = {r["metric"]: (r["status"], r["finding"]) for r in rows_of(Path(out) / "run")
                    if r["check"] == "roundtrip" and r["fqn"] == "" and r["metric"].startswith("roundtrip.")
                    and ".positional." not in r["metric"]}
    assert code == 0 and verdicts == {"roundtrip.same_order": ("xfail", "F71"), "roundtrip.reversed": ("pass", "")}, (
        verdicts)


def test_a_rename_spreads_a_tuple_or_sets_one_position_and_the_reference_reads_them_back():
    """``eps: [eps1, eps2]`` spreads the reference's tuple over two arguments; ``beta1: betas[0]`` sets one
    position of a tuple whose other positions ``fixed`` gives; ``torch.float32`` is a dtype and ``param.dtype`` the
    parameters'. A suite without an optimizer completes the reference's options from the candidate's defaults read
    back through those renames (eps, beta1), never under the candidate's names."""
    spec = CandidateSpec.from_mapping({"class": "x.Y", "rename": {"eps": ["eps1", "eps2"], "beta1": "betas[0]"},
                                       "fixed": {"betas": [None, 0.999], "state_dtype": "torch.float32",
                                                 "momentum_dtype": "param.dtype"}}, "spec")
    assert spec.fixed["state_dtype"] is torch.float32
    assert spec.renamed({"eps": (1e-30, 1e-3), "beta1": 0.9, "lr": 0.1}) == {
        "eps1": 1e-30, "eps2": 1e-3, "betas": (0.9, 0.999), "lr": 0.1}
    with pytest.raises(ValueError, match="spreads over 2 arguments"):
        spec.renamed({"eps": 1e-8})
    own = {"eps1": 1e-30, "eps2": 1e-3, "betas": (0.9, 0.999), "lr": 1e-3, "momentum_dtype": torch.bfloat16}
    assert spec.as_reference(own) == {"eps": (1e-30, 1e-3), "beta1": None, "lr": 1e-3,
                                      "momentum_dtype": torch.bfloat16}  # beta1 as built: fixed betas[0]
    assert spec.value_in("beta1", own) == 0.9 and spec.value_in("eps", {"eps1": 1}, "?") == "?"
    assert spec.arguments("beta1") == ["betas"] and spec.argument("eps") == "eps1, eps2"
    p = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    assert spec.resolved({"momentum_dtype": "param.dtype", "lr": 1}, [{"params": [("p", p)]}]) == {
        "momentum_dtype": torch.float64, "lr": 1}


@pytest.mark.slow  # (slow tier; CI keeps a spec's names, state, rejections and keys)
def test_pytorch_optimizers_adafactor_through_its_adapter(tmp_path):
    """suite=hf_adafactor: pytorch-optimizer's AdaFactor (eps spread over eps1/eps2, beta1 a position of betas, its
    first moment at the parameters' dtype, its per-group step count the reference's group_step) passes parity at
    every dtype and the round-trip by name bar F38 (declared for the library: an xfail)."""
    pytest.importorskip("pytorch_optimizer")
    code = run_inline(["suite=hf_adafactor", "candidate=pytorch_optimizer.AdaFactor", "steps=10",
                       "checks=[parity,roundtrip]", "dtype=[float64,bfloat16]", "history_dir=null",
                       f"out_dir={tmp_path}"])
    rows = rows_of(tmp_path)
    assert code == 0, [(r["hparams"], r["detail"][:120]) for r in rows if r["status"] in ("fail", "error")]
    assert {r["metric"] for r in rows if r["check"] == "roundtrip" and r["status"] == "xfail"} == {
        "roundtrip.name_aware"}
    # the same adapter without the group_step convention: the tensor whose gradient is sometimes None fails
    spec = tmp_path / "no_group_step.yaml"
    spec.write_text("class: pytorch_optimizer.AdaFactor\nrename: {eps: [eps1, eps2], beta1: 'betas[0]'}\n"
                    "fixed: {betas: [null, 0.999], momentum_dtype: param.dtype}\nstate: {step: none, ignore: [RMS]}\n")
    assert run_inline(["suite=hf_adafactor", f"candidate={spec}", "steps=4", "checks=[parity]", "dtype=float32",
                       "history_dir=null", f"out_dir={tmp_path / 'without'}"]) == 1
    failing = [r["detail"] for r in rows_of(tmp_path / "without")
               if r["status"] == "fail" and r["metric"] == "parity.max_err_eps" and not r["fqn"]]
    assert failing and all("step 3 adapter.lora_a.weight/" in d for d in failing), failing


def test_a_class_that_implements_no_plain_variant_is_unsupported_there_and_judged_where_it_runs(tmp_path):
    """A constructor's NotImplementedError on a set's values is that set's 'unsupported' row in its own words; memory
    is measured on the first set it builds; error inputs build it with the reference's values of the options it
    names (its lr has no default: no input is 'rejected' for a missing lr), and an input that is only invalid at a
    value it does not implement (momentum 0) is unsupported."""
    from tests.conftest import run_inline

    out = tmp_path / "run"
    assert run_inline(["suite=sgd", "candidate=tests.candidates.MomentumOnlySGD", "impl=[candidate]", "jobs=0",
                       "checks=[parity,errors,memory]", "dtype=float32", "hparams=[default,momentum_weight_decay]",
                       "steps=3", "history_dir=null", f"out_dir={out}"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    unsup = [r for r in rows if r["check"] == "parity" and r["status"] == "unsupported"]
    assert [r["hparams"] for r in unsup] == ["default"] and "NotImplementedError at construction, on the reference's " \
        "defaults too: SGD without momentum is not supported" in unsup[0]["detail"], unsup
    assert any(r["check"] == "parity" and r["hparams"] == "momentum_weight_decay" and r["status"] == "pass"
               for r in rows)
    measured = {r["hparams"] for r in rows if r["check"] == "memory" and r["status"] != "error"}
    assert measured == {"momentum_weight_decay"}, measured
    errors = {r["hparams"]: r for r in rows if r["check"] == "errors" and r["status"] not in ("info",)}
    assert not any("missing 1 required positional argument" in r["detail"] for r in errors.values()), errors
    assert errors["a negative learning rate"]["status"] == "pass", errors["a negative learning rate"]
    assert errors["Nesterov without momentum"]["status"] == "unsupported"
