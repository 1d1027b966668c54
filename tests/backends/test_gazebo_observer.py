"""The Gazebo backend's view of the world: the instant a privileged state is built at."""

from __future__ import annotations

import numpy as np
import pytest

from backends.gazebo import _Stream, newest_common_stamp


def stream(stamps, speed: float = 1.0) -> _Stream:
    """A stream of positions moving along x at ``speed`` (m/s), one row per stamp."""
    out = _Stream()
    for t in stamps:
        out.add(t, np.array([speed * t, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]))
    return out


def test_the_state_is_built_where_every_quadrotor_is_known():
    """The load's newest stamp is a state period ahead of one quadrotor's: the system is known
    one period earlier, where the quadrotor's position is measured, not held."""
    load = stream([10.00, 10.01, 10.02])
    quads = [stream([10.00, 10.01, 10.02], 2.0), stream([10.00, 10.01], 2.0)]
    t = newest_common_stamp(load, quads)
    assert t == 10.01
    measured = quads[1].at(np.array([t]))[0][0, 0]
    assert measured == 2.0 * t
    held = quads[1].at(np.array([10.02]))[0][0, 0]  # what the load's newest stamp would give
    assert 2.0 * 10.02 - held > 0.019  # 2 cm behind the quadrotor: a degree on a 1 m cable


def test_an_optional_stream_counts_only_once_it_publishes():
    load = stream([1.0, 1.1, 1.2])
    quads = [stream([1.0, 1.1, 1.2])]
    assert newest_common_stamp(load, quads, (_Stream(),)) == 1.2  # no tension topic (Gazebo)
    assert newest_common_stamp(load, quads, (stream([1.0, 1.1]),)) == 1.1


def test_no_common_instant_yet():
    assert newest_common_stamp(stream([1.0]), [_Stream()]) is None
    assert newest_common_stamp(stream([2.0]), [stream([1.0])]) is None  # load only later
    assert newest_common_stamp(_Stream(), [stream([1.0])]) is None


def test_the_mocap_rate_may_be_lower_than_the_state_rate():
    """Load poses at 50 Hz, quadrotor states at 100 Hz: the newest load stamp they share."""
    load = stream([0.00, 0.02, 0.04])
    quads = [stream([0.00, 0.01, 0.02, 0.03, 0.04, 0.05]), stream([0.00, 0.01, 0.02, 0.03])]
    assert newest_common_stamp(load, quads) == 0.02


def _backend_without_a_clock(monkeypatch, master_up: bool):
    """A Gazebo backend's clock handling alone (no ROS): no /clock received yet."""
    import threading

    from backends import gazebo

    backend = object.__new__(gazebo.GazeboBackend)
    backend._clock_cond = threading.Condition()
    backend.clock = None
    backend._clock_wall = backend._master_checked = 0.0  # the master is asked at once
    backend._world_checked = float("inf")  # no world to ask about
    backend.world = backend._clock_source = backend._clock_back = None
    backend._failure = None
    backend._failure_status = "backend_failed"
    backend.timeout_s = 0.4
    monkeypatch.setattr(gazebo, "master_reachable", lambda timeout: master_up)
    monkeypatch.setattr(gazebo, "SETUP_TIMEOUT_S", 0.3)
    return backend


def test_settling_before_the_first_clock_fails_cleanly_when_the_master_is_lost(monkeypatch):
    """The pilots' topics can connect before the world's /clock does; a master lost during
    the set-up then leaves the clock unconnected. Settling reports it as a ``RosFailure``
    (the episode ends as backend_failed) instead of adding to a clock of None (a CI run's
    TypeError)."""
    from backends.ros1 import RosFailure

    backend = _backend_without_a_clock(monkeypatch, master_up=False)
    with pytest.raises(RosFailure, match="stopped answering"):
        backend._settle()
    backend = _backend_without_a_clock(monkeypatch, master_up=True)
    with pytest.raises(
        RosFailure,
        match=r"no /clock from the world for 0\.3\d s while the "
        r"world's first /clock",
    ):
        backend._settle()
