"""The load estimated from the quadrotors alone: the rigid fit is exact on exact points, at hover
the cables' pulls are the statics' tensions and the estimate is the load's pose, and the teacher
flies on it (worse than on motion capture, as the paper's teacher did on its EKF)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from backends import make_backend
from backends.runner import run_episode
from cableload_sim.params import load_config
from cableload_sim.physics.statics import hover_state
from cableload_sim.rotations import quat_angle_between, quat_from_euler, quat_to_matrix
from cableload_sim.trajectories import make_reference
from planners import make_planner
from planners.load_estimate import LoadFromQuadrotors, fit_rigid


def test_the_rigid_fit_recovers_a_rotation_and_translation():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(4, 3))
    R = quat_to_matrix(quat_from_euler(0.3, -0.2, 2.0))
    p = np.array([1.0, -2.0, 0.5])
    found_p, found_R = fit_rigid(points, p + points @ R.T, np.array([1.0, 2.0, 0.5, 1.0]))
    assert found_p == pytest.approx(p, abs=1e-12)
    assert found_R == pytest.approx(R, abs=1e-12)
    assert np.linalg.det(found_R) == pytest.approx(1.0)


@pytest.mark.parametrize("uavs", [3, 4])
def test_at_hover_the_estimate_is_the_load_and_the_pulls_are_the_tensions(uavs):
    config = load_config(uavs=uavs)
    load_q = quat_from_euler(0.0, 0.0, 0.7)
    hover = hover_state(config.system, np.array([1.0, 2.0, 1.5]), load_q)
    n = config.system.n_uavs
    state = dataclasses.replace(  # the cables are what the estimate must not read
        hover.world_state(), cable_tension=np.full(n, np.nan), cable_dir=np.full((n, 3), np.nan)
    )
    estimator = LoadFromQuadrotors(config)
    pulls = estimator.cable_pulls(state)
    assert np.linalg.norm(pulls, axis=1) == pytest.approx(hover.tensions, rel=1e-6)
    estimated = estimator.estimate(state)
    # 1 mm: the cables stretch by tension / stiffness, which the estimate does not know
    assert np.linalg.norm(estimated.load_p - hover.load_p) < 2e-3
    assert np.degrees(quat_angle_between(estimated.load_q, hover.load_q)) < 0.2
    assert np.isfinite(estimated.cable_dir).all() and np.isfinite(estimated.cable_tension).all()


def test_the_teacher_flies_on_the_estimate_worse_than_on_motion_capture():
    config = load_config()
    reference = make_reference("eight", ax=2.2, ay=2.0, w=0.5)
    rmse = {}
    for name in ("teacher", "teacher-ekf"):
        result = run_episode(make_backend("embedded", config), make_planner(name, config), reference, 8.0)
        assert result.status.value == "completed", (name, result.message)
        rmse[name] = result.metrics["rmse_position_m"]
    assert rmse["teacher-ekf"] < 0.05  # it flies the eight
    assert rmse["teacher-ekf"] > 1.5 * rmse["teacher"]  # and pays for the estimate's lag and noise
