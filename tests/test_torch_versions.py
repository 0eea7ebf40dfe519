"""Across torch versions: a declaration holds for its torch range only, and a torch that
lacks an optimizer gets its suites left out in one line, never a traceback."""

import pytest
import torch
from omegaconf import OmegaConf

from optbench.cli.listing import describe
from optbench.suite.catalog import _load, resolve, suite_files
from optbench.suite.spec import Deviation, Suite


def deviation(**extra):
    return Deviation.from_config(OmegaConf.create({"finding": "F01", "reason": "r", **extra}))


@pytest.mark.parametrize("version, applies", [("2.13.0+cpu", True), ("2.13.1", True), ("2.14.0", False),
                                              ("2.14.1+cu130", False), ("2.14.0.dev20261101", False)])
def test_a_declaration_applies_inside_its_torch_range_only(version, applies):
    assert deviation(torch="<2.14").applies_to_torch(version) is applies
    assert deviation().applies_to_torch(version)  # no range: every version


def test_an_unreadable_range_is_the_suite_files_error():
    with pytest.raises(ValueError, match="torch: 'soon' is not a version range"):
        deviation(torch="soon")


def test_fused_sgds_low_precision_finding_is_declared_for_torch_before_2_14_and_judged_plainly_after(monkeypatch):
    sgd = resolve(_load(suite_files()["sgd"]))[0]
    assert any(d.finding == "F01" for d in sgd.deviations) == (torch.__version__ < "2.14")
    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    later = Suite.from_config(_load(suite_files()["sgd"]))
    assert not any(d.finding == "F01" for d in later.deviations)  # judged plainly: a FAIL if it came back
    assert {d.finding for d in later.deviations_elsewhere} == {"F01"}
    assert "not applied on this torch: F01 (torch<2.14)" in describe().split("\n  sgd ")[1].splitlines()[0]


def test_a_torch_without_an_optimizer_lists_it_and_leaves_its_suite_out_of_meta_suites(monkeypatch, capsys):
    monkeypatch.delattr(torch.optim, "Muon")
    listed = describe()
    assert "muon        Muon        not in this torch" in listed
    names = [s.name for s in resolve(_load(suite_files()["all"]).suite)]
    assert "muon" not in names and "adamw" in names
    assert "leaves out muon" in capsys.readouterr().err


def test_an_hparam_set_for_a_later_torch_runs_there_only_and_is_listed_here(monkeypatch):
    """LBFGS takes maximize and Muon spectral_unclamped from torch 2.14: their sets run on 2.14 and later only."""
    here = {s: {h.name for h in Suite.from_config(_load(suite_files()[s])).hparams} for s in ("lbfgs", "muon")}
    later_torch = torch.__version__ >= "2.14"
    assert ("maximize" in here["lbfgs"]) == later_torch and ("spectral_unclamped" in here["muon"]) == later_torch
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    lbfgs = Suite.from_config(_load(suite_files()["lbfgs"]))
    assert "maximize" not in {h.name for h in lbfgs.hparams}
    assert [h.name for h in lbfgs.hparams_elsewhere] == ["maximize"]
    assert "hparam set maximize (torch>=2.14)" in describe().split("\n  lbfgs ")[1].splitlines()[0]
    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    assert "maximize" in {h.name for h in Suite.from_config(_load(suite_files()["lbfgs"])).hparams}


def test_a_suite_whose_every_hparam_set_is_for_another_torch_is_refused():
    cfg = OmegaConf.create({"name": "x", "optimizer": "SGD", "reference": "sgd", "dtypes": ["float32"],
                            "hparams": [{"name": "later", "torch": ">=99", "options": {}}]})
    with pytest.raises(ValueError, match="no hparam set runs on torch"):
        Suite.from_config(cfg)
    with pytest.raises(ValueError, match="is not a version range"):
        Suite.from_config(OmegaConf.merge(cfg, {"hparams": [{"name": "a", "torch": "soon", "options": {}}]}))
