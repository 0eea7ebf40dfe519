"""optbench's configuration as data: ``config.yaml`` (the run's defaults), ``suite/*.yaml``, ``device/*.yaml``.

Importing it registers the resolver ``config.yaml`` uses (``${optbench_run_tag:}``), so composing the config
through Hydra's API works whoever imports it first."""

import functools
import secrets
from importlib import resources

from omegaconf import OmegaConf

CONFIG_MODULE = __name__  # what Hydra's compose API and the suite catalogue read the files from


@functools.cache
def run_tag() -> str:
    """Four random hex digits, the same for the whole process: ``out_dir``'s default ends in it, so two runs
    started in the same second never share a folder."""
    return secrets.token_hex(2)


OmegaConf.register_new_resolver("optbench_run_tag", run_tag, replace=True)


@functools.cache
def run_config():
    """``config.yaml`` as written (interpolations unresolved): its top-level keys and its blocks' defaults."""
    text = (resources.files(CONFIG_MODULE) / "config.yaml").read_text(encoding="utf-8")
    return OmegaConf.create(text)
