"""The quantized check end to end without bitsandbytes: an 8-bit AdamW written on optbench's own quantizer
(``optbench/mutants/blockwise_8bit.py``, the mutant catalogue's) passes, in the parent's judgement, with parity and
cross covering its 32-bit-state parameters; the same with another beta2 in its 8-bit step fails. An 8-bit Lion (one
quantized moment) likewise."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from tests import warm_command


def spec(tmp_path, cls: str, moments_of: str | None = None):
    """The candidate spec the mutant catalogue judges ``cls`` through (with the quantized moments of ``moments_of``'s
    spec instead, where given), as a file: ``candidate=`` it."""
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    declared = copy.deepcopy(SPECS[f"blockwise_8bit.{cls}"])
    if moments_of:
        declared["quantized"]["moments"] = SPECS[f"blockwise_8bit.{moments_of}"]["quantized"]["moments"]
    return spec_file(tmp_path, f"optbench.mutants.blockwise_8bit.{cls}", declared)

RUN = ["run", "suite=adamw", "dtype=float32", "checks=[parity,cross,quantized]", "impl=[candidate,for-loop]",
       "hparams=[default]", "history_dir=null", "jobs=1"]


@pytest.mark.parametrize("cls, failing", [
    ("NumpyAdamW8bit", set()),
    ("WrongBeta2AdamW8bit", {"quantized.param_max_err_eps", "quantized.absmax_max_err_eps",
                             "quantized.codes_unexplained"}),
    # its counter says 0 after every step: the check counts the steps itself (a bias correction of the first step
    # each time is caught in the parameter; the moments, and so the codes, do not depend on it)
    pytest.param("StuckStepAdamW8bit", {"quantized.param_max_err_eps"}, marks=pytest.mark.slow),  # (slow tier;
])  # CI keeps the control and the mutant above)
def test_an_8bit_adamw_is_judged_in_the_quantizers_units(tmp_path, cls, failing):
    code = 1 if failing else 0
    done = warm_command.run(*RUN, f"candidate={spec(tmp_path, cls)}", f"out_dir={tmp_path / 'out'}",
                            timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    rows = [r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
            if r["impl"].startswith("candidate:") and not r["fqn"] and r["metric"] != "run.case_s"]
    quantized = {r["metric"]: r["status"] for r in rows if r["check"] == "quantized"}
    assert {m for m, status in quantized.items() if status == "fail"} == failing, quantized
    parity = next(r for r in rows if r["metric"] == "parity.max_err_eps")
    cross = next(r for r in rows if r["check"] == "cross")
    assert parity["status"] == cross["status"] == "pass", (parity, cross)  # its 32-bit-state parameters are right
    assert "4 parameters keep quantized state" in parity["detail"]


@pytest.mark.parametrize("cls, failing", [
    ("NumpyAdamW8bitSubclassState", set()),
    ("WrongMapAdamW8bitSubclassState", {"quantized.param_max_err_eps", "quantized.absmax_max_err_eps",
                                        "quantized.codes_unexplained"}),
])
def test_moments_kept_in_tensors_carrying_codes_scale_and_map_are_read_through_their_attributes(tmp_path, cls,
                                                                                                failing):
    """torchao's layout and quantizer without torchao: state keys exp_avg.codes/.scale/.qmap, a tie rounding up, a
    floored scale, quantized state only for whole blocks; the unsigned map for the first moment is caught."""
    done = warm_command.run("run", "suite=adamw", "dtype=float32", "checks=[parity,quantized]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=0", f"candidate={spec(tmp_path, cls)}",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == (1 if failing else 0), done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    quantized = {r["metric"]: r for r in rows if r["check"] == "quantized" and r["status"] in ("pass", "fail")}
    assert {m for m, r in quantized.items() if r["status"] == "fail"} == failing, quantized
    codes = quantized["quantized.codes_unexplained"]["detail"]
    assert "of 983,040 new codes" in codes, codes  # 4 parameters (32,768 elements) x 30 steps: every one read
    assert (", 0 beyond rounding" in codes) != bool(failing) and ("; 0 map entries differ" in codes) != bool(failing)


@pytest.mark.slow  # (slow tier; CI keeps the 8-bit AdamW control and its first mutant)
def test_a_run_without_the_quantized_check_says_what_parity_leaves_out(tmp_path):
    done = warm_command.run(*[a for a in RUN if not a.startswith("checks=")], "checks=[parity]",
                            f"candidate={spec(tmp_path, 'NumpyAdamW8bit')}", f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("keeps quantized state for parameters of at least 4096 elements: parity leaves them to the quantized "
            "check, which this run does not select") in done.stdout, done.stdout
    # ... and at its end: the verdict names what went unjudged
    assert "NumpyAdamW8bit  float32" in done.stdout and "4 parameters of quantized state UNJUDGED" in done.stdout
    assert "verdict: PASS: 2 case(s) of parity verified; 1 case(s) of parity skipped" in done.stdout, done.stdout
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    assert {r["status"] for r in rows if r["metric"] == "parity.quantized_unjudged"} == {"skip"}


@pytest.mark.parametrize("cls, code", [("NumpyLion8bit", 0), ("WrongBeta1Lion8bit", 1)])
def test_an_8bit_lion_keeps_one_quantized_moment_and_is_judged_by_lions_step(tmp_path, cls, code):
    done = warm_command.run("run", "suite=lion", "dtype=float32", "checks=[quantized]", "impl=[candidate]",
                            "hparams=[weight_decay]", "history_dir=null", "jobs=1",
                            f"candidate={spec(tmp_path, cls)}", f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    rows = {r["metric"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
            if r["check"] == "quantized" and r["metric"] != "run.case_s"}
    # the wrong beta1 is in the sign the parameter steps by; the moment (beta2's) and its codes stay right
    assert rows["quantized.param_max_err_eps"]["status"] == ("pass" if code == 0 else "fail"), rows
    assert rows["quantized.absmax_max_err_eps"]["status"] == rows["quantized.codes_unexplained"]["status"] == "pass"
    assert "0 map entries differ" in rows["quantized.codes_unexplained"]["detail"]


def test_a_lion_sign_decided_by_rounding_is_left_out_and_one_decided_by_the_gradient_is_not():
    """Lion's quantized step steps each element by sign(c): where |c| lies within float32 rounding of its terms'
    magnitude the implementation's sign is its arithmetic's (left out, counted); elsewhere a flipped sign is an
    error of two updates."""
    from optbench.checks.quantized import param_error

    before = np.array([1.0, 1.0, 1.0])
    ours = before - 1e-3 * np.array([1.0, 1.0, -1.0])
    c, magnitude = np.array([1e-12, 0.5, -0.5]), np.array([1.0, 1.0, 1.0])
    flipped_at_the_tie = ours + np.array([2e-3, 0.0, 0.0])
    assert param_error(flipped_at_the_tie, ours, before, 2.0 ** -23, [(c, magnitude)]) == (0.0, 1)
    assert param_error(flipped_at_the_tie, ours, before, 2.0 ** -23)[0] > 1e3  # without the decisions: an error
    # SGD's buffer: terms of 1e-4 that cancel to an update of 1e-9 on a parameter of 1e-6; float32 rounds the update
    # at its terms' scale (50 eps of the parameter here, half an eps of the terms)
    p0, update = np.array([1e-6]), np.array([1e-9])
    rounded = p0 - update + 50 * 2.0 ** -23 * 1e-6
    assert param_error(rounded, p0 - update, p0, 2.0 ** -23)[0] > 8  # in eps of the parameter alone: past tolerance
    assert param_error(rounded, p0 - update, p0, 2.0 ** -23, update_scale=np.array([1e-4]))[0] <= 1
    flipped_elsewhere = ours + np.array([0.0, 2e-3, 0.0])
    err, left_out = param_error(flipped_elsewhere, ours, before, 2.0 ** -23, [(c, magnitude)])
    assert err > 1e3 and left_out == 1


def test_the_quantized_sgd_step_judges_only_the_sets_that_keep_a_momentum_buffer():
    """SGD keeps no state without momentum (an 8-bit SGD has nothing to quantize): such a set is not the quantized
    check's; a set with momentum is, and so is each set of the other quantized steps' suites that they model."""
    from optbench.checks.quantized import _why_not
    from optbench.suite.catalog import _load, resolve, suite_files

    def why(suite: str) -> dict:
        s = resolve(_load(suite_files()[suite]))[0]
        return {h.name: _why_not(s, h) for h in s.hparams}

    sgd = why("sgd")
    assert sgd["default"] == sgd["weight_decay"] == ("the quantized sgd step keeps state only with momentum (this set "
                                                     "has none to quantize)")
    assert sgd["momentum"] == sgd["momentum_weight_decay"] == ""
    assert sgd["nesterov"].startswith("the quantized sgd step takes lr, momentum, weight_decay (this set also has")
    assert why("lion")["weight_decay"] == "" and why("lion")["maximize"].endswith("(this set also has maximize)")


def test_quantized_parameters_no_step_can_judge_are_said_unjudged(tmp_path):
    """A spec whose moments are not its suite's quantized step's (an Adam pair for Lion) leaves the quantized
    parameters to no check: the case is unsupported, saying why, on a line of its own naming them UNJUDGED."""
    done = warm_command.run("run", "suite=lion", "dtype=float32", "checks=[parity,quantized]", "impl=[candidate]",
                            "hparams=[weight_decay]", "history_dir=null", "jobs=1",
                            f"candidate={spec(tmp_path, 'NumpyLion8bit', moments_of='NumpyAdamW8bit')}",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert ("4 parameters of quantized state UNJUDGED: its spec declares quantized exp_avg, exp_avg_sq; the quantized "
            "lion step keeps exp_avg, in that order") in done.stdout, done.stdout
    assert "1 case(s) of quantized skipped or unsupported" in done.stdout.splitlines()[-1]


def test_the_mutant_catalogue_judges_its_8bit_optimizers_through_their_spec_and_the_quantized_check():
    """``optbench mutants`` runs parity, the round-trip and each trial's ``CAUGHT_BY`` check, and for a spec declaring
    quantized state the quantized check (its controls must pass it too), with that spec."""
    from optbench.engine.mutants import trials

    found = {t.mutant: t for t in trials("optbench.mutants", None, ["adamw", "lion"])}
    eight_bit = {name: t for name, t in found.items() if name.startswith("blockwise_8bit.")}
    assert set(eight_bit) == {"blockwise_8bit." + c for c in ("NumpyAdamW8bit", "WrongBeta2AdamW8bit",
                                                              "StuckStepAdamW8bit", "MemoryOrderAdamW8bit",
                                                              "NumpyLion8bit",
                                                              "WrongBeta1Lion8bit", "NumpyAdamW8bitSubclassState",
                                                              "WrongMapAdamW8bitSubclassState")}
    for name, t in eight_bit.items():
        assert t.checks == ("parity", "roundtrip", "quantized") and t.dtype == "float32", t
        assert json.loads(t.spec)["quantized"]["moments"]["exp_avg"] == (
            ["exp_avg.codes", "exp_avg.scale", "exp_avg.qmap"] if "SubclassState" in name
            else ["state1", "absmax1", "qmap1"])
    assert found["adamw.SwappedStateDictAdamW"].checks == ("parity", "roundtrip")
    assert found["adamw.SwappedStateDictAdamW"].spec is None


@pytest.mark.parametrize("cls, code", [("NumpyLamb8bit", 0), ("NoTrustRatioLamb8bit", 1)])
def test_an_8bit_lamb_is_judged_by_lambs_step_and_one_without_its_trust_ratio_fails(tmp_path, cls, code):
    """The quantized LAMB step scales Adam's direction by the tensor's trust ratio: an 8-bit LAMB on optbench's own
    quantizer passes it with and without weight decay; the same without the ratio (Adam's step, as bitsandbytes'
    LAMB8bit takes, F72) fails the parameter while its moments' codes and absmax pass."""
    done = warm_command.run("run", "suite=lamb", "dtype=float32", "checks=[quantized]", "impl=[candidate]",
                            "hparams=[default,weight_decay_coupled]", "history_dir=null", "jobs=1",
                            f"candidate={spec(tmp_path, cls)}", f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    rows = [r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
            if r["check"] == "quantized" and r["metric"].startswith("quantized.") and r["status"] != "info"]
    assert {r["hparams"] for r in rows} == {"default", "weight_decay_coupled"}, rows
    for r in rows:
        wrong = code == 1 and r["metric"] == "quantized.param_max_err_eps"
        assert r["status"] == ("fail" if wrong else "pass"), r


def test_a_moment_may_be_one_of_a_stacked_state_tensor_and_a_malformed_key_is_refused():
    """``state1[1]`` reads the second of the moments stacked in ``state1`` (bitsandbytes' AdEMAMix8bit); a key that is
    no name or ``name[i]`` is a spec error naming it; an index past the stack reads as no quantized state."""
    import torch

    from optbench.adapters.quantized import parse, read
    from optbench.adapters.registry import CandidateSpecError

    moments = {"exp_avg": ["state1[0]", "absmax1[0]", "qmap1"], "exp_avg_slow": ["state1[1]", "absmax1[1]", "qmap1"]}
    q = parse({"scheme": "blockwise_8bit", "min_size": 1, "moments": moments}, "spec")

    class Spec:
        extra = {"quantized": q}

    codes = torch.tensor([[[1, 2]], [[3, 4]]], dtype=torch.uint8)
    state = {"state1": codes, "absmax1": torch.tensor([[0.5], [2.0]]), "qmap1": torch.linspace(-1, 1, 256), "step": 3}
    got = read(Spec, state, (1, 2))
    assert got["codes2"].tolist() == [[3, 4]] and got["absmax2"].tolist() == [2.0] and got["step"] == 3
    assert read(Spec, {**state, "state1": codes[:1]}, (1, 2)) is None
    with pytest.raises(CandidateSpecError, match=r"'state1\[x\]' is no state key"):
        parse({"scheme": "blockwise_8bit", "moments": {"exp_avg": ["state1[x]", "absmax1", "qmap1"]}}, "spec")


def test_the_price_of_quantization_is_recorded_after_each_step_and_plotted(tmp_path):
    """``quantized.price_step``: the candidate's distance from the full-precision run after every step (the last one
    the case's ``quantized.price``), drawn in report.md's plot; not in the quantized table."""
    done = warm_command.run("run", "suite=adamw", "dtype=float32", "checks=[quantized]", "impl=[candidate]",
                            "hparams=[default]", "steps=6", "history_dir=null", "jobs=1", "report.plots=true",
                            f"candidate={spec(tmp_path, 'NumpyAdamW8bit')}", f"out_dir={tmp_path / 'out'}",
                            timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    per_step = sorted((r["step"], r["value"]) for r in rows if r["metric"] == "quantized.price_step")
    assert [s for s, _ in per_step] == list(range(1, 7)) and all(v > 0 for _, v in per_step), per_step
    assert per_step[-1][1] == next(r["value"] for r in rows if r["metric"] == "quantized.price")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "![price of quantization](quantized_price.png)" in report and "quantized.price_step" not in report
    assert (tmp_path / "out" / "quantized_price.png").stat().st_size > 10_000


def test_the_candidates_conventions_reach_the_quantized_step(tmp_path):
    """A spec's ``conventions`` are the reference's options for the quantized step too, as for parity: the 8-bit LAMB
    without a trust ratio passes once its spec says ``adam: true`` (LAMB's ratio 1 by convention), and fails without."""
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    declared = {**copy.deepcopy(SPECS["blockwise_8bit.NoTrustRatioLamb8bit"]), "conventions": {"adam": True}}
    candidate = spec_file(tmp_path, "optbench.mutants.blockwise_8bit.NoTrustRatioLamb8bit", declared)
    done = warm_command.run("run", "suite=lamb", "dtype=float32", "checks=[quantized]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=1", f"candidate={candidate}",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_subclass_layout_reads_attributes_and_its_rules_are_checked():
    """``exp_avg.codes`` reads an attribute of the state tensor (None where it has none); ``whole_blocks`` leaves a
    parameter that is no whole number of blocks to parity; ``ties``, ``floor`` and ``whole_blocks`` are checked, the
    floor kept as a float32 (torchao's clip(1e-12) on a float32 absmax)."""
    import torch

    from optbench.adapters.quantized import blocks, parse, quantizes, read
    from optbench.adapters.registry import CandidateSpecError

    moments = {"exp_avg": ["exp_avg.codes", "exp_avg.scale", "exp_avg.qmap"]}
    q = parse({"scheme": "blockwise_8bit", "min_size": 4096, "whole_blocks": True, "ties": "up", "floor": 1e-12,
               "moments": moments}, "spec")

    class Spec:
        extra = {"quantized": q}

    assert blocks(q).ties == "up" and blocks(q).floor == float(np.float32(1e-12)) and int(blocks(q)) == 256
    assert quantizes(Spec, 4096) and not quantizes(Spec, 4096 + 128) and not quantizes(Spec, 2048)
    moment = torch.zeros(2)
    moment.codes, moment.scale, moment.qmap = torch.tensor([7, 9], dtype=torch.uint8), torch.ones(1), torch.zeros(256)
    got = read(Spec, {"exp_avg": moment, "step": torch.tensor(2.0)}, (2,))
    assert got["codes1"].tolist() == [7, 9] and got["absmax1"].tolist() == [1.0] and got["step"] == 2
    assert read(Spec, {"exp_avg": torch.zeros(2), "step": 1}, (2,)) is None  # no codes attribute: no quantized state
    for bad in ({"ties": "nearest"}, {"floor": -1}, {"whole_blocks": "yes"}, {"floor": True}):
        with pytest.raises(CandidateSpecError, match="ties down or up, floor a number"):
            parse({"scheme": "blockwise_8bit", "moments": moments, **bad}, "spec")


def adamw_declaring(tmp_path, deviations: list[dict]) -> None:
    """tmp_path/conf/suite/adamw.yaml: the adamw suite with only ``deviations`` declared (``--config-dir``)."""
    from omegaconf import OmegaConf

    suite = OmegaConf.load(Path(__file__).resolve().parents[1] / "suites" / "suite" / "adamw.yaml")
    suite.deviations = deviations
    (tmp_path / "conf" / "suite").mkdir(parents=True)
    OmegaConf.save(suite, tmp_path / "conf" / "suite" / "adamw.yaml")


@pytest.mark.parametrize("bound, status", [(1.0, "fail"), pytest.param(1e12, "xfail", marks=pytest.mark.slow)])
def test_a_declared_departure_of_the_quantized_parameter_covers_it_only_within_its_bound(tmp_path, bound, status):
    """A declaration for the quantized check's parameter (torchao's F73) with ``max_err_eps``: past the bound the
    departure is not the known one and fails, naming the bound; within it, an xfail (slow tier: CI keeps the bound's
    side)."""
    adamw_declaring(tmp_path, [{"finding": "F73", "impl": "candidate:*WrongBeta2AdamW8bit", "check": "quantized",
                                "tensor": "param", "max_err_eps": bound, "reason": "a test's"}])
    done = warm_command.run("run", "--config-dir", str(tmp_path / "conf"), "suite=adamw", "dtype=float32",
                            "checks=[quantized]", "impl=[candidate]", "hparams=[default]", "steps=3",
                            "history_dir=null", "jobs=0", f"candidate={spec(tmp_path, 'WrongBeta2AdamW8bit')}",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # its codes and absmax fail regardless
    got = next(r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
               if r["metric"] == "quantized.param_max_err_eps")
    assert got["status"] == status and (("declared bound of 1 eps" in got["detail"]) == (status == "fail")), got


RAISING = """
from optbench.mutants.blockwise_8bit import NumpyAdamW8bitSubclassState


class QuantizerGaveUp(RuntimeError):
    pass


class Raising8bit(NumpyAdamW8bitSubclassState):
    def step(self, closure=None):
        if RAISES and any(s.get("step", 0) >= 1 for s in self.state.values()):
            raise QuantizerGaveUp("cannot view the new moment to quantize it")
        return super().step(closure)
"""


@pytest.mark.parametrize("raises, declared, status", [  # (slow tier: the undeclared error and the stale
    (True, True, "xfail"), pytest.param(True, False, "error", marks=pytest.mark.slow),  # declaration; CI keeps
    pytest.param(False, True, "xpass", marks=pytest.mark.slow)])  # the declared raise)
def test_a_quantized_case_declared_to_raise_is_an_xfail_only_while_it_raises_that(tmp_path, raises, declared, status):
    """A library's step that raises on one hparam set (torchao's AdamW8bit at beta1 <= 0.5: F75) is declared with
    ``raises:`` for the quantized check: judged in the parent from the worker's recording, the raise is an xfail
    naming the finding; undeclared it is an error row, and a declared raise that no longer happens an xpass."""
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    (tmp_path / "raising8bit.py").write_text(f"RAISES = {raises}\n" + RAISING)
    candidate = spec_file(tmp_path, "raising8bit.Raising8bit",
                          copy.deepcopy(SPECS["blockwise_8bit.NumpyAdamW8bitSubclassState"]))
    adamw_declaring(tmp_path, [{"finding": "F75", "impl": "candidate:raising8bit.*", "check": "quantized",
                                "hparams": "default", "raises": "QuantizerGaveUp", "reason": "a test's"}]
                    if declared else [])
    done = warm_command.run("run", "--config-dir", str(tmp_path / "conf"), "suite=adamw", "dtype=float32",
                            "checks=[quantized]", "impl=[candidate]", "hparams=[default]", "steps=3",
                            "history_dir=null", "jobs=1", f"candidate={candidate}", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == (1 if status == "error" else 0), done.stdout[-3000:] + done.stderr[-3000:]
    rows = [r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
            if r["check"] == "quantized" and r["metric"] in ("quantized.raises", "case.error")]
    assert [(r["status"], r["finding"]) for r in rows] == [(status, "" if status == "error" else "F75")], rows
    if status != "xpass":
        assert "QuantizerGaveUp" in rows[0]["detail"] and "cannot view the new moment" in rows[0]["detail"], rows


@pytest.mark.parametrize("cls, code, statuses", [
    ("MemoryOrderAdamW8bit", 0, {"": {"pass"}, "kind noncontiguous": {"xfail"}}),
    # the same declaration on a mutant wrong everywhere: its other parameters still fail
    ("WrongBeta2AdamW8bit", 1, {"": {"fail"}, "kind noncontiguous": {"xfail"}}),
], ids=["memory-order", "wrong-everywhere"])
def test_parameters_a_declaration_names_are_judged_apart_under_it(tmp_path, cls, code, statuses):
    """A quantized-check declaration that names parameters (``kind: noncontiguous``: bitsandbytes' transposed
    parameters on CUDA, F77) judges those apart, under it, and every other parameter as before: a mutant whose
    codes are held in memory order passes on its contiguous parameters and is the declared xfail on the others."""
    adamw_declaring(tmp_path, [{"finding": "F77", "impl": f"candidate:*{cls}", "check": "quantized",
                                "kind": "noncontiguous", "reason": "a test's"}])
    done = warm_command.run("run", "--config-dir", str(tmp_path / "conf"), "suite=adamw", "dtype=float32",
                            "checks=[quantized]", "impl=[candidate]", "hparams=[default]", "steps=4",
                            "history_dir=null", "jobs=0", f"candidate={spec(tmp_path, cls)}",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]
    got: dict = {}
    for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]:
        if r["metric"].startswith("quantized.") and r["status"] != "info":
            got.setdefault(r["fqn"], set()).add(r["status"])
    assert got == statuses, got
