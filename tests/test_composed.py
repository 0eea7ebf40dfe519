"""A compose that reuses the group choices' config (optbench.composed) is Hydra's compose, value for value."""

import time

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import optbench.checks  # noqa: F401  (the checks' config blocks)
from optbench import composed
from optbench.config import compose_config, search_path
from optbench.suites import CONFIG_MODULE
from optbench.usage import UsageError


def hydras(overrides, config_dirs=()):
    """Hydra's own compose of every override at once: what a kept compose must equal."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            return compose(config_name="config", overrides=[*search_path(config_dirs), *overrides])
    finally:
        GlobalHydra.instance().clear()


def same(a, b) -> bool:
    return (OmegaConf.to_yaml(a) == OmegaConf.to_yaml(b) and OmegaConf.is_struct(a) == OmegaConf.is_struct(b)
            and OmegaConf.is_readonly(a) == OmegaConf.is_readonly(b))


CASES = [
    [],
    ["suite=sgd", "steps=8", "out_dir=/tmp/x", "dtype=[float64,bfloat16]", "impl=[for-loop,foreach]"],
    ["suite=adam", "options={lr: 0.05, amsgrad: true}", "hparams=[default,zoo]", "parity.one_step=false"],
    ["suite=all", "device=cpu", "checks=[parity]", "speed.params=2e4", "history_dir=null"],
    ["suite=lion", "candidate=lion_pytorch.Lion", "impl=[candidate]", "candidate_kwargs={betas: [0.9, 0.99]}"],
    ["+matrix=heavyball_adamw", "steps=5"],
    ["suite=sgd", "+extra_key=3", "~check_threads"],
    ["suite=adam", "roundtrip.scenarios=[reversed,subset]", "workload.width=16", "seed=3"],
]


@pytest.mark.parametrize("overrides", CASES, ids=lambda o: " ".join(o) or "defaults")
def test_a_kept_compose_equals_hydras_first_and_after(overrides):
    composed.forget()
    first, kept, again = (compose_config(overrides) for _ in range(3))  # as Hydra's; kept; from what was kept
    assert same(first, hydras(overrides)) and same(kept, hydras(overrides)) and same(again, hydras(overrides))
    again.steps = 999  # a run's config is its own
    assert compose_config(overrides).steps != 999


@pytest.mark.parametrize("overrides", [["stepz=3"], ["suite=sgd", "parity.nope=1"], ["steps=[1"],
                                       ["suite=sgd", "steps=1,2"], ["suite=sgd", "+steps=3"]])
def test_a_mistake_reads_as_hydras_whether_kept_or_not(overrides):
    composed.forget()
    compose_config(["suite=sgd"]), compose_config(["suite=sgd"])  # the group choice kept
    try:
        hydras(overrides)
        hydra_says = None
    except Exception as exc:
        hydra_says = str(exc).strip().splitlines()[0]
    with pytest.raises(UsageError) as kept:
        compose_config(overrides)
    assert hydra_says is not None and (str(kept.value) == hydra_says or "a list needs brackets" in str(kept.value))


def test_an_edited_suite_file_composes_anew(tmp_path):
    (tmp_path / "suite").mkdir()
    mine = tmp_path / "suite" / "mysgd.yaml"
    mine.write_text("name: mysgd\noptimizer: SGD\nreference: sgd\nhparams:\n  - {name: default, lr: 0.1}\n")
    first = [compose_config(["suite=mysgd"], [str(tmp_path)]) for _ in range(2)][-1]  # kept
    mine.write_text("name: mysgd\noptimizer: SGD\nreference: sgd\nhparams:\n  - {name: default, lr: 0.2}\n")
    second = [compose_config(["suite=mysgd"], [str(tmp_path)]) for _ in range(2)][-1]
    assert first.suite.hparams[0].lr == 0.1 and second.suite.hparams[0].lr == 0.2
    assert same(second, hydras(["suite=mysgd"], [str(tmp_path)]))


def test_out_dirs_time_is_each_runs_own():
    compose_config(["suite=sgd"])
    first = compose_config(["suite=sgd"])  # kept
    seen = str(first.out_dir)  # resolves ${now:...} in this config only
    time.sleep(1.05)
    assert str(compose_config(["suite=sgd"]).out_dir) != seen


def test_a_value_override_is_never_taken_for_a_group_choice():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    groups = composed.group_names([])
    assert {"suite", "device", "matrix", "library", "hydra"} <= groups
    parsed = OverridesParser.create().parse_overrides(
        ["suite=sgd", "+matrix=x", "hydra.run.dir=d", "suite.steps=3", "device@d=cpu", "steps=3", "+new=1",
         "parity.tol=2", "options={lr: 1}"])
    assert [o.input_line for o in parsed if composed.is_plain_value(o, groups)] == [
        "steps=3", "+new=1", "parity.tol=2", "options={lr: 1}"]


def test_a_check_registered_later_composes_anew(monkeypatch):
    from hydra.core.config_store import ConfigStore

    from optbench.checks import registry

    compose_config(["suite=sgd"]), compose_config(["suite=sgd"])  # kept
    defaults = registry.config_defaults()
    monkeypatch.setattr(registry, "config_defaults", lambda: {**defaults, "late_check": {"limit": 3}})
    registry.store_config_defaults()
    try:
        assert [compose_config(["suite=sgd", "late_check.limit=5"]) for _ in range(2)][-1].late_check.limit == 5
    finally:
        monkeypatch.undo()
        ConfigStore.instance().store(name=registry.CONFIG_NODE, node=registry.config_defaults())
