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
