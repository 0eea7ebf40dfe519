"""The round-trip scenarios as a check: every one passes for a correct by-name loader, and loaders that are
wrong in one way each (positional, ignoring rename, never refusing) fail the scenarios that exist to catch them."""

import pytest
import torch
from hydra import compose, initialize_config_module

import optbench.checks.roundtrip_scenario as roundtrip
from optbench.checks import REGISTRY
from optbench.engine.runner import SuiteRun
from optbench.state.scenarios import SCENARIOS


def run_scenarios(tmp_path, suite: str, impls: str, scenarios: list[str] | None = None, extra=()) -> dict:
    overrides = [f"suite={suite}", f"impl={impls}", "checks=[roundtrip]", "workload.width=16", "workload.vocab=32",
                 "roundtrip.every_dtype=[]",  # at roundtrip.dtype alone: the rows are keyed by implementation
                 *([f"roundtrip.scenarios=[{','.join(scenarios)}]"] if scenarios is not None else []), *extra]
    with initialize_config_module(config_module="optbench.suites", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    run = SuiteRun(cfg, tmp_path)
    check = REGISTRY["roundtrip"]
    out = {}
    for case in check.cases(run.suites[0], run.ctx):
        for r in check.run(case, run.ctx).rows:
            out[(case.impl_name, r["metric"])] = (r["status"], r["value"], r["detail"])
    return out


def by_name(results: dict) -> dict:
    return {(impl, m.removeprefix("roundtrip.")): s for (impl, m), (s, _, _) in results.items()
            if not m.startswith("roundtrip.positional.")}


def test_every_scenario_passes_by_name_and_torch_is_caught_misattributing(tmp_path):
    results = run_scenarios(tmp_path, "adamw", "[for-loop,foreach]")
    statuses = by_name(results)
    # every scenario but those between a quantized candidate and its library's full-precision class
    assert {s.name for s in SCENARIOS if not s.counterpart} == {name for _, name in statuses}
    assert {s for s in statuses.values()} <= {"pass", "skip"}, [k for k, s in statuses.items()
                                                                if s not in ("pass", "skip")]
    assert statuses[("for-loop", "cross_implementation")] == "pass"  # saved by foreach
    assert statuses[("for-loop", "cuda_to_cpu")] == ("pass" if torch.cuda.is_available() else "skip")
    positional = {m: v for (impl, m), (_, v, _) in results.items() if impl == "for-loop" and "positional" in m}
    assert positional["roundtrip.positional.same_shapes_reordered"] == 1.0  # silently wrong (PyTorch #1489)
    assert positional["roundtrip.positional.same_order"] == 0.0
    assert positional["roundtrip.positional.regrouped"] == 2.0  # raises


MUTANT_LOADERS = {
    "positional": lambda opt, sd, strict=True, rename=None: opt.load_state_dict(sd),
    "ignores_rename": lambda opt, sd, strict=True, rename=None: REAL(opt, sd, strict=strict),
    "never_strict": lambda opt, sd, strict=True, rename=None: REAL(opt, sd, strict=False, rename=rename),
}
REAL = roundtrip.load_state_dict_by_name
CAUGHT_BY = {"positional": ["same_shapes_reordered", "reversed", "regrouped", "subset", "unnamed_saved"],
             "ignores_rename": ["renamed_mapping", "ddp_prefix", "compile_prefix"],
             "never_strict": ["subset", "superset"]}


@pytest.mark.parametrize("mutant", sorted(MUTANT_LOADERS))
def test_a_wrong_loader_fails_the_scenarios_made_for_it(tmp_path, monkeypatch, mutant):
    monkeypatch.setattr(roundtrip, "load_state_dict_by_name", MUTANT_LOADERS[mutant])
    statuses = by_name(run_scenarios(tmp_path, "adamw", "[for-loop]", CAUGHT_BY[mutant]))
    assert all(statuses[("for-loop", name)] in ("fail", "error") for name in CAUGHT_BY[mutant]), statuses


def test_lbfgs_flat_state_is_refused_where_it_cannot_follow_and_resumes_where_it_can(tmp_path):
    statuses = by_name(run_scenarios(tmp_path, "lbfgs", "[for-loop]",
                                     ["same_order", "reversed", "subset", "shape_changed", "regrouped", "ddp_prefix"]))
    assert statuses == {("for-loop", "same_order"): "pass", ("for-loop", "reversed"): "pass",
                        ("for-loop", "subset"): "pass", ("for-loop", "shape_changed"): "pass",
                        ("for-loop", "regrouped"): "skip", ("for-loop", "ddp_prefix"): "pass"}


def test_a_misspelt_scenario_is_a_usage_error(tmp_path):
    from optbench.usage import UsageError
    with pytest.raises(UsageError, match="roundtrip.scenarios: unknown scenario.s. reversd"):
        run_scenarios(tmp_path, "adamw", "[for-loop]", ["reversd"])


def test_the_report_matrix_shows_each_verdict_beside_torchs(tmp_path):
    import pandas as pd

    from optbench.report import roundtrip as report
    with initialize_config_module(config_module="optbench.suites", version_base="1.3"):
        cfg = compose("config", overrides=["suite=adamw", "impl=[for-loop]", "checks=[roundtrip]", "workload.width=16",
                                           "workload.vocab=32",
                                           "roundtrip.scenarios=[same_order,same_shapes_reordered,regrouped]"])
    run = SuiteRun(cfg, tmp_path)
    check = REGISTRY["roundtrip"]
    rows = pd.DataFrame([r for case in check.cases(run.suites[0], run.ctx) for r in check.run(case, run.ctx).rows])
    matrix = report.table(rows).set_index(["dtype", "scenario"])["for-loop"].to_dict()
    others = [d for d in run.ctx.dtypes["adamw"] if d != "float32"]  # roundtrip.every_dtype's same_order
    assert others and matrix == {
        ("float32", "same_order"): "pass · torch right", ("float32", "same_shapes_reordered"): "pass · torch WRONG",
        ("float32", "regrouped"): "pass · torch raises", **{(d, "same_order"): "pass · torch right" for d in others}}
    counts = report.silently_wrong(rows).set_index("scenario")
    assert counts.loc["same_shapes_reordered", "WRONG"] == 1 and counts.loc["same_order", "right"] == 1 + len(others)


def _drops_state(opt, sd, strict=True, rename=None):
    """A wrong loader: the hparams load, every momentum buffer is lost (as if the state were dropped)."""
    REAL(opt, sd, strict=strict, rename=rename)
    for state in opt.state.values():
        state["momentum_buffer"].zero_()


@pytest.mark.slow  # two inductor compiles of Muon (~50 s); the slow tier's suite=muon runs this path too
def test_muon_compiled_continues_a_for_loop_state_in_its_update_precision(tmp_path, monkeypatch):
    """Regression (``optbench run suite=muon`` exited 1 on a correct torch 2.13; ``suite=all`` runs no compiled
    round-trip, so it hid it): eager and inductor round Muon's bfloat16 Newton-Schulz differently (inductor
    keeps a fused kernel's bfloat16 intermediates in float32), so at the save point the parameters are ~1e4
    float32 eps apart. They are held in bfloat16 eps of their displacement, as the reshard check holds them;
    a lost state still fails."""
    right = run_scenarios(tmp_path, "muon", "[for-loop,compiled]", ["cross_implementation"])
    status, _, detail = right[("compiled", "roundtrip.cross_implementation")]
    assert status == "pass" and "bfloat16 eps of their displacement" in detail, detail
    monkeypatch.setattr(roundtrip, "load_state_dict_by_name", _drops_state)
    wrong = run_scenarios(tmp_path, "muon", "[for-loop,compiled]", ["cross_implementation"])
    assert wrong[("compiled", "roundtrip.cross_implementation")][0] == "fail", wrong


def test_a_shape_change_with_no_state_to_refuse_is_a_skip_saying_so(tmp_path):
    """SGD without momentum keeps no state tensor: there is no shape a load could refuse, so shape_changed skips
    (it failed as "loaded where it must refuse" before); with momentum (the suite's round-trip set) the
    scenario refuses, as test_every_scenario_passes_by_name... checks for AdamW."""
    plain = run_scenarios(tmp_path, "sgd", "[for-loop]", ["shape_changed"], extra=["hparams=first"])
    status, _, detail = plain[("for-loop", "roundtrip.shape_changed")]
    assert status == "skip" and "no shape to refuse" in detail, (status, detail)


def test_a_variant_that_steps_only_on_cuda_skips_the_scenarios_that_cross_to_the_cpu(monkeypatch):
    """capturable and graphed optimizers cannot be built on the CPU side of cuda_to_cpu and cpu_to_cuda (seen on a
    GPU, where they errored): a skip naming why, before anything is built."""
    from types import SimpleNamespace

    from optbench.state.scenarios import SCENARIOS

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    impl = SimpleNamespace(name="graphed", needs_cuda=True, compiled=False)
    case = SimpleNamespace(impl=impl, dtype="float32", device=torch.device("cuda"), suite=None)
    session = SimpleNamespace(case=case, ctx=None, tape=None)
    for scenario in (s for s in SCENARIOS if s.devices):
        status, detail, _, _ = roundtrip.run_scenario(session, scenario)
        assert status == "skip" and "steps only on CUDA" in detail, (scenario.name, status, detail)
