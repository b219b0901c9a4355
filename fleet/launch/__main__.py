"""`python -m fleet.launch [options] train.py [args]`: the same as `fleetrun`."""

import sys

from fleet.launch.main import main

sys.exit(main())
