"""The load's state estimated from the quadrotors alone, as the paper's teacher first flew: no
motion capture of the load, only each quadrotor's pose, velocity and rotor speeds, the cables'
lengths and where they are attached.

Each quadrotor's own dynamics give the force its cable pulls with: ``m (a + g e3) - f R e3 - D``
(its mass, its acceleration, its thrust ``f`` from the rotor speeds along its thrust axis, its
frame and rotor drag ``D`` as the simulator's aero model has them). That force points from the
quadrotor's attachment point along the cable toward the load, so each cable's far end lies a cable
length away in that direction. The load's pose is the rigid fit of its attachment points to those
ends (weighted by the cables' tensions), and a Kalman filter of that pose (the motion-capture
filter of ``cableload_sim.physics.sensing``, with the noise such a fit has) gives its pose and
twist. The quadrotors' accelerations are the change of their velocities between two decisions,
so the estimate lags and is noisy where they accelerate: the paper's teacher oscillated on its
EKF's estimate, and ``teacher-ekf`` reproduces that case beside the teacher on motion capture.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cableload_sim.params import Config
from cableload_sim.physics.sensing import PoseFilter
from cableload_sim.physics.world import UavTrajectory, WorldState
from cableload_sim.rotations import matrix_to_quat, quat_to_matrix

FIT_POSITION_NOISE_M = 0.02
"""Standard deviation of the fitted load position the filter weighs (m): a quadrotor's
acceleration known to about 1 m/s^2 over a decision turns its cable by about 0.1 rad, 2 cm at a
cable's end after the fit's averaging over three cables."""

FIT_ATTITUDE_NOISE_RAD = 0.04
"""The same for the fitted attitude (rad): 2 cm over attachment points 0.5 m apart."""

MIN_TENSION_N = 0.2
"""A cable pulling less is nearly slack: its direction is not known, its end weighs little."""


def fit_rigid(points: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rotation R and translation p that best map ``points`` (k, 3) onto ``targets`` (k, 3),
    ``p + R points[j] ~ targets[j]`` in the weighted least-squares sense (Kabsch), with
    ``weights`` (k,) > 0."""
    w = weights / weights.sum()
    mean_points = w @ points
    mean_targets = w @ targets
    H = (points - mean_points).T @ (w[:, None] * (targets - mean_targets))
    U, _, Vt = np.linalg.svd(H)
    d = np.sign(np.linalg.det(Vt.T @ U.T))
    R = Vt.T @ np.diag([1.0, 1.0, d]) @ U.T
    return mean_targets - R @ mean_points, R


class LoadFromQuadrotors:
    """Estimates the load's pose, twist, cable directions and tensions from the quadrotors
    (``estimate``), one decision at a time."""

    def __init__(self, config: Config):
        system = config.system
        self.rho = system.attachment_array()
        self.uav_attach = np.array([q.attachment for q in system.quadrotors], dtype=float)
        self.lengths = np.array([c.length for c in system.cables], dtype=float)
        self.masses = np.array([q.mass for q in system.quadrotors], dtype=float)
        self.thrust_coeffs = np.array([q.rotor.thrust_coeff for q in system.quadrotors], dtype=float)
        self.gravity = system.gravity
        self.frame_drag = np.asarray(config.aero.quadrotor_drag, dtype=float)
        self.rotor_drag = float(config.aero.rotor_drag_coeff)
        sensing = config.sensing
        self.filter = PoseFilter(
            np.array([sensing.load_jerk_psd]),
            np.array([sensing.load_angular_accel_psd]),
            FIT_POSITION_NOISE_M,
            FIT_ATTITUDE_NOISE_RAD,
        )
        self.reset()

    def reset(self) -> None:
        self._last: tuple[float, np.ndarray] | None = None
        self._started = False

    def cable_pulls(self, state: WorldState) -> np.ndarray:
        """The force (n, 3) each cable pulls its quadrotor with, from the quadrotor's motion,
        thrust and drag (N, world frame)."""
        if self._last is not None and state.t > self._last[0]:
            t0, v0 = self._last
            accel = (state.uav_v - v0) / (state.t - t0)
        else:
            accel = np.zeros_like(state.uav_v)
        self._last = (state.t, state.uav_v.copy())
        R = quat_to_matrix(state.uav_q)  # (n, 3, 3)
        thrust = self.thrust_coeffs * np.sum(state.rotor_speeds**2, axis=1)
        body_v = np.einsum("nji,nj->ni", R, state.uav_v)
        drag_body = -self.frame_drag * np.abs(body_v) * body_v
        spin = self.rotor_drag * np.sum(state.rotor_speeds, axis=1)
        drag_body[:, :2] -= spin[:, None] * body_v[:, :2]
        drag = np.einsum("nij,nj->ni", R, drag_body)
        weight = self.masses[:, None] * np.array([0.0, 0.0, self.gravity])
        return self.masses[:, None] * accel + weight - thrust[:, None] * R[:, :, 2] - drag

    def estimate(self, state: WorldState) -> WorldState:
        """``state`` with the load's pose and twist, the cable directions and tensions replaced
        by their estimates from the quadrotors."""
        pulls = self.cable_pulls(state)
        tensions = np.linalg.norm(pulls, axis=1)
        toward_load = pulls / np.maximum(tensions, 1e-9)[:, None]
        R_uav = quat_to_matrix(state.uav_q)
        uav_ends = state.uav_p + np.einsum("nij,nj->ni", R_uav, self.uav_attach)
        load_ends = uav_ends + self.lengths[:, None] * toward_load
        p, R = fit_rigid(self.rho, load_ends, np.maximum(tensions, MIN_TENSION_N))
        q = matrix_to_quat(R)
        if not self._started:
            self.filter.start(state.t, p[None, :], q[None, :])
            self._started = True
        else:
            self.filter.update(state.t, p[None, :], q[None, :])
        load_p = self.filter.x[0, 0].copy()
        load_q = self.filter.q[0].copy()
        R_load = quat_to_matrix(load_q)
        directions = uav_ends - (load_p + self.rho @ R_load.T)
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        return dataclasses.replace(
            state,
            load_p=load_p,
            load_q=load_q,
            load_v=self.filter.x[0, 1].copy(),
            load_omega=self.filter.omega[0].copy(),
            cable_dir=directions,
            cable_tension=np.clip(tensions, 0.0, None),
        )


class OnEstimatedLoad:
    """A planner that sees the load only through ``LoadFromQuadrotors``; the rest of the state
    as observed."""

    def __init__(self, planner, estimator: LoadFromQuadrotors, name: str):
        self.planner = planner
        self.estimator = estimator
        self.name = name

    def __getattr__(self, attribute: str):
        return getattr(self.planner, attribute)

    def reset(self) -> None:
        self.estimator.reset()
        self.planner.reset()

    def plan(self, state: WorldState, reference) -> list[UavTrajectory]:
        return self.planner.plan(self.estimator.estimate(state), reference)


def teacher_on_estimate(config: Config, **options) -> OnEstimatedLoad:
    """The teacher fed the load's state estimated from the quadrotors (``teacher-ekf``)."""
    from planners.teacher import TeacherPlanner

    return OnEstimatedLoad(
        TeacherPlanner.from_config(config, **options), LoadFromQuadrotors(config), "teacher-ekf"
    )
