"""torchao's 8-bit AdamW judged as a user runs it (``optbench run suite=adamw candidate=torchao.optim.AdamW8bit``): its
moments, kept in tensor subclasses, read through their codes, scales and map, judged in the quantizer's units, carried
through every round-trip scenario bit for bit, and counted at their real size; its own findings declared (F73, F74);
a wrong 8-bit step and a wrong quantizer fail (tests skip without torchao, which the test extra does not install)."""

from __future__ import annotations

import json

import pytest

from tests import warm_command

pytest.importorskip("torchao.optim")

RUN = ["run", "suite=adamw", "dtype=float32", "impl=[candidate]", "hparams=[default]", "history_dir=null", "jobs=1",
       "steps=6"]

SPEC = """class: {cls}
dtypes: [float32, bfloat16]
held_as: {{lr: float32}}
quantized:
  scheme: blockwise_8bit
  blocksize: 256
  min_size: 4096
  whole_blocks: true
  ties: up
  floor: 1e-12
  moments: {{exp_avg: [exp_avg.codes, exp_avg.scale, exp_avg.qmap],
            exp_avg_sq: [exp_avg_sq.codes, exp_avg_sq.scale, exp_avg_sq.qmap]}}
"""

MUTANTS = {  # a module defining AdamW8bit wrong in one way -> the metric that must fail
    "steps with 1.1 times its lr": ("""
class AdamW8bit(torchao.optim.AdamW8bit):  # torchao holds lr as a tensor in its groups
    def step(self, closure=None):
        for g in self.param_groups:
            g["lr"].mul_(1.1)
        out = super().step(closure)
        for g in self.param_groups:
            g["lr"].div_(1.1)
        return out
""", "quantized.param_max_err_eps"),
    "rounds the first moment's codes down": ("""
class AdamW8bit(torchao.optim.AdamW8bit):
    def step(self, closure=None):
        out = super().step(closure)
        for state in self.state.values():
            m = state.get("exp_avg")
            codes = getattr(m, "codes", None)
            if codes is not None:
                codes.copy_(torch.where(codes > 0, codes - 1, codes))
        return out
""", "quantized.codes_unexplained"),
}


def rows_of(out) -> list[dict]:
    return json.loads((out / "results.json").read_text())["rows"]


def test_torchao_adamw8bit_is_judged_in_the_quantizers_units_with_its_findings_declared(tmp_path):
    done = warm_command.run(*RUN, "candidate=torchao.optim.AdamW8bit", "checks=[quantized,roundtrip,memory,errors]",
                            "roundtrip.every_dtype=[]", f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = rows_of(tmp_path / "out")
    quantized = {r["metric"]: (r["status"], r["finding"]) for r in rows if r["check"] == "quantized"
                 and r["status"] != "info" and r["metric"] != "run.case_s"}
    assert quantized == {"quantized.param_max_err_eps": ("xfail", "F73"), "quantized.absmax_max_err_eps": ("pass", ""),
                         "quantized.codes_unexplained": ("pass", "")}, quantized
    scenarios = {r["metric"]: r["status"] for r in rows if r["check"] == "roundtrip" and r["metric"].startswith(
        "roundtrip.") and not r["metric"].startswith("roundtrip.positional")}
    assert scenarios and set(scenarios.values()) <= {"pass", "skip"} and scenarios["roundtrip.same_order"] == "pass"
    state = next(r for r in rows if r["check"] == "memory" and r["metric"] == "mem.state_bytes_per_param")
    assert 2.0 <= state["value"] < 2.6, state  # two uint8 codes per element, a float32 scale per 256, the maps
    errors = {r["finding"] for r in rows if r["check"] == "errors" and r["status"] == "xfail"}
    assert errors == {"F74"}, [r for r in rows if r["check"] == "errors" and r["status"] != "pass"]


@pytest.mark.parametrize("how", list(MUTANTS))
def test_a_wrong_torchao_8bit_optimizer_fails_the_quantized_check(tmp_path, how):
    code, metric = MUTANTS[how]
    (tmp_path / "wrongao.py").write_text("import torch\nimport torchao.optim\n" + code)
    (tmp_path / "wrongao.yaml").write_text(SPEC.format(cls="wrongao.AdamW8bit"))
    done = warm_command.run(*RUN, "candidate=wrongao.yaml", "checks=[quantized]", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=900)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    failing = {r["metric"] for r in rows_of(tmp_path / "out") if r["check"] == "quantized" and r["status"] == "fail"}
    assert metric in failing, failing
