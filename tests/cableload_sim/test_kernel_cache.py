"""The compiled kernels are cached on disk and loaded, not recompiled, by a fresh process: the
stepping kernel takes named tuples (``layout.SimModel``, ``SimData``, ``SimLog``), whose types
numba must find again from the cache index; and the cache follows every source it compiles in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cableload_sim.physics import layout
from cableload_sim.physics.kernels import jit

PROBE = """
import json
import numpy as np
from cableload_sim.physics import kernels
from cableload_sim.params import load_config
from cableload_sim.physics.simulator import Simulator
sim = Simulator(load_config(uavs=3))
sim.advance(20, wrench=np.zeros((1, 6)))
stats = kernels.advance.stats
print(json.dumps({"hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values()),
                  "signatures": [str(s) for s in kernels.advance.signatures]}))
"""


def run_probe() -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_fresh_process_loads_advance_from_the_cache():
    run_probe()  # compiles and stores when the cache is cold, else loads
    second = run_probe()
    assert second["misses"] == 0 and second["hits"] == 1, second
    assert "SimModel" in second["signatures"][0] and "SimData" in second["signatures"][0]


def test_the_cache_stamp_covers_every_kernel_source_and_the_layout():
    package = Path(jit.__file__).parent
    covered = {Path(p).resolve() for p in jit._SOURCES}
    assert Path(layout.__file__).resolve() in covered
    assert {p.resolve() for p in package.glob("*.py")} <= covered
