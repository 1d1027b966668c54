"""Sensing: motion capture with the configured noise, bias and latency; filters whose estimates
are well below the raw noise on a flown trajectory."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cableload_sim.params import SensingParams
from cableload_sim.physics.sensing import MotionCapture, PoseFilter, Sensors
from cableload_sim.rotations import quat_angle_between, quat_conjugate, quat_log, quat_multiply

MOCAP = SensingParams(
    enabled=True,
    mocap_rate_hz=100.0,
    latency_s=0.005,
    position_noise_m=0.0005,
    attitude_noise_rad=0.003,
    position_bias_m=0.001,
    attitude_bias_rad=0.005,
)


def still_poses(bodies: int):
    p = np.tile([1.0, -2.0, 1.5], (bodies, 1))
    q = np.tile([np.cos(0.3), 0.0, 0.0, np.sin(0.3)], (bodies, 1))
    return p, q


def test_noise_bias_and_latency_match_the_config(rng):
    mocap = MotionCapture(MOCAP, 4, rng)
    p, q = still_poses(4)
    captures = [mocap.capture(0.01 * k, p, q) for k in range(5000)]
    assert all(c.available == pytest.approx(c.t + 0.005) for c in captures)
    dp = np.array([c.p - p for c in captures])  # (k, bodies, 3)
    dq = np.array([quat_log(quat_multiply(quat_conjugate(q), c.q)) for c in captures])
    # per body, the errors' mean is its constant bias, their spread the white noise
    np.testing.assert_allclose(dp.mean(axis=0), mocap.position_bias, atol=4 * 0.0005 / 70)
    np.testing.assert_allclose(dq.mean(axis=0), mocap.attitude_bias, atol=4 * 0.003 / 70)
    assert dp.std(axis=0) == pytest.approx(np.full((4, 3), 0.0005), rel=0.06)
    assert dq.std(axis=0) == pytest.approx(np.full((4, 3), 0.003), rel=0.06)
    # white: no correlation from one capture to the next
    noise = (dp - dp.mean(axis=0)).reshape(len(captures), -1)
    lag1 = np.mean(noise[1:] * noise[:-1]) / np.mean(noise * noise)
    assert abs(lag1) < 0.03


def test_biases_are_drawn_per_body_with_the_configured_spread():
    biases = np.concatenate(
        [MotionCapture(MOCAP, 10, np.random.default_rng(s)).position_bias for s in range(200)]
    )
    assert biases.std() == pytest.approx(0.001, rel=0.05)
    assert abs(biases.mean()) < 4 * 0.001 / np.sqrt(biases.size)


def test_a_capture_waits_for_its_latency(paper_config):
    params = dataclasses.replace(MOCAP, latency_s=0.02, position_bias_m=0.0, attitude_bias_rad=0.0)
    sensors = Sensors(params, paper_config.system, np.random.default_rng(0))
    p, q = still_poses(4)
    sensors.start(0.0, p, q)
    moved = p + [0.5, 0.0, 0.0]  # a jump the filter must not see before its latency
    sensors.capture(0.01, moved, q)
    before, _, _, _ = sensors.estimate(0.0299)
    after, _, _, _ = sensors.estimate(0.0301)
    assert np.all(np.abs(before[:, 0] - p[:, 0]) < 0.01)
    assert np.all(after[:, 0] - p[:, 0] > 0.1)


def test_filter_follows_a_constant_acceleration_without_lag(rng):
    """A constant acceleration is in the filter's model: the estimate converges to the truth
    (no lag) with an error below the raw noise, and the velocity follows."""
    f = PoseFilter([0.3], [0.003], 0.0005, 0.003)
    q = np.array([[1.0, 0.0, 0.0, 0.0]])
    f.start(0.0, np.zeros((1, 3)), q)
    accel = np.array([0.8, -0.5, 0.2])
    errors, speed_errors = [], []
    for k in range(1, 1500):
        t = 0.01 * k
        f.update(t, 0.5 * accel * t**2 + rng.normal(0.0, 0.0005, (1, 3)), q)
        p, v, _, _ = f.predicted(t)
        if t > 5.0:
            errors.append(p[0] - 0.5 * accel * t**2)
            speed_errors.append(v[0] - accel * t)
    assert np.abs(np.mean(errors, axis=0)).max() < 1e-4  # no lag
    assert np.sqrt(np.mean(np.square(errors))) < 0.65 * 0.0005
    assert np.sqrt(np.mean(np.square(speed_errors))) < 0.01


def test_filter_estimates_a_steady_turn(rng):
    """A constant body rate is in the attitude filter's model: rates and attitude converge."""
    from cableload_sim.rotations import quat_exp

    f = PoseFilter([0.3], [0.003], 0.0005, 0.003)
    omega = np.array([0.1, -0.2, 0.4])
    f.start(0.0, np.zeros((1, 3)), np.array([[1.0, 0.0, 0.0, 0.0]]))
    angles, rates = [], []
    for k in range(1, 1500):
        t = 0.01 * k
        truth = quat_exp(omega * t)
        measured = quat_multiply(truth, quat_exp(rng.normal(0.0, 0.003, 3)))
        f.update(t, np.zeros((1, 3)), measured[None, :])
        _, _, q, w = f.predicted(t)
        if t > 5.0:
            angles.append(quat_angle_between(q[0], truth))
            rates.append(w[0] - omega)
    assert np.sqrt(np.mean(np.square(angles))) < 0.5 * 0.003 * np.sqrt(3)
    assert np.sqrt(np.mean(np.square(rates))) < 0.01


@pytest.fixture(scope="module")
def sensed_flight():
    """The teacher on eight-medium through the paper-level sensors (no bias), the observed and
    the true state recorded at every capture."""
    from backends.embedded import EmbeddedBackend
    from backends.runner import run_episode
    from cableload_sim.params import load_config
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    config = load_config(
        overrides=["sensing.enabled=true", "sensing.position_bias_m=0", "sensing.attitude_bias_rad=0"]
    )
    pairs = []

    class Recording(EmbeddedBackend):
        def observe(self):
            observed = super().observe()
            pairs.append((observed, self.sim.world_state()))
            return observed

    backend = Recording(config)
    result = run_episode(backend, make_planner("teacher", config), make_reference("eight-medium"), 12.0)
    return result, pairs[20:]  # past the first 2 s (the filters settle from rest)


def test_estimates_are_well_below_the_raw_noise_on_a_flight(sensed_flight):
    result, pairs = sensed_flight
    assert result.status.value == "completed"

    def rms(values):
        return float(np.sqrt(np.mean(np.square(values))))

    load_p = rms([o.load_p - t.load_p for o, t in pairs])
    uav_p = rms([o.uav_p - t.uav_p for o, t in pairs])
    load_att = rms([quat_angle_between(o.load_q, t.load_q) for o, t in pairs])
    load_v = rms([o.load_v - t.load_v for o, t in pairs])
    load_w = rms([o.load_omega - t.load_omega for o, t in pairs])
    # raw captures: 0.5 mm per axis, 3 mrad per axis (5.2 mrad in angle); a velocity from two
    # captures 10 ms apart would carry 0.5 mm * sqrt(2) / 0.01 s = 0.07 m/s per axis
    assert load_p < 0.75 * 0.0005 and uav_p < 0.85 * 0.0005
    assert load_att < 0.5 * 0.003 * np.sqrt(3)
    assert load_v < 0.02 and load_w < 0.05
    # cable directions from the estimated poses
    dirs = rms([o.cable_dir - t.cable_dir for o, t in pairs])
    assert dirs < 0.003


def test_sensing_off_observes_the_truth_and_on_never_does(paper_config):
    from backends import make_backend
    from backends.base import Scenario

    start = Scenario(np.array([0.0, 0.0, 1.5]), np.array([1.0, 0.0, 0.0, 0.0]), seed=4)
    plain = make_backend("embedded", paper_config)
    plain.reset(start)
    plain.advance()
    truth = plain.sim.world_state()
    assert np.array_equal(plain.observe().load_p, truth.load_p)
    sensed_config = dataclasses.replace(paper_config, sensing=MOCAP)
    sensed = make_backend("embedded", sensed_config)
    sensed.reset(start)
    samples = sensed.advance()
    observed = sensed.observe()
    np.testing.assert_array_equal(samples.load_p[-1], truth.load_p)  # samples stay true
    assert not np.array_equal(observed.load_p, truth.load_p)
    assert np.linalg.norm(observed.load_p - truth.load_p) < 0.01
    again = make_backend("embedded", sensed_config)  # same seed, same observations
    again.reset(start)
    again.advance()
    np.testing.assert_array_equal(again.observe().load_p, observed.load_p)
