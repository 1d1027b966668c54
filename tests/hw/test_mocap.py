"""The load's twist from its motion-capture stream: against the simulator's true twist, under
the configured noise and rate."""

from __future__ import annotations

import flights
import numpy as np
import pytest

from cableload_sim.params import load_config
from cableload_sim.physics.sensing import MotionCapture
from cableload_sim.rotations import quat_to_matrix
from hw.mocap import BodyTracker


def captured_flight(seed: int = 3):
    """A formation eight (true state every 10 ms) and the load's motion capture of it."""
    config = load_config(overrides=["simulation.log_rate_hz=100"])
    result = flights.fly_formation(config, 12.0, trajectory="eight-medium")
    s = result.samples
    mocap = MotionCapture(config.sensing, 1, np.random.default_rng(seed))
    frames = [mocap.capture(t, s.load_p[k : k + 1], s.load_q[k : k + 1]) for k, t in enumerate(s.t)]
    return config, s, frames


def test_the_load_twist_follows_the_true_one_under_the_configured_noise():
    config, s, frames = captured_flight()
    assert config.sensing.mocap_rate_hz == 100.0
    tracker = BodyTracker.for_load(config.sensing)
    v_est, w_est = [], []
    for k, frame in enumerate(frames):
        assert tracker.add(frame.t, frame.p[0], frame.q[0])
        _, v, _, omega = tracker.estimate(s.t[k])
        v_est.append(v)
        w_est.append(omega)
    settled = s.t > 1.0
    v_err = np.linalg.norm(np.array(v_est) - s.load_v, axis=1)[settled]
    w_err = np.linalg.norm(np.array(w_est) - s.load_omega, axis=1)[settled]
    speed = np.linalg.norm(s.load_v, axis=1)[settled]
    assert speed.max() > 0.8  # a real test: the load moves
    assert np.sqrt(np.mean(v_err**2)) < 0.03  # m/s
    assert np.sqrt(np.mean(w_err**2)) < 0.2  # rad/s
    # far better than differencing the raw poses
    raw = np.array([f.p[0] for f in frames])
    fd = np.gradient(raw, s.t, axis=0)
    fd_err = np.linalg.norm(fd - s.load_v, axis=1)[settled]
    assert np.sqrt(np.mean(v_err**2)) < 0.5 * np.sqrt(np.mean(fd_err**2))
    assert abs(tracker.rate_hz() - 100.0) < 1.0


def test_dropped_and_late_frames_are_skipped_and_the_age_grows():
    config, s, frames = captured_flight()
    tracker = BodyTracker.for_load(config.sensing)
    rng = np.random.default_rng(0)
    used = 0
    for frame in frames[:600]:
        if rng.random() < 0.1:  # a dropped frame
            continue
        used += tracker.add(frame.t, frame.p[0], frame.q[0])
    assert tracker.add(frames[300].t, frames[300].p[0], frames[300].q[0]) is False  # out of order
    assert tracker.add(frames[601].t, [np.nan, 0.0, 0.0], frames[601].q[0]) is False
    assert tracker.dropped == 2 and tracker.frames == used
    last = tracker.last_stamp
    assert abs(tracker.age(last + 0.25) - 0.25) < 1e-12
    # the attitude estimate stays a rotation close to the truth
    _, _, q, _ = tracker.estimate(last)
    k = int(np.argmin(np.abs(s.t - last)))
    rel = quat_to_matrix(q).T @ quat_to_matrix(s.load_q[k])
    assert np.degrees(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1, 1))) < 1.0


def test_a_body_watched_without_its_filter_keeps_its_age_rate_and_position():
    config, s, frames = captured_flight()
    tracker = BodyTracker.for_quadrotor(config.sensing, "quad1", filtered=False)
    for frame in frames[:200]:
        assert tracker.add(frame.t, frame.p[0], frame.q[0])
    np.testing.assert_allclose(tracker.position, frames[199].p[0])
    assert abs(tracker.rate_hz() - 100.0) < 1.0
    assert abs(tracker.age(frames[199].t + 0.1) - 0.1) < 1e-12
    with pytest.raises(RuntimeError, match="without its filter"):
        tracker.estimate(frames[199].t)
