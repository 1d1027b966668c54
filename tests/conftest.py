"""Shared fixtures: seeded generators, configs."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def paper_config():
    from cableload_sim.params import load_config

    return load_config()


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels(paper_config):
    """Compile the simulator's, the formation's and the student's numba kernels, or load them from numba's
    cache, before the first test: on a fresh clone the first compile takes tens of seconds on
    this 2-core machine, which no test should spend inside its own timeouts (a ROS world
    compiling while planner nodes wait for it, a timed subprocess). With ``make test``'s two
    workers both compile at once; numba writes its cache files atomically."""
    from cableload_sim.params import load_config
    from cableload_sim.physics.simulator import Simulator
    from planners.formation import load_kernels
    from planners.student import load_kernels as load_student_kernels

    for config in (paper_config, load_config(overrides=["imu.enabled=true"])):
        sim = Simulator(config)
        sim.advance(10, log=False)
        sim.world_state()
    load_kernels()
    load_student_kernels()
