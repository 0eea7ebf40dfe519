"""Stochastic rounding judged in a run (``checks/stochastic.py``): a candidate whose spec says it rounds bfloat16
parameters stochastically has its first step drawn many times from one start and judged in distribution against the
reference's step; the catalogue's AdamW with a correct rounding passes, one whose rounding draws 4 random bits
(biased) and one that rounds to nearest fail (``optbench/mutants/stochastic_rounding.py``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests import warm_command


def run(tmp_path, cls: str, *extra: str):
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    path = spec_file(tmp_path, f"optbench.mutants.stochastic_rounding.{cls}", SPECS[f"stochastic_rounding.{cls}"])
    done = warm_command.run("run", "suite=adamw", "dtype=bfloat16", "checks=[parity,stochastic]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=1", f"candidate={path}",
                            f"out_dir={tmp_path / 'out'}", *extra, timeout=300)
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    return done, {r["metric"]: r for r in rows if r["check"] == "stochastic" and r["status"] in ("pass", "fail")}, rows


@pytest.mark.parametrize("cls, failing", [
    ("StochasticRoundingAdamW", set()),
    ("FourBitThresholdAdamW", {"stochastic.bias_z"}),
    ("NearestRoundingAdamW", {"stochastic.elements_failing", "stochastic.bias_z"}),
])
def test_a_stochastic_rounding_is_judged_in_distribution_in_a_run(tmp_path, cls, failing):
    done, stochastic, rows = run(tmp_path, cls)
    assert done.returncode == (1 if failing else 0), done.stdout + done.stderr
    assert set(stochastic) == {"stochastic.bias_z", "stochastic.elements_failing", "stochastic.not_neighbours"}
    assert {m for m, r in stochastic.items() if r["status"] == "fail"} >= failing, stochastic
    assert not failing or "stochastic.not_neighbours" not in {m for m, r in stochastic.items() if r["status"] == "fail"}
    assert "300 draws of 4" in stochastic["stochastic.not_neighbours"]["detail"]  # about 4,096 elements
    parity = next(r for r in rows if r["check"] == "parity" and r["metric"] == "parity.max_err_eps" and not r["fqn"])
    assert parity["status"] == "pass", parity  # within its tolerance a stochastic rounding stays


def test_only_a_candidate_that_declares_a_stochastic_rounding_has_cases(tmp_path):
    done = warm_command.run("run", "suite=adamw", "dtype=bfloat16", "checks=[stochastic]", "impl=[for-loop]",
                            "hparams=[default]", "history_dir=null", "jobs=0", f"out_dir={tmp_path / 'out'}",
                            timeout=300)
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    assert not [r for r in rows if r["check"] == "stochastic"]
    assert done.returncode == 3 and "NOTHING VERIFIED: no check had a case to run" in done.stdout, done.stdout


def test_the_recorded_draws_are_checked_before_they_are_judged():
    from optbench.checks.stochastic import HELD, _drawn_in, _histogram

    chosen = {"w": np.array([0, 3])}
    good = {"w": _histogram(np.array([[1.0, 2.0], [1.0, 2.5], [1.5, 2.0]])), HELD: ["bfloat16"]}
    assert _drawn_in(good, chosen, 3)["w"]["counts"].sum() == 6
    with pytest.raises(ValueError, match="what dtypes the parameters came back as"):
        _drawn_in({"w": good["w"]}, chosen, 3)
    with pytest.raises(ValueError, match="not 4 draws per element"):
        _drawn_in(good, chosen, 4)  # a worker cannot claim draws it did not take
    with pytest.raises(ValueError, match="where the case chose"):
        _drawn_in({"v": good["w"], HELD: []}, chosen, 3)


def test_counts_of_away_draws_and_strays_from_a_histogram():
    from optbench.numerics.stochastic_rounding import away_counts

    v = np.array([1.0 + 2 ** -9, -(1.0 + 2 ** -9)])  # a quarter of a bfloat16 step above 1 (and its negative)
    seen = np.array([[1.0, 1.0 + 2 ** -7, np.nan], [-1.0, -(1.0 + 2 ** -7), -2.0]])
    counts = np.array([[3, 1, 0], [2, 1, 1]])
    k, strays = away_counts(v, seen, counts)
    assert k.tolist() == [1, 1] and strays == 1


def test_the_spec_key_names_bfloat16_only():
    from optbench.adapters.registry import CandidateSpecError
    from optbench.adapters.stochastic_rounding import parse

    assert parse(["bfloat16"], "spec") == ("bfloat16",) and parse("bfloat16", "spec") == ("bfloat16",)
    for bad in (["float16"], [], "float32"):
        with pytest.raises(CandidateSpecError, match="one of bfloat16"):
            parse(bad, "spec")


def test_its_round_trip_at_the_rounded_dtype_is_held_to_tolerance_not_bit_for_bit(tmp_path):
    """The resumed run draws other roundings than the uninterrupted one: bit for bit it would fail every time."""
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    path = spec_file(tmp_path, "optbench.mutants.stochastic_rounding.StochasticRoundingAdamW",
                     SPECS["stochastic_rounding.StochasticRoundingAdamW"])
    done = warm_command.run("run", "suite=adamw", "dtype=bfloat16", "checks=[roundtrip]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=0", f"candidate={path}",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    same = next(r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
                if r["metric"] == "roundtrip.same_order" and r["dtype"] == "bfloat16")
    assert same["status"] == "pass" and "its rounding is stochastic at this dtype" in same["detail"], same


def test_a_step_that_changes_the_parameters_dtype_fails_though_its_values_are_roundings(tmp_path):
    """Turning each rounded bfloat16 parameter into float32 keeps the drawn values: the dtype is what fails."""
    (tmp_path / "changes.py").write_text(
        "import torch\n"
        "from optbench.mutants.stochastic_rounding import StochasticRoundingAdamW\n"
        "class DtypeChanging(StochasticRoundingAdamW):\n"
        "    @torch.no_grad()\n"
        "    def step(self, closure=None):\n"
        "        super().step(closure)\n"
        "        for g in self.param_groups:\n"
        "            for p in g['params']:\n"
        "                if p.grad is not None:\n"
        "                    p.data = p.data.float()\n")
    (tmp_path / "spec.yaml").write_text("class: changes.DtypeChanging\ndtypes: [bfloat16]\n"
                                        "stochastic_rounding: [bfloat16]\n")
    done = warm_command.run("run", "suite=adamw", "dtype=bfloat16", "checks=[stochastic]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=1", "candidate=spec.yaml",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    strays = next(r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
                  if r["metric"] == "stochastic.not_neighbours")
    assert strays["status"] == "fail" and "into float32" in strays["detail"], strays
