"""docs/suites.md lists exactly the keys the suite parser takes, level by level, and the values it names; a key
the parser does not take is an error, at the top level too."""

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from optbench.adapters.spec import KEYS as SPEC_KEYS
from optbench.adapters.state import STATE_KEYS
from optbench.checks.error_attempts import PARAMS
from optbench.suite import keys
from optbench.suite.keys import declared_cost
from optbench.suite.spec import Suite
from optbench.workloads import GENERATORS

PAGE = (Path(__file__).parents[1] / "docs" / "suites.md").read_text()
LEVELS = {"Top level": keys.SUITE, "An hparam set": keys.HPARAM_SET, "A param group": keys.GROUP,
          "`one_step:`": keys.ONE_STEP, "An error input": keys.ERROR_INPUT, "A deviation": keys.DEVIATION,
          "`roofline:`": {"streams", "flops_per_param"}, "A candidate spec": SPEC_KEYS,
          "`state:` of a candidate spec": STATE_KEYS, "Workloads": set(GENERATORS)}


def documented() -> dict[str, set[str]]:
    """Each section's table: the backticked names in its first column."""
    sections = {}
    for section in PAGE.split("\n## ")[1:]:
        title, _, body = section.partition("\n")
        sections[title] = set(re.findall(r"^\| `([^`]+)` \|", body, flags=re.M))
    return sections


@pytest.mark.parametrize("level", LEVELS)
def test_the_page_lists_every_key_the_parser_takes_and_no_other(level):
    title = next(t for t in documented() if t.startswith(level))
    assert documented()[title] == set(LEVELS[level])


def test_the_roofline_keys_are_the_ones_it_takes():
    assert declared_cost({"streams": 5, "flops_per_param": 1.0}) == {"streams": 5, "flops_per_param": 1.0}
    with pytest.raises(ValueError):
        declared_cost({"streams": 5, "flops": 1.0})


def test_the_error_input_params_listed_are_the_shapes_there_are():
    row = next(line for line in PAGE.splitlines() if line.startswith("| `params` | the parameters it gets"))
    assert set(re.findall(r"`([a-z_]+)`", row.split("|")[2])) == set(PARAMS)


def test_a_misspelt_key_is_an_error_at_every_level():
    suite = {"name": "mine", "optimizer": "SGD", "reference": "sgd", "dtypes": ["float32"],
             "hparams": [{"name": "default", "options": {}, "groups": [{"match": ["*"], "options": {}}]}]}
    assert Suite.from_config(OmegaConf.create(suite)).name == "mine"
    with pytest.raises(ValueError, match="suite 'mine' has unknown key.s. roundtrip_hparam; allowed: candidate_named"):
        Suite.from_config(OmegaConf.create({**suite, "roundtrip_hparam": "default"}))
    with pytest.raises(ValueError, match="one_step has unknown key.s. skip; allowed: note, skip_dtypes"):
        Suite.from_config(OmegaConf.create({**suite, "one_step": {"skip": ["float16"]}}))
    grouped = {"name": "default", "groups": [{"match": ["*"], "option": {}}]}
    with pytest.raises(ValueError, match="hparam set 'default': a group has unknown key.s. option; allowed: match"):
        Suite.from_config(OmegaConf.create({**suite, "hparams": [grouped]}))


@pytest.mark.parametrize("value", [0, -0.5, "1/16", True, float("inf")])
def test_speed_scale_is_a_positive_number(value):
    suite = {"name": "mine", "optimizer": "SGD", "reference": "sgd", "dtypes": ["float32"],
             "hparams": [{"name": "default", "options": {}}]}
    assert Suite.from_config(OmegaConf.create({**suite, "speed_scale": 0.25})).speed_scale == 0.25
    with pytest.raises(ValueError, match="speed_scale: .* is not a positive number"):
        Suite.from_config(OmegaConf.create({**suite, "speed_scale": value}))
