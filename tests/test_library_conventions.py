"""Conventions of real libraries (heavyball's) that optbench mishandled: each a test with a minimal stand-in."""

import json

import torch

import optbench
from tests.candidates import BookkeepingSGD
from tests.conftest import run_inline

FAST = ["history_dir=null", "jobs=0"]


def rows(out):
    return json.loads((out / "results.json").read_text())["rows"]


def test_a_candidate_refusing_the_round_trip_set_through_kwargs_is_round_tripped_on_a_set_it_accepts(tmp_path):
    """Its signature takes **kwargs (so amsgrad looks taken) but it raises on them: the round-trip falls back to the
    first set it accepts instead of leaving the round-trip unchecked (it was NOTHING VERIFIED)."""
    code = run_inline(["suite=adamw", "candidate=tests.candidates.KwargsAdamW", "impl=[candidate]",
                       "checks=[roundtrip]", *FAST, f"out_dir={tmp_path}"])
    assert code == 0
    scenarios = [r for r in rows(tmp_path) if r["check"] == "roundtrip" and r["metric"].startswith("roundtrip.")]
    statuses = {r["status"] for r in scenarios} - {"info"}  # info: torch's positional loader, beside
    assert "pass" in statuses and statuses <= {"pass", "skip"}
    assert {r["hparams"] for r in scenarios} == {"default"}


def test_a_step_that_consumes_its_gradients_is_not_timed_as_a_fast_step(tmp_path):
    code = run_inline(["suite=adamw", "candidate=tests.candidates.ConsumingAdamW", "impl=[candidate]",
                       "checks=[speed]", "dtype=float32", "speed.edge_cases=[]", "speed.params=2e4",
                       "speed.min_rounds=3", *FAST, f"out_dir={tmp_path}"])
    assert code == 1
    errors = [r for r in rows(tmp_path) if r["status"] == "error"]
    assert errors and "set .grad to None" in errors[0]["detail"] and "consume_grad" in errors[0]["detail"]
    assert not [r for r in rows(tmp_path) if r["metric"] == "time.step_ms"]


def test_a_same_class_state_dict_that_dropped_private_defaults_loads_by_name():
    model = torch.nn.Linear(2, 2)
    saved = BookkeepingSGD(model.named_parameters())
    model(torch.randn(3, 2)).sum().backward()
    saved.step()
    fresh = BookkeepingSGD(model.named_parameters())
    optbench.load_state_dict_by_name(fresh, saved.state_dict())
    assert fresh.param_groups[0]["step_count"] == 1


def test_a_kwargs_constructor_takes_only_the_options_its_optimizer_keeps(tmp_path):
    """A **kwargs that swallows what it does not know (pytorch-optimizer's) takes no option it does not keep: a set
    naming one is unsupported in its words, not run with the option ignored and failed for it."""
    from optbench.hyperparameters import takes
    from tests.candidates import PassingOnAdam, SwallowingSGD

    assert takes(SwallowingSGD, "weight_decay") and not takes(SwallowingSGD, "momentum")
    assert takes(PassingOnAdam, "betas") and takes(PassingOnAdam, "amsgrad") and not takes(PassingOnAdam, "momentum")
    code = run_inline(["suite=sgd", "candidate=tests.candidates.SwallowingSGD", "impl=[candidate]",
                       "checks=[parity]", "dtype=float32", "hparams=[weight_decay,momentum]", "steps=4", *FAST,
                       f"out_dir={tmp_path}"])
    assert code == 0
    by_set = {r["hparams"]: r for r in rows(tmp_path) if r["check"] == "parity" and r["status"] != "info"}
    assert by_set["weight_decay"]["status"] == "pass"
    assert by_set["momentum"]["status"] == "unsupported" and "momentum" in by_set["momentum"]["detail"]


def test_a_candidate_documented_to_take_no_sparse_gradients_is_unsupported_on_sparse_sets(tmp_path):
    """``sparse: false`` makes a set of sparse gradients unsupported in so many words; without it the refusal is an
    error, and a set of dense gradients is judged either way."""
    spec = tmp_path / "dense_only.yaml"
    spec.write_text("class: tests.candidates.DenseOnlySGD\nsparse: false\n")
    common = ["suite=sgd", "impl=[candidate]", "checks=[parity]", "dtype=float32", "hparams=[sparse,weight_decay]",
              "steps=4", *FAST]
    assert run_inline([*common, f"candidate={spec}", f"out_dir={tmp_path / 'declared'}"]) == 0
    by_set = {r["hparams"]: r for r in rows(tmp_path / "declared") if r["check"] == "parity" and r["status"] != "info"}
    assert by_set["weight_decay"]["status"] == "pass"
    assert by_set["sparse"]["status"] == "unsupported" and "sparse: false" in by_set["sparse"]["detail"]
    assert run_inline([*common, "candidate=tests.candidates.DenseOnlySGD", f"out_dir={tmp_path / 'plain'}"]) == 1
    assert {r["status"] for r in rows(tmp_path / "plain") if r["hparams"] == "sparse" and r["check"] == "parity"} - {
        "info"} == {"error"}
