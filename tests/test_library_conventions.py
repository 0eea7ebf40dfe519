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
