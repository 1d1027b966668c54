"""Every backend through the same conformance check (``backends.conformance``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from backends import make_backend
from backends.base import Scenario
from backends.conformance import check_backend
from backends.ros_graph import last_json

ALL_CHECKS = ["protocol", "reset-observe", "send-advance-health", "malformed-plan-refused", "close"]


def test_embedded_backend_conforms(paper_config):
    scenario = Scenario(load_p=np.array([0.5, -0.2, 1.2]), load_q=np.array([1.0, 0, 0, 0]))
    passed = check_backend(lambda: make_backend("embedded", paper_config), scenario)
    assert passed == ALL_CHECKS + ["same-seed-same-result"]


def test_conformance_check_can_fail(paper_config):
    """A backend that loses its samples is caught."""

    class Forgetful:
        def __init__(self):
            self.inner = make_backend("embedded", paper_config)

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def advance(self):
            samples = self.inner.advance()
            return type(samples).empty(samples.n_uavs)

    scenario = Scenario(load_p=np.array([0.0, 0.0, 1.0]), load_q=np.array([1.0, 0, 0, 0]))
    try:
        check_backend(Forgetful, scenario)
    except AssertionError as err:
        assert "samples recorded" in str(err)
    else:
        raise AssertionError("the check passed a backend that records nothing")


@pytest.mark.realtime
def test_gazebo_backend_conforms_against_cableload_world(ros_graph):
    ros_graph.cableload("world", "world", "--real-time-factor", "1")
    done = subprocess.run(
        [sys.executable, "-m", "backends.conformance", "--backend", "gazebo"],
        env=ros_graph.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    report = last_json(done.stdout)
    assert done.returncode == 0, (report, done.stderr[-2000:], ros_graph.log("world"))
    assert report["passed"] == ALL_CHECKS
