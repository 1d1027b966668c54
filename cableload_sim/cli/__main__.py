"""``python -m cableload_sim.cli``: the ``cableload`` command."""

import sys

from cableload_sim.cli.main import main

sys.exit(main())
