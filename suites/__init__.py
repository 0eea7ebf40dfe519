"""optbench's configuration as data: ``config.yaml`` (the run's defaults), ``suite/*.yaml``, ``device/*.yaml``."""

CONFIG_MODULE = __name__  # what Hydra's compose API and the suite catalogue read the files from
