"""4-bit (codes two a byte) and FP8 (float8_e4m3fn codes, no map) state in the quantized check, without torchao: the
mutant catalogue's AdamW in torchao's two layouts (``optbench/mutants/low_bit.py``, each moment a wrapping tensor
subclass) passes the quantized check and every round-trip scenario; nibbles packed the other way round and FP8 codes
rounded toward zero fail it. How each layout is read (``optbench.adapters.quantized.read``), and what the check
refuses to step from."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests import warm_command


def spec(tmp_path, cls: str):
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    return spec_file(tmp_path, f"optbench.mutants.low_bit.{cls}", SPECS[f"low_bit.{cls}"])


@pytest.mark.parametrize("cls, failing", [
    ("NumpyAdamW4bitSubclassState", set()),
    ("SwappedNibblesAdamW4bit", {"quantized.param_max_err_eps", "quantized.absmax_max_err_eps",
                                 "quantized.codes_unexplained"}),
    ("NumpyAdamWFp8SubclassState", set()),
    ("TruncatingAdamWFp8", {"quantized.codes_unexplained"}),
])
def test_4bit_and_fp8_state_is_judged_in_the_quantizers_units_and_round_trips(tmp_path, cls, failing):
    done = warm_command.run("run", "suite=adamw", "dtype=float32", "checks=[quantized,roundtrip]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=0", "roundtrip.every_dtype=[]",
                            f"candidate={spec(tmp_path, cls)}", f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == (1 if failing else 0), done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    quantized = {r["metric"]: r for r in rows if r["check"] == "quantized" and r["status"] in ("pass", "fail")}
    assert {m for m, r in quantized.items() if r["status"] == "fail"} == failing, quantized
    codes = quantized["quantized.codes_unexplained"]["detail"]
    assert "of 983,040 new codes" in codes, codes  # 4 parameters (32,768 elements) x 30 steps: every one read
    assert (", 0 beyond rounding" in codes) != bool(failing)
    scenarios = {r["metric"]: r["status"] for r in rows if r["check"] == "roundtrip"
                 and r["metric"].startswith("roundtrip.") and not r["metric"].startswith("roundtrip.positional")}
    assert scenarios["roundtrip.same_order"] == "pass" and set(scenarios.values()) <= {"pass", "skip"}, scenarios


class Spec:
    def __init__(self, scheme: str, blocksize: int):
        from optbench.adapters.quantized import parse

        keys = ["codes", "scale"] if scheme == "blockwise_fp8" else ["codes", "scale", "qmap"]
        self.extra = {"quantized": parse({"scheme": scheme, "blocksize": blocksize, "moments": {
            "exp_avg": [f"exp_avg.{k}" for k in keys]}}, "spec")}


def moment(codes, scale, qmap=None):
    m = torch.zeros(1)
    m.codes, m.scale, m.qmap = codes, scale, qmap
    return m


def test_4bit_codes_are_unpacked_high_nibble_first_into_the_parameters_shape():
    from optbench.adapters.quantized import read

    spec4 = Spec("blockwise_4bit", 2)
    packed = torch.tensor([0x1F, 0xA0], dtype=torch.uint8)
    got = read(spec4, {"exp_avg": moment(packed, torch.tensor([2.0, 3.0]), torch.linspace(0, 1, 16)), "step": 1},
               (2, 2))
    assert got["codes1"].tolist() == [[1, 15], [10, 0]] and got["absmax1"].tolist() == [2.0, 3.0]
    assert got["map1"].size == 16
    assert read(spec4, {"exp_avg": moment(packed, torch.ones(2), torch.zeros(16)), "step": 1}, (2, 3)) is None


def test_fp8_codes_read_as_the_index_of_their_value_and_the_scale_times_448():
    from optbench.adapters.quantized import read
    from optbench.reference._float8 import normalized_map

    values = torch.tensor([-448.0, -0.0, 0.0, 2.0 ** -9, 448.0]).to(torch.float8_e4m3fn)
    got = read(Spec("blockwise_fp8", 5), {"exp_avg": moment(values, torch.tensor([0.5])), "step": 4}, (5,))
    assert np.array_equal(got["map1"], normalized_map()) and got["absmax1"].tolist() == [224.0]
    assert got["codes1"].tolist() == [0, 126, 126, 127, 252]  # -0 is 0's index
    np.testing.assert_array_equal(got["map1"][got["codes1"]] * 448, values.double().numpy())
    as_uint8 = moment(values.view(torch.uint8), torch.tensor([0.5]))  # FP8 codes must be float8_e4m3fn
    assert read(Spec("blockwise_fp8", 5), {"exp_avg": as_uint8, "step": 4}, (5,)) is None


def test_the_schemes_keys_per_moment_are_checked():
    from optbench.adapters.quantized import parse
    from optbench.adapters.registry import CandidateSpecError

    with pytest.raises(CandidateSpecError, match=r"its \[codes, scale\] state keys"):
        parse({"scheme": "blockwise_fp8", "moments": {"exp_avg": ["a.codes", "a.scale", "a.qmap"]}}, "spec")
    with pytest.raises(CandidateSpecError, match=r"its \[codes, absmax, map\] state keys"):
        parse({"scheme": "blockwise_4bit", "moments": {"exp_avg": ["a.codes", "a.scale"]}}, "spec")
    with pytest.raises(CandidateSpecError, match="quantized.full_precision=3: a class's dotted path"):
        parse({"scheme": "blockwise_8bit", "moments": {"exp_avg": ["a", "b", "c"]}, "full_precision": 3}, "spec")
    with pytest.raises(CandidateSpecError, match="one of blockwise_8bit, blockwise_4bit, blockwise_fp8"):
        parse({"scheme": "nf4", "moments": {"exp_avg": ["a", "b", "c"]}}, "spec")


def test_codes_past_the_map_or_scales_not_one_per_block_are_refused_not_stepped_from():
    """A NaN FP8 code (index 255 of a 253-entry map) or a scale per tensor instead of per block: the check raises
    (an error row), where the reference's step would index past its map or misplace every scale."""
    from optbench.checks.quantized import _check_layout
    from optbench.reference._blockwise_8bit_step import STEPS

    maps = STEPS["adamw"].maps("blockwise_fp8")
    good = {"codes1": np.zeros(512, np.uint8), "absmax1": np.ones(2), "codes2": np.zeros(512, np.uint8),
            "absmax2": np.ones(2)}
    _check_layout(good, maps, 512, 256, "w")
    with pytest.raises(ValueError, match="code 255, past its map's 253 entries"):
        _check_layout({**good, "codes2": np.full(512, 255, np.uint8)}, maps, 512, 256, "w")
    with pytest.raises(ValueError, match="1 scales, where blocks of 256 make 2"):
        _check_layout({**good, "absmax1": np.ones(1)}, maps, 512, 256, "w")


def test_each_schemes_maps_are_the_documented_ones():
    from optbench.reference._blockwise_8bit_step import scheme_map
    from optbench.reference._float8 import decode, map_codes, map_index, normalized_map
    from optbench.reference._quantization import dynamic_map, linear_map

    assert np.array_equal(scheme_map("blockwise_8bit", False), dynamic_map(False))
    assert np.array_equal(scheme_map("blockwise_4bit", True), dynamic_map(True, bits=4))
    assert np.array_equal(scheme_map("blockwise_4bit", False), linear_map(16))
    fp8 = scheme_map("blockwise_fp8", True)
    assert fp8.size == 253 and np.all(np.diff(fp8) > 0) and fp8[0] == -1 and fp8[-1] == 1
    assert np.array_equal(fp8, normalized_map())
    every = np.arange(256, dtype=np.uint8)
    finite = (every & 0x7F) != 0x7F
    np.testing.assert_array_equal(fp8[map_index(every[finite])] * 448, decode(every[finite]))
    assert np.all(map_index(map_codes(np.arange(253))) == np.arange(253))


@pytest.mark.parametrize("full, into, from_, says", [
    ("NumpyAdamW32bit", "pass", "pass", "holding it as"),
    ("RefusingAdamW32bit", "pass", "pass", "refused the load: ValueError: 8-bit state"),
    ("CodesAsMomentsAdamW32bit", "fail", "pass", "held as another dtype"),  # codes read as moments: silently wrong
    ("torch.optim.AdamW", "fail", "pass", "then its step raised KeyError"),  # takes the 8-bit state, cannot step it
])
def test_quantized_state_loaded_into_the_full_precision_class_continues_as_saved_or_is_refused(tmp_path, full,
                                                                                                  into, from_, says):
    """``quantized.full_precision``: the 8-bit candidate's state loaded into that class (and that class's into the
    candidate) must continue as the saving class's uninterrupted run, or the load must refuse; a class that takes
    the state and steps it wrong, or takes it and then cannot step, fails."""
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    declared = json.loads(json.dumps(SPECS["blockwise_8bit.NumpyAdamW8bit"]))
    declared["quantized"]["full_precision"] = full if "." in full else f"optbench.mutants.full_precision.{full}"
    path = spec_file(tmp_path, "optbench.mutants.blockwise_8bit.NumpyAdamW8bit", declared)
    done = warm_command.run("run", "suite=adamw", "dtype=float32", "checks=[roundtrip]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=0", "roundtrip.every_dtype=[]",
                            "roundtrip.scenarios=[into_full_precision,from_full_precision]", f"candidate={path}",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == (1 if "fail" in (into, from_) else 0), done.stdout + done.stderr
    rows = {r["metric"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
            if r["check"] == "roundtrip" and "full_precision" in r["metric"]}
    assert (rows["roundtrip.into_full_precision"]["status"], rows["roundtrip.from_full_precision"]["status"]) == (
        into, from_), rows
    assert says in rows["roundtrip.into_full_precision"]["detail"], rows["roundtrip.into_full_precision"]["detail"]


def test_the_full_precision_scenarios_concern_only_a_candidate_that_names_its_full_precision_class(tmp_path):
    done = warm_command.run("run", "suite=adamw", "dtype=float32", "checks=[roundtrip]", "impl=[for-loop]",
                            "hparams=[default]", "history_dir=null", "jobs=0", "roundtrip.every_dtype=[]",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = {r["metric"] for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]}
    assert "roundtrip.same_order" in metrics and not any("full_precision" in m for m in metrics)


@pytest.mark.parametrize("cls, worst", [
    ("PerTensorAbsmaxAdamW8bit", "absmax"),  # one absmax for the whole tensor
    ("Blocks512AdamW8bit", "absmax"),  # blocks of 512 where the spec says 256
    ("StaleAbsmaxAdamW8bit", "absmax"),  # quantized with the absmax the step began with
    ("UnquantizedMomentAdamW8bit", "param"),  # the first moment kept in full precision between steps
])
def test_a_wrong_quantizer_fails_the_quantized_check(tmp_path, cls, worst):
    from optbench.engine.mutants import spec_file
    from optbench.mutants import SPECS

    path = spec_file(tmp_path, f"optbench.mutants.blockwise_8bit_quantizer.{cls}",
                     SPECS[f"blockwise_8bit_quantizer.{cls}"])
    done = warm_command.run("run", "suite=adamw", "dtype=float32", "checks=[quantized]", "impl=[candidate]",
                            "hparams=[default]", "history_dir=null", "jobs=0", f"candidate={path}",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    failing = {r["metric"] for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
               if r["check"] == "quantized" and r["status"] == "fail"}
    assert {f"quantized.{worst}_max_err_eps", "quantized.codes_unexplained"} <= failing, failing
