"""Fixtures of the backend tests: a private ROS graph (master, processes) per test."""

from __future__ import annotations

import pytest
from requirements import require

from backends.ros1 import RosUnavailable


@pytest.fixture
def ros_graph(tmp_path):
    from backends.ros_graph import RosGraph

    try:
        graph = RosGraph(tmp_path)
    except RosUnavailable as err:
        require(False, str(err))
    try:
        yield graph
    finally:
        graph.stop()
