import sys

from optbench.cli import main

sys.exit(main())
