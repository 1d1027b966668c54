"""The onboard IMU and state estimate (``kernels.onboard``, ``[imu]``): the kernel against its
NumPy twin, the noise it draws, what the estimate converges to, and flights on it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from cableload_sim.params import ConfigError, load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.kernels.onboard import normal
from cableload_sim.physics.simulator import ONBOARD_SIZE, Simulator
from cableload_sim.rotations import quat_angle_between, quat_exp, quat_multiply, quat_to_matrix

sys.path.insert(0, str(Path(__file__).parent))
import numpy_twins_onboard as twin  # noqa: E402

QUIET = [
    "imu.enabled=true",
    "imu.gyro_noise_density=0.0",
    "imu.accel_noise_density=0.0",
    "sensing.position_noise_m=0.0",
    "sensing.attitude_noise_rad=0.0",
]
"""The IMU on without noise (biases as configured)."""
NO_BIAS = [
    "imu.gyro_bias=0.0",
    "imu.accel_bias=0.0",
    "sensing.position_bias_m=0.0",
    "sensing.attitude_bias_rad=0.0",
]


def quad_block(x, i, field, width=3):
    o = layout.quad_offset(i) + field
    return x[o : o + width]


def estimate(sim, i):
    cs = sim.ctrl[i]
    return (
        cs[layout.CS_EST_POS : layout.CS_EST_POS + 3],
        cs[layout.CS_EST_QUAT : layout.CS_EST_QUAT + 4],
        cs[layout.CS_EST_VEL : layout.CS_EST_VEL + 3],
    )


def test_noise_is_standard_normal_and_a_function_of_seed_and_counter():
    draws = np.array([normal(12345, k) for k in range(20000)])
    assert abs(draws.mean()) < 0.03 and abs(draws.std() - 1.0) < 0.02
    assert abs(np.mean(draws[:-1] * draws[1:])) < 0.03  # neighbours uncorrelated
    assert np.mean(np.abs(draws) > 3.0) < 0.005
    again = np.array([normal(12345, k) for k in range(100)])
    np.testing.assert_array_equal(again, draws[:100])
    other = np.array([normal(12346, k) for k in range(100)])
    assert np.abs(other - draws[:100]).min() > 0.0
    # the twin's Python integers give the same numbers, to the kernel's approximate log/cos
    np.testing.assert_allclose([twin.normal(12345, k) for k in range(200)], draws[:200], rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [3, 4])
def test_onboard_update_matches_twin(n):
    config = load_config(uavs=n, overrides=["imu.enabled=true"])
    sim = Simulator(config)
    sim.seed_onboard(5)
    rng = np.random.default_rng(n)
    sim.advance(137)  # the estimates started and running, captures in flight
    x = sim.x.copy()
    for i in range(n):  # moving, turning, tilted
        o = layout.quad_offset(i)
        x[o + layout.QUAD_VEL : o + layout.QUAD_VEL + 3] = rng.normal(0, 1, 3)
        x[o + layout.QUAD_RATE : o + layout.QUAD_RATE + 3] = rng.normal(0, 1, 3)
        q = quat_multiply(x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4], quat_exp(rng.normal(0, 0.3, 3)))
        x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] = q
    force = np.zeros((n + 2, 3))
    force[1 : n + 1] = rng.normal(0, 5, (n, 3))
    R = np.array(
        [quat_to_matrix(x[layout.body_offset(b) + layout.BODY_QUAT :][:4]).ravel() for b in range(n + 1)]
    )
    dt = sim.decimation * sim.h
    for update in (100, 101, 102, 103, 104, 105):  # a capture at 100 and 105, 100's used at 103
        for i in range(n):
            cs = sim.ctrl[i].copy()
            want_cs, p, q, v, w = twin.onboard_update(x, i, cs, sim.model, force[i + 1], update, dt)
            xe = np.full(x.size, np.nan)
            Re = np.zeros((n + 1, 9))
            kernels.onboard_update(x, i, cs, sim.model, force, R, update, dt, xe, Re, np.zeros(4))
            np.testing.assert_allclose(cs, want_cs, rtol=1e-11, atol=1e-13)
            np.testing.assert_allclose(quad_block(xe, i, layout.QUAD_POS), p, rtol=1e-12)
            np.testing.assert_allclose(quad_block(xe, i, layout.QUAD_QUAT, 4), q, atol=1e-13)
            np.testing.assert_allclose(quad_block(xe, i, layout.QUAD_VEL), v, atol=1e-12)
            np.testing.assert_allclose(quad_block(xe, i, layout.QUAD_RATE), w, atol=1e-12)
            np.testing.assert_array_equal(
                quad_block(xe, i, layout.QUAD_ROTOR, 4), quad_block(x, i, layout.QUAD_ROTOR, 4)
            )
            np.testing.assert_allclose(Re[i + 1], quat_to_matrix(q).ravel(), atol=1e-13)
            sim.ctrl[i] = cs


def test_a_capture_is_used_its_latency_after_it_was_taken():
    config = load_config(overrides=["imu.enabled=true", "sensing.latency_s=0.005"])
    sim = Simulator(config)
    # 500 Hz updates, 100 Hz captures: every 5th update; 5 ms is 2.5 updates, used at the 3rd
    assert sim.model[layout.M_IMU_CAPTURE_EVERY] == 5
    assert sim.model[layout.M_IMU_CAPTURE_DELAY] == 3
    sim.advance(2 * 10 + 1)  # updates 0..10 (physics steps 0..20)
    slots = sim.ctrl[0, layout.CS_EST_PENDING :].reshape(layout.PENDING_SLOTS, -1)
    # the capture of update 10 waits for update 13; those of 0 and 5 were used
    assert sorted(slots[:, layout.PENDING_USE]) == [-1.0, -1.0, -1.0, 13.0]


def test_exact_sensors_keep_the_estimate_on_the_truth_in_hover():
    sim = Simulator(load_config(overrides=QUIET + NO_BIAS))
    sim.seed_onboard(1)
    start = sim.x.copy()
    sim.advance(5000)
    for i in range(sim.n):
        p, q, v = estimate(sim, i)
        assert np.linalg.norm(p - quad_block(sim.x, i, layout.QUAD_POS)) < 1e-5
        assert quat_angle_between(q, quad_block(sim.x, i, layout.QUAD_QUAT, 4)) < 1e-5
        assert np.linalg.norm(v) < 1e-4
    np.testing.assert_allclose(sim.x[:3], start[:3], atol=1e-4)  # the load holds its place


def test_the_estimate_learns_constant_imu_biases():
    """Biases 4x the configured ones, no noise, motion capture without bias: after 15 s the
    estimated biases are the true ones to 5 % of their size, and the load is held."""
    config = load_config(
        overrides=QUIET
        + [
            "imu.gyro_bias=0.02",
            "imu.accel_bias=0.2",
            "sensing.position_bias_m=0.0",
            "sensing.attitude_bias_rad=0.0",
        ]
    )
    sim = Simulator(config)
    sim.seed_onboard(3)
    start = sim.x[:3].copy()
    sim.advance(15000)
    for i in range(sim.n):
        cs = sim.ctrl[i]
        for true, est in (
            (layout.CS_IMU_GYRO_BIAS, layout.CS_EST_GYRO_BIAS),
            (layout.CS_IMU_ACCEL_BIAS, layout.CS_EST_ACCEL_BIAS),
        ):
            b, c = cs[true : true + 3], cs[est : est + 3]
            assert np.linalg.norm(b - c) < 0.05 * np.linalg.norm(b), (i, b, c)
    assert np.linalg.norm(sim.x[:3] - start) < 0.005


def test_estimate_errors_with_the_configured_sensors():
    """With the paper's noise and biases, in hover: the estimate's error is of the order of the
    motion capture's bias (1 mm, 5 mrad) plus what the noise adds, and the controllers hold
    the load within a centimetre."""
    sim = Simulator(load_config(overrides=["imu.enabled=true"]))
    sim.seed_onboard(11)
    start = sim.x[:3].copy()
    pos_err, att_err = [], []
    for _ in range(50):
        sim.advance(100)
        for i in range(sim.n):
            p, q, _ = estimate(sim, i)
            pos_err.append(np.linalg.norm(p - quad_block(sim.x, i, layout.QUAD_POS)))
            att_err.append(quat_angle_between(q, quad_block(sim.x, i, layout.QUAD_QUAT, 4)))
    assert np.sqrt(np.mean(np.square(pos_err))) < 0.006
    assert np.sqrt(np.mean(np.square(att_err))) < 0.02
    assert np.linalg.norm(sim.x[:3] - start) < 0.01


def test_noise_and_biases_follow_the_seed_and_not_the_call_split():
    config = load_config(overrides=["imu.enabled=true"])
    runs = []
    for seed, chunks in ((4, [1000]), (4, [333, 1, 666]), (5, [1000])):
        sim = Simulator(config)
        sim.seed_onboard(seed)
        for c in chunks:
            sim.advance(c, log=False)
        runs.append((sim.x.copy(), sim.ctrl.copy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert np.abs(runs[0][0] - runs[2][0]).max() > 1e-6


def test_calibration_survives_a_reset_and_bad_biases_are_refused():
    sim = Simulator(load_config(overrides=["imu.enabled=true"]))
    sim.seed_onboard(9, position_bias=np.full((3, 3), 0.002))
    cal = sim.ctrl[:, layout.CS_IMU_SEED : layout.CS_IMU_SEED + ONBOARD_SIZE].copy()
    np.testing.assert_array_equal(cal[:, 7:10], 0.002)
    sim.reset(np.array([1.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]))
    np.testing.assert_array_equal(sim.ctrl[:, layout.CS_IMU_SEED : layout.CS_IMU_SEED + ONBOARD_SIZE], cal)
    assert (sim.ctrl[:, layout.CS_EST_READY] == 0.0).all()
    with pytest.raises(ValueError, match="motion-capture bias: expected 3 x 3"):
        sim.seed_onboard(9, attitude_bias=np.zeros((2, 3)))


@pytest.mark.parametrize(
    "override, message",
    [
        ("imu.gyro_bias=-0.1", "imu.gyro_bias: expected a non-negative number"),
        ("imu.position_bandwidth=0.0", "imu.position_bandwidth: expected a positive number"),
        ("imu.position_bandwidth=40.0", "expected bandwidths below 16.7 rad/s"),
        ("sensing.latency_s=0.05", "sensing.latency_s: with imu.enabled, expected at most 0.03"),
        ("sensing.mocap_rate_hz=250.0", None),
        ("sensing.mocap_rate_hz=125.0", None),
        ("sensing.mocap_rate_hz=200.0", "with imu.enabled, expected a whole fraction of"),
        ("imu.colour=1", "unknown key"),
    ],
)
def test_imu_config_is_checked(override, message):
    overrides = ["imu.enabled=true", override]
    if message is None:
        load_config(overrides=overrides)
        return
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=overrides)


def test_off_by_default_and_the_controller_then_flies_on_the_truth():
    config = load_config()
    assert not config.imu.enabled
    sim = Simulator(config)
    sim.advance(50)
    assert sim.model[layout.M_IMU] == 0.0
    assert (sim.ctrl[:, layout.CS_EST_READY] == 0.0).all()  # never started


@pytest.mark.parametrize("imu", [True, False])
def test_the_run_log_holds_the_onboard_estimate_beside_the_truth(tmp_path, imu):
    """With ``[imu]`` on, every plan period the log records each quadrotor's onboard estimate;
    read back, it is within the estimate's error of the true state logged at the same times.
    Without it there is no such topic."""
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.io.runlog import RunLogWriter, read_run
    from cableload_sim.trajectories import make_reference
    from planners.formation import FormationPlanner

    config = load_config(overrides=["imu.enabled=true"] if imu else [])
    path = tmp_path / "run.bag"
    result = run_episode(
        make_backend("embedded", config),
        FormationPlanner(config.system, tilt=True),
        make_reference("eight-slow"),
        2.0,
        logger=RunLogWriter(path, config),
    )
    assert result.status.value == "completed"
    run = read_run(path)
    if not imu:
        assert run.onboard is None
        return
    onboard = run.onboard
    assert onboard is not None and len(onboard.t) >= 19  # every plan after the first update
    assert np.all(np.diff(onboard.t) > 0)
    k = np.searchsorted(run.samples.t, onboard.t)
    assert np.allclose(run.samples.t[k], onboard.t, atol=1e-9)  # logged at sample times too
    error = np.linalg.norm(onboard.p - run.samples.uav_p[k], axis=-1)
    assert error.max() < 0.02 and 1e-5 < np.sqrt(np.mean(error**2)) < 0.01
    speed_error = np.linalg.norm(onboard.v - run.samples.uav_v[k], axis=-1)
    assert speed_error.max() < 0.2
    tilt = np.abs(np.sum(onboard.q * run.samples.uav_q[k], axis=-1))
    assert tilt.min() > np.cos(0.02)  # within about 2.3 deg (quaternion half-angle)
