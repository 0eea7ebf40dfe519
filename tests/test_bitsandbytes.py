"""bitsandbytes 0.50.2's 32-bit optimizers through their adapters (suite files' ``candidates:``): parity at float32
once its state layout is mapped, and its findings (F56-F59) declared for it alone, each still showing."""

import json

import pytest

from tests.conftest import run_inline

pytest.importorskip("bitsandbytes")


def _run(tmp_path, suite, cls, hparams):
    code = run_inline([f"suite={suite}", f"candidate=bitsandbytes.optim.{cls}", "impl=[candidate]", "checks=[parity]",
                       "dtype=float32", "steps=10", f"hparams=[{hparams}]", "jobs=0", "history_dir=null",
                       f"out_dir={tmp_path}"])
    return code, json.loads((tmp_path / "results.json").read_text())["rows"]


@pytest.mark.parametrize("suite, cls, hparams, findings", [
    ("adamw", "AdamW", "large_lr_decay", {"F58"}),
    ("adamw", "AdamW", "amsgrad_weight_decay", {"F57", "F58"}),
    ("adam", "Adam", "default", {"F58"}),
    ("adam", "Adam", "weight_decay", {"F56", "F58"}),
    ("sgd", "SGD", "momentum_weight_decay", {"F58"}),
    ("sgd", "SGD", "nesterov", {"F57", "F58"}),
    ("rmsprop", "RMSprop", "weight_decay", {"F58"}),
    ("rmsprop", "RMSprop", "alpha_momentum", {"F57", "F58"}),
    ("lion", "Lion", "weight_decay", {"F58"}),
    ("lamb", "LAMB", "weight_decay", {"F58", "F59"}),
    ("lamb", "LAMB", "weight_decay_coupled", {"F57", "F58"}),
    ("adagrad", "Adagrad", "weight_decay", {"F58"}),
])
def test_bitsandbytes_matches_the_reference_but_for_its_declared_findings(suite, cls, hparams, findings, tmp_path):
    """Every tensor outside a declared finding is judged at full tolerance, and each declared finding still shows (an
    xpass would mean bitsandbytes fixed it: its declaration then goes). F58 shows on every set: the transformer
    workload's non-contiguous weights get their gradient replaced."""
    code, rows = _run(tmp_path, suite, cls, hparams)
    verdicts = [r["status"] for r in rows if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""]
    shown = {r["finding"] for r in rows if r["check"] == "deviation" and r["status"] == "xfail"}
    assert code == 0 and verdicts == ["xfail"] and shown == findings, (
        [r["detail"][:200] for r in rows if r["status"] in ("fail", "error", "xpass")], shown)
