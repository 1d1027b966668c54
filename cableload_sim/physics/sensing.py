"""What the planners observe: motion capture of every body and a Kalman filter per body.

- ``MotionCapture``: each capture gives the poses of the load and the quadrotors with a
  constant bias per body (drawn once per episode) plus white noise, stamped with the time it
  was taken; it reaches the filters ``latency_s`` later.
- ``PoseFilter``: for a batch of rigid bodies, a constant-acceleration Kalman filter of
  position and world velocity (white jerk) and an error-state (multiplicative) EKF of attitude
  and body rates (white angular acceleration); fed poses, it estimates poses and twists.
- ``Sensors``: both together for one system, turning the true state at capture times into
  the ``WorldState`` a planner is given: the estimates predicted to the planner's time, cable
  directions from the estimated poses, the hover tensions (no sensor measures a tension), and
  the rotor speeds as the quadrotors' telemetry reports them.

Bodies are ordered load first, then quadrotors. Frames and units as in ``world``: world
positions and velocities, quaternions (w, x, y, z) body to world, body rates in the body
frame. Attitude noise and bias are small rotations about the body axes:
``q_measured = q (x) exp(bias + noise)``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from cableload_sim.params import SensingParams, SystemParams
from cableload_sim.physics.statics import hover_geometry
from cableload_sim.physics.world import WorldState
from cableload_sim.rotations import quat_to_matrix

SENSING_STREAM = 2
"""Distinguishes the sensors' random stream from the episode's other ones (link: 1)."""

INITIAL_SPEED_STD = 0.05
"""Standard deviation of the initial velocity (m/s) and body rates (rad/s) of a filter: the
episode starts at rest in hover."""


@dataclass(frozen=True)
class PoseCapture:
    """The measured poses of every body at one capture."""

    t: float
    """When the capture was taken (s)."""
    available: float
    """When it reaches the filters (s)."""
    p: np.ndarray  # (B, 3)
    q: np.ndarray  # (B, 4)


class MotionCapture:
    """Poses of ``n_bodies`` bodies with bias and white noise, as ``params`` say.

    The biases are drawn from ``rng`` when it is made (one flight's calibration), the noise
    at every ``capture``.
    """

    def __init__(self, params: SensingParams, n_bodies: int, rng: np.random.Generator):
        self.params = params
        self.rng = rng
        self.position_bias = rng.normal(0.0, params.position_bias_m, size=(n_bodies, 3))
        self.attitude_bias = rng.normal(0.0, params.attitude_bias_rad, size=(n_bodies, 3))

    def capture(self, t: float, p: np.ndarray, q: np.ndarray) -> PoseCapture:
        """The measurement of the true poses ``p`` (B, 3), ``q`` (B, 4) taken at ``t`` (s)."""
        shape = self.position_bias.shape
        noise_p = self.rng.normal(0.0, self.params.position_noise_m, size=shape)
        noise_q = self.rng.normal(0.0, self.params.attitude_noise_rad, size=shape)
        measured_q = _product(q, _rotation_quat(self.attitude_bias + noise_q))
        return PoseCapture(
            float(t), float(t) + self.params.latency_s, p + self.position_bias + noise_p, measured_q
        )


class PoseFilter:
    """Kalman filters of a batch of rigid bodies from their measured poses.

    Translation, per body and the same for each axis: state (p, v, a), constant
    acceleration, white jerk of spectral density ``jerk_psd`` (m^2/s^5); a smooth flight's
    acceleration changes slowly, so the estimate neither lags nor follows the noise.
    Rotation, per body: nominal attitude q and body rates omega, error state (dtheta, domega)
    with dtheta a small rotation about the body axes, constant rates, white angular
    acceleration of spectral density ``angular_accel_psd`` (rad^2/s^3). Poses are measured
    with white noise of standard deviations ``position_noise`` (m) and ``attitude_noise``
    (rad).
    """

    def __init__(self, jerk_psd, angular_accel_psd, position_noise: float, attitude_noise: float):
        self.jerk_psd = np.asarray(jerk_psd, dtype=float)
        self.angular_accel_psd = np.asarray(angular_accel_psd, dtype=float)
        # A noise-free sensor still leaves the filter something to weigh: 1 um, 1 urad.
        self.position_var = max(position_noise, 1e-6) ** 2
        self.attitude_var = max(attitude_noise, 1e-6) ** 2
        self.t = 0.0

    @property
    def n_bodies(self) -> int:
        return self.jerk_psd.size

    def start(self, t: float, p: np.ndarray, q: np.ndarray) -> None:
        """Bodies at rest at the measured poses ``p`` (B, 3), ``q`` (B, 4) at ``t`` (s)."""
        b = self.n_bodies
        self.t = float(t)
        self.x = np.zeros((b, 3, 3))  # [body, (p, v, a), axis]
        self.x[:, 0, :] = p
        self.q = np.array(q, dtype=float)
        self.omega = np.zeros((b, 3))
        speed_var = INITIAL_SPEED_STD**2
        self.P_trans = np.tile(np.diag([self.position_var, speed_var, speed_var]), (b, 1, 1))
        self.P_rot = np.tile(np.diag([self.attitude_var] * 3 + [speed_var] * 3), (b, 1, 1))

    def update(self, t: float, p: np.ndarray, q: np.ndarray) -> None:
        """Predict to ``t`` (s), not before the last update, then correct with the poses."""
        self._predict(max(float(t), self.t))
        # translation: H = [1, 0, 0] on each axis
        P = self.P_trans
        gain = P[:, :, 0] / (P[:, 0, 0] + self.position_var)[:, None]  # (B, 3)
        self.x += gain[:, :, None] * (p - self.x[:, 0, :])[:, None, :]
        self.P_trans = P - gain[:, :, None] * P[:, None, 0, :]
        # rotation: the measured attitude seen from the predicted one, a small body rotation
        P = self.P_rot
        S = P[:, :3, :3] + self.attitude_var * np.eye(3)
        gain = np.linalg.solve(S, P[:, :3, :]).transpose(0, 2, 1)  # (B, 6, 3) = P H^T S^-1
        residual = _small_rotation(_product(_conjugate(self.q), q))
        correction = np.einsum("bij,bj->bi", gain, residual)
        self.q = _normalized(_product(self.q, _rotation_quat(correction[:, :3])))
        self.omega += correction[:, 3:]
        self.P_rot = P - np.einsum("bij,bjk->bik", gain, P[:, :3, :])
        self.P_rot = 0.5 * (self.P_rot + self.P_rot.transpose(0, 2, 1))

    def predicted(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Position, world velocity, attitude and body rates predicted to ``t`` (s), the filter
        left as it is."""
        dt = max(float(t) - self.t, 0.0)
        p, v, a = self.x[:, 0], self.x[:, 1], self.x[:, 2]
        q = _normalized(_product(self.q, _rotation_quat(self.omega * dt)))
        return p + v * dt + 0.5 * a * dt**2, v + a * dt, q, self.omega.copy()

    def _predict(self, t: float) -> None:
        dt = t - self.t
        if dt <= 0.0:
            return
        F = np.array([[1.0, dt, 0.5 * dt**2], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
        Q = np.array(
            [
                [dt**5 / 20.0, dt**4 / 8.0, dt**3 / 6.0],
                [dt**4 / 8.0, dt**3 / 3.0, dt**2 / 2.0],
                [dt**3 / 6.0, dt**2 / 2.0, dt],
            ]
        )
        self.x = F @ self.x
        self.P_trans = F @ self.P_trans @ F.T + self.jerk_psd[:, None, None] * Q
        # rotation: dtheta' = Exp(-omega dt) dtheta + dt domega
        turn = _rotation_quat(self.omega * dt)
        F = np.tile(np.eye(6), (self.n_bodies, 1, 1))
        F[:, :3, :3] = quat_to_matrix(turn).transpose(0, 2, 1)
        F[:, :3, 3:] = dt * np.eye(3)
        Q = np.kron(Q[1:, 1:], np.eye(3))  # white angular acceleration on (theta, omega)
        self.P_rot = F @ self.P_rot @ F.transpose(0, 2, 1) + self.angular_accel_psd[:, None, None] * Q
        self.q = _normalized(_product(self.q, turn))
        self.t = t


# Small-batch quaternion helpers: the filters run a few hundred times per simulated second on
# a handful of bodies, where ``rotations``' general forms spend their time reshaping.


def _conjugate(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products of (B, 4) quaternions."""
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.column_stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def _rotation_quat(rotvec: np.ndarray) -> np.ndarray:
    """Quaternions (B, 4) of rotation vectors (B, 3), exact for any angle."""
    angle = np.sqrt(np.einsum("bi,bi->b", rotvec, rotvec))
    safe = np.where(angle < 1e-8, 1.0, angle)
    scale = np.where(angle < 1e-8, 0.5 - angle**2 / 48.0, np.sin(0.5 * angle) / safe)
    return np.column_stack([np.cos(0.5 * angle), scale[:, None] * rotvec])


def _small_rotation(q: np.ndarray) -> np.ndarray:
    """Rotation vectors (B, 3) of quaternions (B, 4), the short way round."""
    q = np.where(q[:, :1] < 0.0, -q, q)
    sin_half = np.sqrt(np.einsum("bi,bi->b", q[:, 1:], q[:, 1:]))
    angle = 2.0 * np.arctan2(sin_half, q[:, 0])
    scale = np.where(sin_half < 1e-12, 2.0, angle / np.where(sin_half < 1e-12, 1.0, sin_half))
    return scale[:, None] * q[:, 1:]


def _normalized(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


class Sensors:
    """Motion capture and filters of one system (load and ``system.n_uavs`` quadrotors).

    ``start`` at the episode's first pose, ``capture`` the true poses at every capture time,
    ``observe`` at a planner's time. Captures wait ``latency_s`` before the filters use them.
    """

    def __init__(self, params: SensingParams, system: SystemParams, rng: np.random.Generator):
        self.params = params
        self.system = system
        n = system.n_uavs
        self.mocap = MotionCapture(params, n + 1, rng)
        self.filter = PoseFilter(
            jerk_psd=[params.load_jerk_psd] + [params.uav_jerk_psd] * n,
            angular_accel_psd=[params.load_angular_accel_psd] + [params.uav_angular_accel_psd] * n,
            position_noise=params.position_noise_m,
            attitude_noise=params.attitude_noise_rad,
        )
        self.pending: deque[PoseCapture] = deque()
        self.captures: list[PoseCapture] = []
        """Every capture since ``start``, kept when ``record`` (tests and studies)."""
        self.record = False
        self.hover_tensions = hover_geometry(system).tensions
        self.load_attachments = system.attachment_array()
        self.uav_attachments = np.array([quad.attachment for quad in system.quadrotors])

    @classmethod
    def for_episode(cls, params: SensingParams, system: SystemParams, seed: int) -> Sensors:
        """The sensors of an episode, seeded from its ``seed`` in a stream of their own."""
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), SENSING_STREAM]))
        return cls(params, system, rng)

    def start(self, t: float, p: np.ndarray, q: np.ndarray) -> None:
        """The filters start at rest from a capture of the poses at ``t`` (s), as if they had
        been running while the system hovered before the episode."""
        self.pending.clear()
        self.captures.clear()
        first = self.mocap.capture(t, p, q)
        self.filter.start(t, first.p, first.q)

    def capture(self, t: float, p: np.ndarray, q: np.ndarray) -> PoseCapture:
        """Measure the true poses ``p`` (B, 3), ``q`` (B, 4) at ``t`` (s); used once available."""
        measurement = self.mocap.capture(t, p, q)
        self.pending.append(measurement)
        if self.record:
            self.captures.append(measurement)
        return measurement

    def estimate(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every body's position, velocity, attitude and body rates at ``t`` (s) from the
        captures available by then."""
        while self.pending and self.pending[0].available <= t + 1e-12:
            measurement = self.pending.popleft()
            self.filter.update(measurement.t, measurement.p, measurement.q)
        return self.filter.predicted(t)

    def observe(self, truth: WorldState) -> WorldState:
        """What a planner observes at ``truth.t``: ``truth`` measured and filtered."""
        p, v, q, omega = self.estimate(truth.t)
        R = quat_to_matrix(q)
        load_ends = p[0] + self.load_attachments @ R[0].T
        uav_ends = p[1:] + np.einsum("nij,nj->ni", R[1:], self.uav_attachments)
        cable = uav_ends - load_ends
        return WorldState(
            t=truth.t,
            load_p=p[0],
            load_q=q[0],
            load_v=v[0],
            load_omega=omega[0],
            uav_p=p[1:],
            uav_q=q[1:],
            uav_v=v[1:],
            uav_omega=omega[1:],
            rotor_speeds=truth.rotor_speeds.copy(),
            cable_tension=self.hover_tensions.copy(),
            cable_dir=cable / np.linalg.norm(cable, axis=1, keepdims=True),
        )


def body_poses(state: WorldState) -> tuple[np.ndarray, np.ndarray]:
    """Positions (n + 1, 3) and attitudes (n + 1, 4) of the load and the quadrotors."""
    return (np.vstack([state.load_p[None, :], state.uav_p]), np.vstack([state.load_q[None, :], state.uav_q]))
