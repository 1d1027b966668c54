"""``cableload world --lockstep`` without a ROS master: which quadrotors the world waits for, and
when it stops waiting; planner decisions on the clock. (The flights in lockstep against a real
master are in ``test_ros_world.py``.)"""

from __future__ import annotations

import numpy as np
import pytest
from requirements import require

from backends import ros1
from backends.world_node import WorldNode, WorldOptions, lockstep_waiting

PERIOD = 0.1


def test_waits_one_period_after_each_plan_for_the_next():
    received = [5.0, 5.03, None]  # quad 3 is not planning: never waited for
    assert lockstep_waiting(5.0, PERIOD, received) == []
    assert lockstep_waiting(5.09, PERIOD, received) == []
    assert lockstep_waiting(5.1, PERIOD, received) == [0]
    assert lockstep_waiting(5.13, PERIOD, received) == [0, 1]
    # a clock on the decision up to float rounding (4.9999999999 + 0.1) is on it
    assert lockstep_waiting(5.1 - 1e-12, PERIOD, [5.0 - 1e-12, None, None]) == [0]
    assert lockstep_waiting(5.0999, PERIOD, received) == []


def test_decision_index_counts_periods_up_to_rounding():
    assert ros1.decision_index(0.0, PERIOD) == 0
    assert ros1.decision_index(0.3 - 1e-12, PERIOD) == 3  # 0.1 + 0.1 + 0.1 on a float clock
    assert ros1.decision_index(0.2999, PERIOD) == 2
    assert ros1.decision_index(52.999999999, 0.1) == 530  # a stamp 1 ns short


def test_world_tracks_who_is_planning(paper_config):
    world = WorldNode(paper_config, WorldOptions(real_time_factor=0.0, lockstep=True))
    for i in range(world.n):
        world.receive(i, "enable", True)
        world.receive(i, "start", None)
    world.step_slice()
    assert world.plan_clocks == [None] * world.n  # no plan yet: nothing to wait for
    t = world.clock
    reference = {
        "t": t + np.linspace(0.0, 1.0, 11),
        "p": np.zeros((11, 3)),
        "v": np.zeros((11, 3)),
        "a": np.zeros((11, 3)),
        "j": np.zeros((11, 3)),
        "w": np.zeros((11, 3)),
    }
    for i in range(world.n):
        world.receive(i, "trajectory", reference)
    assert world.plan_clocks == [t] * world.n
    world.receive(1, "force_hover", None)  # no more plans are coming for it
    assert world.plan_clocks == [t, None, t]
    while world.clock < t + PERIOD - 1e-9:
        world.step_slice()
    assert lockstep_waiting(world.clock, world.period_s, world.plan_clocks) == [0, 2]
    world._place(*world.spawn)  # a reset: nobody is planning
    assert world.plan_clocks == [None] * world.n


@pytest.mark.parametrize("seconds", [4.9999999999, 5.0000000001, 1796.1300000000001, 0.0])
def test_stamps_round_to_the_nearest_nanosecond(seconds):
    ok, why = ros1.ros_available()
    require(ok, why)
    stamp = ros1.stamp(seconds)
    assert stamp.to_nsec() == round(seconds * 1e9)
    assert 0 <= stamp.nsecs < 1_000_000_000
