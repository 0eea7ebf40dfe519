"""pytorch-optimizer 4.1.0's classes whose algorithm an optbench reference models, through their adapters (the suite
files' ``candidates:``): each matches the reference at float32 but for its declared findings, and each declared
finding still shows (an xpass would mean pytorch-optimizer fixed it: its declaration then goes)."""


import pytest

from tests.conftest import assert_only_declared_findings

pytest.importorskip("pytorch_optimizer")



@pytest.mark.parametrize("suite, cls, hparams, findings", [
    ("adamax", "AdaMax", "betas_eps", set()),
    ("adamax", "AdaMax", "weight_decay", {"F50"}),  # its L2 decay, under a set name the library's glob misses
    ("adadelta", "AdaDelta", "rho_weight_decay", {"F50"}),
    ("radam", "RAdam", "decoupled_weight_decay", set()),  # no step in steps 1-5, then rectified: both in 8 steps
    ("radam", "RAdam", "weight_decay", {"F70"}),  # weight_decouple=False: no decay at all
    ("sgd", "SGDW", "dampening", set()),
    ("sgd", "SGDW", "momentum_weight_decay", set()),  # its default, decoupled decay
    ("lion", "Tiger", "weight_decay", set()),
    ("lion", "SignSGD", "default", set()),
    ("muon", "Muon", "weight_decay", {"F13", "F66"}),  # use_muon in every group (group_options); F13: its bfloat16 NS
    ("muon", "Muon", "no_nesterov", {"F13"}),  # no Nesterov interpolation: the caller's gradient left alone
])
def test_pytorch_optimizer_matches_the_reference_but_for_its_declared_findings(suite, cls, hparams, findings,
                                                                              tmp_path):
    assert_only_declared_findings(tmp_path, suite, f"pytorch_optimizer.{cls}", hparams, findings, steps=8)
