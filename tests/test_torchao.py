"""torchao's low-bit AdamW (8-bit, 4-bit, FP8) judged as a user runs it (``optbench run suite=adamw
candidate=torchao.optim.AdamW8bit``, ``AdamW4bit``, ``AdamWFp8``): its moments, kept in tensor subclasses, read
through their codes, scales and map, judged in the quantizer's units, carried through every round-trip scenario bit
for bit, and counted at their real size; its own findings declared (F73, F74); a wrong step and a wrong quantizer
fail (tests skip without torchao, which the test extra does not install)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import warm_command

pytest.importorskip("torchao.optim")

RUN = ["run", "suite=adamw", "dtype=float32", "impl=[candidate]", "hparams=[default]", "history_dir=null", "jobs=1",
       "steps=6"]

def spec_of(cls: str, as_class: str) -> str:
    """The adamw suite's adapter of torchao's ``cls``, as a spec file's text naming ``as_class``."""
    from omegaconf import OmegaConf

    suite = OmegaConf.load(Path(__file__).resolve().parents[1] / "suites" / "suite" / "adamw.yaml")
    entry = next(c for c in suite.candidates if c["class"] == f"torchao.optim.{cls}")
    return OmegaConf.to_yaml({**OmegaConf.to_container(entry), "class": as_class})


LR_TIMES_1_1 = """
class {cls}(torchao.optim.{cls}):  # torchao holds lr as a tensor in its groups
    def step(self, closure=None):
        for g in self.param_groups:
            g["lr"].mul_(1.1)
        out = super().step(closure)
        for g in self.param_groups:
            g["lr"].div_(1.1)
        return out
"""
CODES_DOWN = """
class {cls}(torchao.optim.{cls}):
    def step(self, closure=None):
        out = super().step(closure)
        for state in self.state.values():
            m = state.get("exp_avg")
            codes = getattr(m, "codes", None)
            if codes is not None:  # uint8 codes (4-bit: the byte of two), or FP8's bit patterns (never to NaN)
                bits = codes.view(torch.uint8)
                bits.copy_(torch.where((bits & 0x7F) > 0, bits - 1, bits))
        return out
"""
MUTANTS = {  # how a class of torchao's is made wrong -> the metric that must fail
    "steps with 1.1 times its lr": (LR_TIMES_1_1, "quantized.param_max_err_eps"),
    "moves the first moment's codes one down": (CODES_DOWN, "quantized.codes_unexplained"),
}
CLASSES = {"AdamW8bit": (2.0, 2.6), "AdamW4bit": (1.0, 1.3), "AdamWFp8": (2.0, 2.6)}  # -> its state's B/param


def rows_of(out) -> list[dict]:
    return json.loads((out / "results.json").read_text())["rows"]


@pytest.mark.parametrize("cls", list(CLASSES))
def test_torchao_low_bit_adamw_is_judged_in_the_quantizers_units_with_its_findings_declared(tmp_path, cls):
    done = warm_command.run(*RUN, f"candidate=torchao.optim.{cls}", "checks=[quantized,roundtrip,memory,errors]",
                            "roundtrip.every_dtype=[]", f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = rows_of(tmp_path / "out")
    quantized = {r["metric"]: (r["status"], r["finding"]) for r in rows if r["check"] == "quantized"
                 and r["status"] != "info" and r["metric"] != "run.case_s"}
    assert quantized == {"quantized.param_max_err_eps": ("xfail", "F73"), "quantized.absmax_max_err_eps": ("pass", ""),
                         "quantized.codes_unexplained": ("pass", "")}, quantized
    scenarios = {r["metric"]: (r["status"], r["detail"]) for r in rows if r["check"] == "roundtrip"
                 and r["metric"].startswith("roundtrip.") and not r["metric"].startswith("roundtrip.positional")}
    assert scenarios and {s for s, _ in scenarios.values()} <= {"pass", "skip"}, scenarios
    assert scenarios["roundtrip.same_order"][0] == "pass"
    # its full-precision _AdamW takes the quantized state and steps it as it is, and the other way round
    assert "holding it as" in scenarios["roundtrip.into_full_precision"][1], scenarios
    state = next(r for r in rows if r["check"] == "memory" and r["metric"] == "mem.state_bytes_per_param")
    low, high = CLASSES[cls]
    assert low <= state["value"] < high, state  # codes, a float32 scale per block, the maps
    errors = {r["finding"] for r in rows if r["check"] == "errors" and r["status"] == "xfail"}
    assert errors == {"F74"}, [r for r in rows if r["check"] == "errors" and r["status"] != "pass"]


@pytest.mark.parametrize("cls", list(CLASSES))
@pytest.mark.parametrize("how", list(MUTANTS))
def test_a_wrong_torchao_low_bit_optimizer_fails_the_quantized_check(tmp_path, how, cls):
    code, metric = MUTANTS[how]
    (tmp_path / "wrongao.py").write_text("import torch\nimport torchao.optim\n" + code.format(cls=cls))
    (tmp_path / "wrongao.yaml").write_text(spec_of(cls, f"wrongao.{cls}"))
    done = warm_command.run(*RUN, "candidate=wrongao.yaml", "checks=[quantized]", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=900)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    failing = {r["metric"] for r in rows_of(tmp_path / "out") if r["check"] == "quantized" and r["status"] == "fail"}
    assert metric in failing, failing


def test_torchao_adamw_rounding_bfloat16_stochastically_is_judged_in_distribution(tmp_path):
    """docs/specs/torchao_adamw_bf16_sr.yaml: its first step drawn many times from one start, the roundings judged
    in distribution (the stochastic check), its trajectory by parity."""
    spec = Path(__file__).resolve().parents[1] / "docs" / "specs" / "torchao_adamw_bf16_sr.yaml"
    done = warm_command.run("run", "suite=adamw", "dtype=bfloat16", "impl=[candidate]", "hparams=[default]",
                            "history_dir=null", "jobs=1", f"candidate={spec}", "checks=[parity,stochastic]",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    stochastic = {r["metric"]: r["status"] for r in rows_of(tmp_path / "out") if r["check"] == "stochastic"
                  and r["metric"].startswith("stochastic.")}
    assert stochastic == dict.fromkeys(["stochastic.not_neighbours", "stochastic.elements_failing",
                                        "stochastic.bias_z"], "pass"), stochastic
