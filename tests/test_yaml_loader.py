"""Every config is read with OmegaConf's loader on libyaml's parser (optbench.yaml_loader): the same values."""

from pathlib import Path

import hydra
import omegaconf._utils
import pytest
import yaml
from omegaconf import OmegaConf

import optbench.config  # noqa: F401  (installs the loader, as every compose does)
from optbench.yaml_loader import loader, pure_loader

REPO = Path(__file__).parents[1]


def test_every_yaml_file_reads_as_omegaconfs_own_loader_reads_it():
    """Suite files, the run's config, the tests' configs and Hydra's own: the same tree, value for value and type
    for type (floats such as ``1e-3``, dates kept as text, ``1_000`` an int)."""
    files = [*REPO.glob("suites/**/*.yaml"), *REPO.glob("tests/**/*.yaml"),
             *Path(hydra.__file__).parent.glob("conf/**/*.yaml")]
    assert len(files) > 60
    for path in files:
        text = path.read_text()
        assert repr(yaml.load(text, Loader=loader())) == repr(yaml.load(text, Loader=pure_loader())), path
    assert yaml.load("a: 1e-3\nb: 2020-01-01\nc: .5\nd: 1_000\ne: .inf\n", Loader=loader()) == {
        "a": 0.001, "b": "2020-01-01", "c": 0.5, "d": 1000, "e": float("inf")}


def test_omegaconf_and_hydra_read_with_it():
    assert yaml.__with_libyaml__  # the wheels CI installs have it; without it OmegaConf's loader is left alone
    assert omegaconf._utils.get_yaml_loader() is loader() and loader() is not pure_loader()
    assert OmegaConf.create("lr: 1e-3\n").lr == 0.001


def test_a_duplicate_key_is_refused_and_a_malformed_file_says_what_was_expected():
    with pytest.raises(yaml.YAMLError, match="duplicate key c"):
        OmegaConf.create("a: 1\nb: {c: 3, c: 4}\n")
    with pytest.raises(yaml.YAMLError, match=r"expected ',' or '\]', but got '<stream end>'"):  # PyYAML's words
        yaml.load("a: [1, 2\n", Loader=loader())
