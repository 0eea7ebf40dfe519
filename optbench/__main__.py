import sys

from optbench.cli import entry

sys.exit(entry())
