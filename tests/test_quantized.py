"""The quantized check: a candidate keeping 8-bit block-wise state (bitsandbytes' AdamW8bit) judged one step at a time
from its own codes, in the quantizer's units, by the parent; each deliberately wrong 8-bit optimizer fails it (tests
skip without bitsandbytes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optbench.checks.quantized import _taken_in
from optbench.workloads import build
from tests import warm_command

pytest.importorskip("bitsandbytes")

RUN = ["run", "suite=adamw", "dtype=float32", "checks=[quantized]", "impl=[candidate]", "hparams=[default]",
       "history_dir=null", "jobs=1"]

MUTANTS = {  # a module defining AdamW8bit wrong in one way -> the metric that must fail
    "steps with another beta2": ("""
class AdamW8bit(bnb.optim.AdamW8bit):
    def step(self, closure=None):
        kept = [g["betas"] for g in self.param_groups]
        for g in self.param_groups:
            g["betas"] = (g["betas"][0], 0.99)
        try:
            return super().step(closure)
        finally:
            for g, b in zip(self.param_groups, kept):
                g["betas"] = b
""", "quantized.param_max_err_eps"),
    "rounds the second moment's codes down": ("""
class AdamW8bit(bnb.optim.AdamW8bit):
    def step(self, closure=None):
        out = super().step(closure)
        for state in self.state.values():
            codes = state.get("state2")
            if codes is not None and codes.dtype == torch.uint8:
                codes[codes > 0] -= 1  # the entry below the nearest: floor where it should round
        return out
""", "quantized.codes_unexplained"),
    "scales the absmax": ("""
class AdamW8bit(bnb.optim.AdamW8bit):
    def step(self, closure=None):
        out = super().step(closure)
        for state in self.state.values():
            if "absmax1" in state:
                state["absmax1"].mul_(1.01)
        return out
""", "quantized.absmax_max_err_eps"),
}


SPEC = """
class: wrong8bit.AdamW8bit
dtypes: [float32, bfloat16, float16]
state: {keys: {state1: exp_avg, state2: exp_avg_sq}}
quantized:
  scheme: blockwise_8bit
  blocksize: 256
  min_size: 4096
  grid: 65536
  moments: {exp_avg: [state1, absmax1, qmap1], exp_avg_sq: [state2, absmax2, qmap2]}
"""


def rows_of(out) -> dict:
    rows = json.loads((out / "results.json").read_text())["rows"]
    return {r["metric"]: r for r in rows if r["check"] == "quantized" and r["metric"] != "run.case_s"}


def test_bitsandbytes_adamw8bit_passes_in_the_quantizers_units(tmp_path):
    done = warm_command.run(*RUN, "candidate=bitsandbytes.optim.AdamW8bit", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    got = rows_of(tmp_path / "out")
    assert {m: r["status"] for m, r in got.items()} == {"quantized.param_max_err_eps": "pass",
                                                       "quantized.absmax_max_err_eps": "pass",
                                                       "quantized.codes_unexplained": "pass",
                                                       "quantized.price": "info", "quantized.spread": "info",
                                                       "quantized.price_step": "info"}, got
    assert 0 < got["quantized.price"]["value"] < 0.5, got["quantized.price"]  # a few percent of the updates
    differ = int(got["quantized.codes_unexplained"]["detail"].split(" of ")[0].replace(",", ""))
    assert differ > 0  # codes off by its quantizer's rounding only: the tolerance for them is exercised


@pytest.mark.parametrize("how", list(MUTANTS))
def test_a_wrong_8bit_optimizer_fails_the_quantized_check(tmp_path, how):
    code, metric = MUTANTS[how]
    (tmp_path / "wrong8bit.py").write_text("import torch\nimport bitsandbytes as bnb\n" + code)
    (tmp_path / "wrong8bit.yaml").write_text(SPEC)  # bitsandbytes' own spec, for the subclass
    done = warm_command.run(*RUN, "candidate=wrong8bit.yaml", f"out_dir={tmp_path / 'out'}", cwd=tmp_path,
                            timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert rows_of(tmp_path / "out")[metric]["status"] == "fail", rows_of(tmp_path / "out")


def test_a_recorded_step_with_codes_that_are_no_uint8_codes_is_refused():
    workload = build("transformer", seed=0, steps=2, width=32, layers=1, vocab=64,
                     grad_log10_range=(-8, 2)).restricted(lambda s: s.numel >= 4096)
    spec = workload.specs[0]

    def state(shape):
        return {"codes1": np.zeros(shape), "absmax1": np.ones(16), "map1": np.ones(256), "codes2": np.zeros(shape),
                "absmax2": np.ones(16), "map2": np.ones(256), "step": np.asarray(1)}
    good = state(spec.shape)
    step = {s.name: {"param": np.zeros(s.shape), "state": state(s.shape)} for s in workload.specs}
    assert _taken_in(step, workload)[spec.name]["state"]["codes1"].dtype == np.uint8
    with pytest.raises(ValueError, match="not uint8 codes"):
        half = {**good, "codes1": good["codes1"] + 0.5}
        _taken_in({**step, spec.name: {"param": np.zeros(spec.shape), "state": half}}, workload)
    with pytest.raises(ValueError, match="another shape"):
        _taken_in({**step, spec.name: {"param": np.zeros(3), "state": good}}, workload)
    with pytest.raises(ValueError, match="codes3 are not uint8 codes"):  # every moment's codes, not the first two
        third = {**good, "codes3": good["codes1"] + 0.5, "absmax3": np.ones(16), "map3": np.ones(256)}
        _taken_in({**step, spec.name: {"param": np.zeros(spec.shape), "state": third}}, workload)


def test_parity_and_cross_judge_its_32bit_state_parameters_and_name_the_others(tmp_path):
    """The parameters whose state is quantized are left to the quantized check, and said to be: parity's verdict and
    cross's comparison with the for-loop cover the others (else cross would compare tensors of one side only)."""
    done = warm_command.run(*[a for a in RUN if a not in ("checks=[quantized]", "impl=[candidate]")],
                            "checks=[parity,cross,quantized]", "candidate=bitsandbytes.optim.AdamW8bit",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
            if r["impl"] == "candidate:bitsandbytes.optim.AdamW8bit" and not r["fqn"]]
    parity = next(r for r in rows if r["metric"] == "parity.max_err_eps")
    cross = next(r for r in rows if r["check"] == "cross" and r["metric"] != "run.case_s")
    assert "4 parameters keep quantized state, judged by the quantized check instead" in parity["detail"], parity
    assert cross["status"] == "pass" and "4 parameters' quantized state left to the quantized check" in cross["detail"]


def test_adam8bit_is_judged_with_adams_l2_step_and_its_decoupled_decay_is_f56(tmp_path):
    """suite=adam's quantized step adds the L2 term to the gradient: bitsandbytes' Adam8bit, which decays as its
    AdamW8bit does (bit for bit), is the declared F56 there (xfail), and passes without weight decay."""
    done = warm_command.run(*[a for a in RUN if a not in ("suite=adamw", "hparams=[default]")], "suite=adam",
                            "hparams=[default,weight_decay]", "candidate=bitsandbytes.optim.Adam8bit",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    seen = {(r["hparams"], r["status"], r["finding"]) for r in rows if r["metric"] == "quantized.param_max_err_eps"}
    assert seen == {("default", "pass", ""), ("weight_decay", "xfail", "F56")}, seen


LION_SPEC = """
class: wronglion.Lion8bit
dtypes: [float32, bfloat16, float16]
state: {keys: {state1: exp_avg}, ignore: [step]}
quantized: {scheme: blockwise_8bit, blocksize: 256, min_size: 4096, grid: 65536,
            moments: {exp_avg: [state1, absmax1, qmap1]}}
"""
WRONG_BETAS = """
class {name}(bnb.optim.{name}):  # steps with other betas than its param groups hold
    def step(self, closure=None):
        kept = [g["betas"] for g in self.param_groups]
        for g in self.param_groups:
            g["betas"] = {betas}
        try:
            return super().step(closure)
        finally:
            for g, b in zip(self.param_groups, kept):
                g["betas"] = b
"""
WRONG_LION = WRONG_BETAS.format(name="Lion8bit", betas='(0.5, g["betas"][1])')  # the sign's interpolation: beta1 0.5

def test_bitsandbytes_lion8bit_is_judged_by_lions_step_and_a_wrong_one_fails(tmp_path):
    """Lion8bit keeps one quantized moment: judged by the quantized Lion step (its sign from the dequantized moment)
    at float32 and bfloat16 over the suite's sets it takes; the same class stepping with another beta1 fails."""
    lion = [a for a in RUN if a not in ("suite=adamw", "hparams=[default]", "dtype=float32")]
    done = warm_command.run(*lion, "suite=lion", "dtype=[float32,bfloat16]", "hparams=[default,weight_decay,groups]",
                            "candidate=bitsandbytes.optim.Lion8bit", f"out_dir={tmp_path / 'out'}", cwd=tmp_path,
                            timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    verdicts = {(r["dtype"], r["hparams"], r["metric"]): r["status"] for r in rows
                if r["check"] == "quantized" and r["status"] not in ("info",) and r["metric"] != "run.case_s"}
    assert len(verdicts) == 2 * 3 * 3 and set(verdicts.values()) == {"pass"}, verdicts
    (tmp_path / "wronglion.py").write_text("import bitsandbytes as bnb\n" + WRONG_LION)
    (tmp_path / "wronglion.yaml").write_text(LION_SPEC)
    done = warm_command.run(*lion, "suite=lion", "dtype=float32", "hparams=[default]", "candidate=wronglion.yaml",
                            f"out_dir={tmp_path / 'wrong'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert rows_of(tmp_path / "wrong")["quantized.param_max_err_eps"]["status"] == "fail"

# momentum 0.1 below the one asked (bitsandbytes' SGD keeps it as betas[0])
WRONG_SGD = WRONG_BETAS.format(name="SGD8bit", betas='(g["betas"][0] - 0.1, g["betas"][1])')

def test_bitsandbytes_sgd8bit_is_judged_by_the_momentum_step_where_it_keeps_a_buffer(tmp_path):
    """SGD8bit keeps its momentum buffer quantized: judged at every dtype it takes on the sets with momentum (its
    update's terms can cancel: the tolerance scales with them, not with the cancelled update); a set without momentum
    has no state to quantize and says so; stepping with momentum 0.8 where 0.9 is asked fails the parameter."""
    sgd = [a for a in RUN if a not in ("suite=adamw", "hparams=[default]", "dtype=float32")]
    done = warm_command.run(*sgd, "suite=sgd", "dtype=[float32,bfloat16,float16]",
                            "hparams=[default,momentum,momentum_weight_decay]", "candidate=bitsandbytes.optim.SGD8bit",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    judged = {(r["dtype"], r["hparams"], r["metric"]): r["status"] for r in rows
              if r["check"] == "quantized" and r["metric"].startswith("quantized.") and r["status"] != "info"}
    assert len(judged) == 3 * 2 * 3 and set(judged.values()) == {"pass"}, judged
    assert {r["detail"] for r in rows if r["check"] == "quantized" and r["hparams"] == "default"
            and r["metric"] == "case.skipped"} == {
        "the quantized sgd step keeps state only with momentum (this set has none to quantize)"}
    (tmp_path / "wrongsgd.py").write_text("import bitsandbytes as bnb\n" + WRONG_SGD)
    (tmp_path / "wrongsgd.yaml").write_text(LION_SPEC.replace("wronglion.Lion8bit", "wrongsgd.SGD8bit")
                                            .replace("exp_avg", "momentum_buffer"))
    done = warm_command.run(*sgd, "suite=sgd", "dtype=float32", "hparams=[momentum]", "candidate=wrongsgd.yaml",
                            f"out_dir={tmp_path / 'wrong'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert rows_of(tmp_path / "wrong")["quantized.param_max_err_eps"]["status"] == "fail"

# the second moment's decay 0.1 below the one asked (bitsandbytes' RMSprop keeps alpha as betas[0])
WRONG_RMSPROP = WRONG_BETAS.format(name="RMSprop8bit", betas='(g["betas"][0] - 0.1, g["betas"][1])')
# a class that steps with one option scaled from what its param groups hold
SCALED_OPTION = """
class {name}(bnb.optim.{name}):  # steps with {factor} times the {option} its param groups hold
    def step(self, closure=None):
        for g in self.param_groups:
            g["{option}"] *= {factor}
        try:
            return super().step(closure)
        finally:
            for g in self.param_groups:
                g["{option}"] /= {factor}
"""
WRONG_ADAGRAD = SCALED_OPTION.format(name="Adagrad8bit", option="lr", factor=1.1)


@pytest.mark.parametrize("suite, name, moment, wrong", [("rmsprop", "RMSprop8bit", "square_avg", WRONG_RMSPROP),
                                                        ("adagrad", "Adagrad8bit", "sum", WRONG_ADAGRAD)])
def test_bitsandbytes_one_state_8bit_optimizers_are_judged_by_their_step_and_a_wrong_one_fails(tmp_path, suite, name,
                                                                                               moment, wrong):
    """RMSprop8bit and Adagrad8bit keep one quantized state on the signed map: judged by the quantized RMSprop and
    Adagrad steps at float32 and bfloat16 with and without weight decay (where the gradient and the decay cancel,
    rounding decides the step and the tolerance scales with the terms); a wrong alpha or lr fails the parameter."""
    args = [a for a in RUN if a not in ("suite=adamw", "hparams=[default]", "dtype=float32")]
    done = warm_command.run(*args, f"suite={suite}", "dtype=[float32,bfloat16]", "hparams=[default,weight_decay]",
                            f"candidate=bitsandbytes.optim.{name}", f"out_dir={tmp_path / 'out'}", cwd=tmp_path,
                            timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    judged = {(r["dtype"], r["hparams"], r["metric"]): r["status"] for r in rows
              if r["check"] == "quantized" and r["metric"].startswith("quantized.") and r["status"] != "info"}
    cases = {(dtype, hparams) for dtype, hparams, _ in judged}  # rmsprop's weight_decay set: float32 only (its note)
    assert {("float32", "default"), ("float32", "weight_decay"), ("bfloat16", "default")} <= cases, judged
    assert len(judged) == 3 * len(cases) and set(judged.values()) == {"pass"}, judged
    (tmp_path / "wrong1state.py").write_text("import bitsandbytes as bnb\n" + wrong)
    (tmp_path / "wrong1state.yaml").write_text(LION_SPEC.replace("wronglion.Lion8bit", f"wrong1state.{name}")
                                               .replace("exp_avg", moment))
    done = warm_command.run(*args, f"suite={suite}", "dtype=float32", "hparams=[default]",
                            "candidate=wrong1state.yaml", f"out_dir={tmp_path / 'wrong'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert rows_of(tmp_path / "wrong")["quantized.param_max_err_eps"]["status"] == "fail"


WRONG_ADEMAMIX = SCALED_OPTION.format(name="AdEMAMix8bit", option="alpha", factor=2.0)  # the slow EMA mixed in twice
ADEMAMIX_SPEC = """
class: wrongmix.AdEMAMix8bit
dtypes: [float32, bfloat16]
conventions: {weight_decouple: true}
rename: {t_alpha_beta3: {each: [t_alpha, t_beta3]}}
state: {decode: optbench.adapters.libraries.bitsandbytes.ademamix}
quantized:
  scheme: blockwise_8bit
  blocksize: 256
  min_size: 4096
  grid: 65536
  moments: {exp_avg: ["state1[0]", "absmax1[0]", qmap1], exp_avg_slow: ["state1[1]", "absmax1[1]", qmap1],
            exp_avg_sq: [state2, absmax2, qmap2]}
"""


def test_bitsandbytes_ademamix8bit_is_judged_from_its_stacked_emas_and_a_wrong_one_fails(tmp_path):
    """AdEMAMix8bit keeps its two EMAs stacked in one uint8 state1 (state1[0], state1[1] in its spec): judged by the
    quantized AdEMAMix step, schedulers included; a set asking for a decay its class fixes otherwise is unsupported,
    saying so; mixing in the slow EMA with twice the alpha fails the parameter, not the moments."""
    args = [a for a in RUN if a not in ("suite=adamw", "hparams=[default]")]
    done = warm_command.run(*args, "suite=ademamix", "hparams=[default,schedule,weight_decay,weight_decay_l2]",
                            "candidate=bitsandbytes.optim.AdEMAMix8bit", f"out_dir={tmp_path / 'out'}", cwd=tmp_path,
                            timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    judged = {(r["hparams"], r["metric"]): r["status"] for r in rows
              if r["check"] == "quantized" and r["metric"].startswith("quantized.") and r["status"] != "info"}
    assert len(judged) == 3 * 3 and set(judged.values()) == {"pass"}, judged
    assert next(r["detail"] for r in rows if r["hparams"] == "weight_decay_l2" and r["check"] == "quantized").endswith(
        "its class always does weight_decouple=True (conventions)")
    (tmp_path / "wrongmix.py").write_text("import bitsandbytes as bnb\n" + WRONG_ADEMAMIX)
    (tmp_path / "wrongmix.yaml").write_text(ADEMAMIX_SPEC)
    done = warm_command.run(*args, "suite=ademamix", "hparams=[default]", "candidate=wrongmix.yaml",
                            f"out_dir={tmp_path / 'wrong'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    wrong = rows_of(tmp_path / "wrong")
    assert wrong["quantized.param_max_err_eps"]["status"] == "fail"
    assert wrong["quantized.codes_unexplained"]["status"] == wrong["quantized.absmax_max_err_eps"]["status"] == "pass"


def test_bitsandbytes_lamb8bit_is_adamw8bit_on_its_8bit_parameters_f72(tmp_path):
    """LAMB8bit's 8-bit parameters step with no trust ratio: the parameter's row is the declared F72 (xfail), while
    its moments, Adam's, pass their absmax and codes rows (the declaration names tensor param)."""
    args = [a for a in RUN if a not in ("suite=adamw",)]
    done = warm_command.run(*args, "suite=lamb", "candidate=bitsandbytes.optim.LAMB8bit",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    got = rows_of(tmp_path / "out")
    assert (got["quantized.param_max_err_eps"]["status"], got["quantized.param_max_err_eps"]["finding"]) == (
        "xfail", "F72"), got
    assert got["quantized.absmax_max_err_eps"]["status"] == got["quantized.codes_unexplained"]["status"] == "pass"
