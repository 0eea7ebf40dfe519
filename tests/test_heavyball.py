"""heavyball 3.x through its adapters (suite files' ``candidates:``): its nested state read by the decoder, and its
AdamW and SFAdamW matching the references at float32 once their documented conventions are declared."""

import json

import pytest
import torch

from tests.conftest import run_inline

heavyball = pytest.importorskip("heavyball")


def test_the_decoder_reads_heavyballs_nested_per_transform_state():
    from optbench.adapters.libraries.heavyball import flat

    for cls, keys in ((heavyball.AdamW, {"exp_avg", "exp_avg_sq"}), (heavyball.SFAdamW, {"exp_avg_sq", "z"})):
        p = torch.nn.Parameter(torch.randn(4, 3))
        opt = cls([p], lr=1e-3)
        p.grad = torch.randn(4, 3)
        opt.step()
        assert set(opt.state[p]) == {0} and any(k.endswith("_0") for k in opt.state[p][0])  # the layout read
        state = flat(opt.state[p])
        assert set(state) == keys and all(v.shape == p.shape for v in state.values())
    assert flat({0: {"update_by_adam_exp_avg_3": 1, "is_initialized": {3}, "step": 2, "other": 5}}) == {
        "exp_avg": 1, "other": 5}
    with pytest.raises(ValueError, match="views"):
        flat({0: {}, 1: {}})


@pytest.mark.parametrize("suite, cls, options", [
    ("adamw", "AdamW", "{}"),
    ("adamw", "AdamW", "{lr: 0.05, betas: [0.5, 0.9], eps: 1.0e-3, weight_decay: 0.5}"),
    ("schedule_free_adamw", "SFAdamW", "{}"),
    ("schedule_free_adamw", "SFAdamW", "{lr: 2.0e-3, weight_decay: 0.05, warmup_steps: 4, r: 1.0}"),
])
def test_heavyball_passes_parity_at_float32_through_its_adapter(suite, cls, options, tmp_path):
    code = run_inline([f"suite={suite}", f"candidate=heavyball.{cls}", "impl=[candidate]", "checks=[parity]",
                       "dtype=float32", "steps=10", f"options={options}", "jobs=0", "history_dir=null",
                       f"out_dir={tmp_path}"])
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    verdicts = [r["status"] for r in rows if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""]
    assert code == 0 and verdicts == ["pass"], [r["detail"][:160] for r in rows if r["status"] in ("fail", "error")]


def test_sfadamw_round_trips_by_name_and_regrouping_is_declared_not_hidden(tmp_path):
    """Its schedule is per group and pauses in a group without gradients (undocumented): the adapter declares it
    (group_schedule), so a regrouped load is a skip that says why; without the declaration that scenario fails."""
    from optbench.config import compose_config
    from optbench.suite.catalog import resolve

    assert run_inline(["suite=schedule_free_adamw", "candidate=heavyball.SFAdamW", "checks=[roundtrip]",
                       "history_dir=null", f"out_dir={tmp_path / 'declared'}"]) == 0
    rows = json.loads((tmp_path / "declared" / "results.json").read_text())["rows"]
    regrouped = next(r for r in rows if r["metric"] == "roundtrip.regrouped")
    assert regrouped["status"] == "skip" and "group_schedule" in regrouped["detail"]
    suite = resolve(compose_config(["suite=schedule_free_adamw"]).suite)[0]
    assert suite.candidate_spec("heavyball.SFAdamW").group_schedule
    spec = tmp_path / "undeclared.yaml"
    spec.write_text("class: heavyball.SFAdamW\nconventions: {debiased_state: true, eps_clamp: true, "
                    "warmup_plus_one: true}\nfixed: {consume_grad: false}\nerror_inputs: none\n"
                    "state: {decode: optbench.adapters.libraries.heavyball.flat, step: none, "
                    "ignore: [weight_sum, lr_max]}\n")
    assert run_inline(["suite=schedule_free_adamw", f"candidate={spec}", "checks=[roundtrip]", "history_dir=null",
                       f"out_dir={tmp_path / 'undeclared'}"]) == 1
    rows = json.loads((tmp_path / "undeclared" / "results.json").read_text())["rows"]
    assert [r["metric"] for r in rows if r["status"] == "fail" and r["metric"].startswith("roundtrip.")
            and "positional" not in r["metric"]] == ["roundtrip.regrouped"]
