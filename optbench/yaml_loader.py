"""The YAML loader every config is read with: OmegaConf's, on libyaml's parser.

OmegaConf reads YAML with PyYAML's pure-Python parser under its own rules (floats such as ``1e-3``, no timestamps,
duplicate keys refused). That parser took 53 ms of a 15 kB suite file (``suite/adam.yaml``), libyaml's 6 ms under
the same rules; Hydra reads the run's suite file at each compose, and ``optbench run`` composes three times (its own
check, then Hydra's mode and run). ``install`` has OmegaConf, and so Hydra, read with ``loader()``: libyaml's
parser first, OmegaConf's constructor and resolvers after it, so the same values. A document libyaml refuses is read
again by the pure-Python parser, whose error says what it expected and what it found. Where PyYAML was built
without libyaml, OmegaConf's loader is left as it is.
"""

from __future__ import annotations

from functools import lru_cache

import omegaconf._utils
import yaml

_OMEGACONF_LOADER = omegaconf._utils.get_yaml_loader  # OmegaConf's, before install replaces it


@lru_cache(maxsize=1)
def pure_loader():
    """OmegaConf's own loader class (PyYAML's pure-Python parser)."""
    return _OMEGACONF_LOADER()


@lru_cache(maxsize=1)
def loader():
    """OmegaConf's loader on libyaml's parser (``pure_loader()`` where PyYAML has no libyaml)."""
    pure = pure_loader()
    if not getattr(yaml, "__with_libyaml__", False):
        return pure

    class LibyamlOmegaConfLoader(yaml.CSafeLoader, pure):  # CParser, then OmegaConf's duplicate-key check and rules
        def __init__(self, stream):
            self.text = stream if isinstance(stream, (str, bytes)) else stream.read()
            super().__init__(self.text)

        def get_single_data(self):
            try:
                return super().get_single_data()
            except yaml.YAMLError:
                return yaml.load(self.text, Loader=pure)  # raises again, saying what it expected and found

    return LibyamlOmegaConfLoader


def install() -> None:
    """Have OmegaConf (``OmegaConf.load``, ``OmegaConf.create`` of a YAML string, and so Hydra's composes) read
    YAML with ``loader()``. Idempotent."""
    import omegaconf.basecontainer

    for module in (omegaconf._utils, omegaconf.basecontainer):
        module.get_yaml_loader = loader
