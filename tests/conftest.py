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


def fly_formation(config, duration: float, logger=None, trajectory: str = "eight-slow"):
    """The formation baseline on the embedded backend (optionally logged): a quick real run."""
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    return run_episode(make_backend("embedded", config), make_planner("formation", config),
                       make_reference(trajectory), duration, logger=logger)
