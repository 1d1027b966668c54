"""The ROS layer's fault detection as pure logic, without a master: stamps checked against the
world's clock, the pilot watch's count of refusals and foreign references, the load's jumps,
configuration differences, and the world's handling of bad messages and bad options."""

from __future__ import annotations

import numpy as np
import pytest

from backends.agiros import REJECTED_FOR_S, PilotWatch
from backends.gazebo import FUTURE_S, HISTORY_S, _Stream, config_differences, load_jump
from backends.pilot import PilotState
from backends.world_node import WorldNode, WorldOptions
from cableload_sim.errors import UsageError


class Clock:
    def __init__(self, t: float | None):
        self.t = t

    def __call__(self):
        return self.t


def row(t: float):
    return (t, np.array([t, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]))


def test_a_stamp_from_the_future_is_dropped_and_does_not_hide_later_states():
    """A state stamped 100 s ahead once became the stream's newest row: every later state
    looked out of date and the run diverged within 1 s."""
    clock = Clock(10.0)
    stream = _Stream(clock)
    assert stream.add(*row(10.0))
    assert not stream.add(*row(110.0))
    assert stream.dropped["future"] == 1
    clock.t = 10.01
    assert stream.add(*row(10.01))
    assert stream.latest()[0] == pytest.approx(10.01)
    p, _q = stream.at(np.array([10.005]))
    assert p[0, 0] == pytest.approx(10.005)


def test_stamps_from_the_far_past_repeated_or_not_finite_are_dropped():
    clock = Clock(20.0)
    stream = _Stream(clock)
    assert stream.add(*row(20.0))
    assert not stream.add(*row(20.0 - HISTORY_S - 0.1))
    assert not stream.add(*row(20.0))
    assert not stream.add(*row(float("nan")))
    assert stream.dropped == {"future": 0, "past": 1, "repeated": 1, "non_finite": 1}
    assert stream.dropped_total == 3


def test_rows_are_kept_in_stamp_order_and_seen_once_the_clock_reaches_them():
    clock = Clock(5.0)
    stream = _Stream(clock)
    for t in (5.0, 4.98, 4.99):  # out of order, within the history
        assert stream.add(*row(t))
    assert [r[0] for r in stream.between(0.0, 10.0)] == [4.98, 4.99, 5.0]
    assert stream.add(*row(5.0 + 0.5 * FUTURE_S))  # published just before its clock
    assert stream.latest()[0] == 5.0
    clock.t = 5.0 + 0.5 * FUTURE_S
    assert stream.latest()[0] == pytest.approx(5.0 + 0.5 * FUTURE_S)


def reference(t0: float, t1: float, points: int = 5) -> dict:
    t = np.linspace(t0, t1, points)
    zeros = np.zeros((points, 3))
    return {"t": t, "p": zeros, "v": zeros, "a": zeros, "j": zeros, "w": zeros}


def test_the_watch_counts_what_a_stock_pilot_refuses():
    watch = PilotWatch("stock", times="message")
    watch.armed = True
    assert watch.reference(reference(1.0, 1.2), now=1.0, sender="/episode")
    assert watch.reference(reference(1.2, 1.4), now=1.1, sender="/episode")  # appended
    assert not watch.reference(reference(1.3, 1.5), now=1.2, sender="/episode")  # overlaps
    assert not watch.reference(reference(1.5, 1.5, points=1), now=1.2)  # malformed
    bad = reference(1.5, 1.7)
    bad["p"][2, 0] = np.nan
    assert not watch.reference(bad, now=1.2)
    assert watch.rejected == 3 and watch.seen == 5
    watch.telemetry(1.3, armed=False, in_queue=1, left_s=0.1)
    assert watch.disarmed_at == pytest.approx(1.3)
    assert not watch.reference(reference(1.4, 1.6), now=1.35)  # a disarmed pilot takes none
    assert "disarmed" in watch.last_problem


def test_the_watch_reports_a_pilot_that_refuses_everything_for_a_second():
    """A reference 50 s ahead blocks a stock queue: the episode's references are all refused
    (the world refused 73, the episode once said 0)."""
    watch = PilotWatch("stock", times="message")
    watch.armed = True
    watch.trusted = {"/episode"}
    assert watch.reference(reference(50.0, 52.0), now=0.0, sender="/someone")
    assert watch.overridden(1.0) is None  # not flown yet
    t = 0.1
    while t < 0.1 + REJECTED_FOR_S - 0.05:
        assert not watch.reference(reference(t, t + 0.2), now=t, sender="/episode")
        assert watch.refusing() is None
        t += 0.1
    assert not watch.reference(reference(t, t + 0.2), now=t + 0.1, sender="/episode")
    assert "every reference refused" in watch.refusing()
    assert watch.overridden(50.0) is not None and "/someone" in watch.overridden(50.0)
    assert watch.rejected == 11


def test_an_accepted_reference_ends_a_run_of_refusals():
    watch = PilotWatch("stock", times="message")
    watch.armed = True
    assert not watch.reference(reference(0.0, 0.0, points=1), now=0.0)
    assert not watch.reference(reference(0.0, 0.0, points=1), now=REJECTED_FOR_S + 0.1)
    assert watch.refusing() is not None
    assert watch.reference(reference(2.0, 2.2), now=2.0)
    assert watch.refusing() is None


def test_the_watch_takes_the_pilots_queue_end_from_its_telemetry():
    """A reference lost on the way, or a queue cleared by a force_hover, leaves the mirror
    wrong: telemetry, once no reference is on its way, sets it right."""
    watch = PilotWatch("stock", settle_s=0.05, times="message")
    watch.armed = True
    watch.reference(reference(1.0, 3.0), now=1.0)
    watch.telemetry(1.02, armed=True, in_queue=0, left_s=0.0)  # too soon: may be on its way
    assert watch.resynced == 0 and watch.queue.end == pytest.approx(3.0)
    watch.telemetry(1.1, armed=True, in_queue=0, left_s=0.0)  # the pilot's queue is empty
    assert watch.resynced == 1 and watch.queue.end is None
    assert watch.reference(reference(1.2, 1.4), now=1.2)  # would have been refused before
    watch.telemetry(1.3, armed=True, in_queue=1, left_s=0.1)  # agrees: nothing changes
    assert watch.resynced == 1


def test_a_teleported_load_is_a_jump_and_flight_is_not():
    t = np.arange(0.0, 2.0, 0.01)
    p = np.stack([np.cos(1.5 * t), np.sin(1.5 * t), 1.0 + 0.1 * np.sin(3 * t)], axis=1)
    v = np.stack([-1.5 * np.sin(1.5 * t), 1.5 * np.cos(1.5 * t), 0.3 * np.cos(3 * t)], axis=1)
    q = np.array([1.0, 0.0, 0.0, 0.0])
    rows = [(t[k], p[k], q, v[k]) for k in range(len(t))]
    assert all(load_jump(a, b) is None for a, b in zip(rows, rows[1:]))
    moved = (t[5] + 0.01, p[5] + np.array([1.0, 0.0, 0.0]), q, v[5])
    assert "jumped 1.0" in load_jump(rows[5], moved)
    stopped = (t[5] + 0.01, p[5] + 0.01 * v[5], q, np.zeros(3))  # at rest where it flew at 1.5
    assert load_jump(rows[5], stopped) is not None


def test_configuration_differences_name_each_key():
    ours = {"enabled": True, "rate": 100.0, "gains": [1.0, 2.0], "inner": {"mass": 1.4}}
    theirs = {"enabled": False, "rate": 100.0 + 1e-12, "gains": [1.0, 2.5], "inner": {"mass": 1.4}}
    assert config_differences(ours, theirs, "imu") == [
        "imu.enabled: this episode True, the world False",
        "imu.gains[1]: this episode 2.0, the world 2.5",
    ]
    assert config_differences(ours, ours, "imu") == []


@pytest.mark.parametrize(
    "options, named",
    [
        ({"real_time_factor": -1.0}, "--real-time-factor"),
        ({"real_time_factor": float("nan")}, "--real-time-factor"),
        ({"real_time_factor": float("inf")}, "--real-time-factor"),
        ({"state_rate_hz": 0.0}, "--state-rate"),
        ({"state_rate_hz": 5000.0}, "--state-rate"),
        ({"mocap_rate_hz": 30.0}, "--mocap-rate 30"),
    ],
)
def test_bad_world_options_are_usage_errors(options, named):
    with pytest.raises(UsageError, match=named):
        WorldOptions(**options)


def test_a_state_rate_of_no_whole_number_of_physics_steps_is_refused(paper_config):
    """--state-rate 300 once ran at 333 Hz without saying so."""
    with pytest.raises(UsageError, match=r"--state-rate 300: expected a whole number"):
        WorldNode(paper_config, WorldOptions(state_rate_hz=300.0, mocap_rate_hz=100.0))


@pytest.mark.parametrize(
    "argv, named",
    [
        (["world", "--real-time-factor", "-1"], "--real-time-factor"),
        (["world", "--state-rate", "0"], "--state-rate"),
        (["world", "--mocap-rate", "30"], "--mocap-rate"),
        (["world", "--duration", "-1"], "--duration"),
    ],
)
def test_bad_world_flags_end_in_one_line(argv, named, capsys):
    from cableload_sim.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def flying_world(config) -> WorldNode:
    world = WorldNode(config, WorldOptions(real_time_factor=0.0))
    for i in range(world.n):
        world.receive(i, "enable", True)
        world.receive(i, "start", None)
    world.step_slice()
    assert all(p.state is PilotState.HOVER for p in world.pilots)
    return world


def test_one_bad_message_never_ends_the_world(paper_config):
    """An empty reference on a pilot's topic once raised IndexError in the world's loop."""
    world = flying_world(paper_config)
    empty = {k: np.zeros((0, 3)) for k in ("p", "v", "a", "j", "w")}
    world.receive(0, "trajectory", {**empty, "t": np.zeros(0)})
    world.receive(1, "trajectory", {"t": "not an array"})
    world.step_slice()
    assert world.pilots[0].queue.rejected == 1
    assert any("rejected" in m and "expected at least 2 points" in m for m in world.messages)
    assert world.bad_commands == 1
    assert all(p.state is PilotState.HOVER for p in world.pilots)


def test_off_to_one_quadrotor_in_flight_stops_the_flight_and_says_so(paper_config):
    world = flying_world(paper_config)
    world.receive(1, "off", None)
    world.step_slice()
    assert any("quad2 switched off in flight; the flight stops here" in m for m in world.messages), list(
        world.messages
    )
    assert all(p.state is PilotState.OFF for p in world.pilots)
    state = world.sim.world_state().load_p.copy()
    world.step_slice()
    assert np.array_equal(world.sim.world_state().load_p, state)  # held
