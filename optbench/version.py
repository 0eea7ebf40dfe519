"""optbench's version: what its installed metadata says, from pyproject.toml, the one place it is written."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("optbench")
except PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "0+unknown"
