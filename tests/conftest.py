"""Shared fixtures: seeded generators, configs, a private ROS graph."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def ros_graph(tmp_path):
    """A private ROS graph (its own master, processes) for one test."""
    from requirements import require

    from backends.ros1 import RosUnavailable
    from backends.ros_graph import RosGraph

    try:
        graph = RosGraph(tmp_path)
    except RosUnavailable as err:
        require(False, str(err))
    try:
        yield graph
    finally:
        graph.stop()


@pytest.fixture(scope="session")
def paper_config():
    from cableload_sim.params import load_config

    return load_config()


ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def _one_compiler(group: str):
    """Hold this checkout's lock for compiling ``group``: the other worker waits for it and
    then loads numba's cache instead of compiling the same kernels again."""
    digest = hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"cableload-{digest}-{group}.lock"
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _simulator_kernels(paper_config) -> None:
    from cableload_sim.params import load_config
    from cableload_sim.physics.simulator import Simulator

    for config in (paper_config, load_config(overrides=["imu.enabled=true"])):
        sim = Simulator(config)
        sim.advance(10, log=False)
        sim.world_state()


def _planner_kernels(paper_config) -> None:
    from planners.formation import load_kernels
    from planners.student import load_kernels as load_student_kernels

    load_kernels()
    load_student_kernels()


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels(paper_config):
    """Compile the simulator's, the formation's and the student's numba kernels, or load them
    from numba's cache, before the first test: on a fresh clone the first compile takes tens of
    seconds on this 2-core machine, which no test should spend inside its own timeouts (a ROS
    world compiling while planner nodes wait for it, a timed subprocess). With ``make test``'s
    two workers, each group is compiled by one of them (the simulator's, about 65 s, by the
    first; the planners', about 18 s, by the second) while the other waits and then loads it."""
    groups = [("simulator", _simulator_kernels), ("planners", _planner_kernels)]
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        groups.reverse()
    for name, compile_group in groups:
        with _one_compiler(name):
            compile_group(paper_config)
