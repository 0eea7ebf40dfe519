"""The suite files: every one composes, covers torch's own option sets, and cites real findings."""

import re
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module

import optbench.checks  # noqa: F401  (the checks' config blocks)
from optbench.implementations import optimizer_class
from optbench.suite.catalog import is_meta, optimizer_suite_names, resolve, suite_names
from optbench.suite.spec import DTYPES

REPO = Path(__file__).parents[1]
TORCH_OPTIMIZERS = sorted(n for n in dir(torch.optim) if isinstance(getattr(torch.optim, n), type)
                          and issubclass(getattr(torch.optim, n), torch.optim.Optimizer) and n != "Optimizer")


def composed(name: str):
    with initialize_config_module(config_module="optbench.suites", version_base="1.3"):
        return compose(config_name="config", overrides=[f"suite={name}", "device=cpu"])


@pytest.mark.parametrize("name", suite_names())
def test_every_suite_config_composes(name):
    cfg = composed(name)
    suites = resolve(cfg.suite)
    assert suites
    for s in suites:
        assert s.hparams and set(s.dtypes) <= set(DTYPES)
        assert s.hparam_set(s.roundtrip_hparams)
        assert s.reference  # the reference module loads and keeps the contract
        assert s.optimizer is None or optimizer_class(s.optimizer)  # None: a candidate-only suite (umup)
    if not is_meta(cfg.suite):
        assert cfg.suite.name == name


def test_one_suite_per_torch_optimizer_named_by_the_lowercase_class():
    by_optimizer = {resolve(composed(n).suite)[0].optimizer: n for n in optimizer_suite_names()}
    assert set(TORCH_OPTIMIZERS) <= set(by_optimizer), set(TORCH_OPTIMIZERS) - set(by_optimizer)
    assert all(by_optimizer[o] == o.lower() for o in TORCH_OPTIMIZERS)
    assert {"smoke", "all"} <= set(suite_names())


def test_meta_suites_are_discovered_not_listed():
    assert [s.name for s in resolve(composed("all").suite)] == optimizer_suite_names()
    smoke = resolve(composed("smoke").suite)
    assert len(smoke) == len(optimizer_suite_names()) and all(len(s.hparams) == 1 for s in smoke)


@pytest.mark.parametrize("name", optimizer_suite_names())
def test_each_suite_has_the_bug_zoo_and_param_groups(name):
    s = resolve(composed(name).suite)[0]
    assert any("zoo" in (h.workload or s.workload) for h in s.hparams), "no bug-zoo hparam set"
    if not s.closure_driven:  # LBFGS takes exactly one param group
        assert any(h.groups for h in s.hparams), "no hparam set with several param groups"


@pytest.mark.parametrize("name", optimizer_suite_names())
def test_hparam_sets_list_only_what_differs_from_defaults(name):
    s = resolve(composed(name).suite)[0]
    defaults = s.defaults()
    for h in s.hparams:
        assert set(h.options) <= set(defaults), (h.name, set(h.options) - set(defaults))


def test_every_declared_deviation_is_a_documented_finding_with_a_script():
    findings = (REPO / "docs" / "findings.md").read_text()
    for name in optimizer_suite_names():
        for d in resolve(composed(name).suite)[0].deviations:
            assert f"## {d.finding}:" in findings, (name, d.finding)
            assert list((REPO / "docs" / "findings").glob(f"{d.finding}_*.py")), d.finding
    for fid in re.findall(r"^## (F\d+):", findings, re.M):
        assert list((REPO / "docs" / "findings").glob(f"{fid}_*.py")), f"{fid} has no plain-torch script"


def test_a_librarys_findings_cover_its_classes_in_every_suite_and_nothing_else(tmp_path, monkeypatch):
    """suites/library/pytorch_optimizer.yaml declares F48 (its base class writes into p.grad under maximize) once:
    a pytorch-optimizer class judged under torch's adam suite is covered, torch's own Adam and another library's
    class are not; a library file that names another's classes is refused in one line naming it."""
    from optbench.suite import libraries

    adam = resolve(composed("adam").suite)[0]
    maximize = next(h.name for h in adam.hparams if "maximize" in h.name)
    for impl, covered in (("candidate:pytorch_optimizer.AdamP", True), ("for-loop", False),
                          ("candidate:heavyball.AdamW", False)):
        found = {d.finding for d in adam.deviations_for(impl, "float32", maximize)}
        assert ("F48" in found) is covered, (impl, found)
    folder = tmp_path / "library"
    folder.mkdir()
    (folder / "mine.yaml").write_text("library: mine\ndeviations:\n  - {finding: F01, impl: fused, reason: x}\n")
    monkeypatch.setattr(libraries.resources, "files", lambda module: tmp_path)
    libraries.library_deviations.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"library/mine.yaml: F01: impl 'fused' must name candidates of mine"):
            libraries.library_deviations()
    finally:
        libraries.library_deviations.cache_clear()


def test_a_deviation_declared_for_a_device_applies_only_on_it():
    """F44 (fused CUDA Adam) is judged on CUDA runs only; F01 (fused CPU SGD) on CPU runs only."""
    adam = resolve(composed("adam").suite)[0]
    assert any(d.finding == "F44" for d in adam.on_device("cuda").deviations)
    on_cpu = adam.on_device("cpu")
    assert not any(d.finding == "F44" for d in on_cpu.deviations)
    assert any(d.finding == "F44" for d in on_cpu.deviations_elsewhere)
    sgd = resolve(composed("sgd").suite)[0]
    assert any(d.finding == "F01" for d in sgd.on_device("cpu").deviations)
    assert not any(d.finding == "F01" for d in sgd.on_device("cuda").deviations)
