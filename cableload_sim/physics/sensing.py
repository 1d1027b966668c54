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

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from numba import njit

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
        """Predict to ``t`` (s), not before the last update, then correct with the poses (one
        numba pass over the bodies: the filters run a few hundred times per simulated second)."""
        t = max(float(t), self.t)
        _filter_step(
            t - self.t,
            self.x,
            self.P_trans,
            self.q,
            self.omega,
            self.P_rot,
            self.jerk_psd,
            self.angular_accel_psd,
            self.position_var,
            self.attitude_var,
            np.ascontiguousarray(p, dtype=float),
            np.ascontiguousarray(q, dtype=float),
        )
        self.t = t

    def predicted(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Position, world velocity, attitude and body rates predicted to ``t`` (s), the filter
        left as it is."""
        dt = max(float(t) - self.t, 0.0)
        p, v, a = self.x[:, 0], self.x[:, 1], self.x[:, 2]
        q = _normalized(_product(self.q, _rotation_quat(self.omega * dt)))
        return p + v * dt + 0.5 * a * dt**2, v + a * dt, q, self.omega.copy()


# Small-batch quaternion helpers: the filters run a few hundred times per simulated second on
# a handful of bodies, where ``rotations``' general forms spend their time reshaping.


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


def _normalized(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


@njit(cache=True)
def _quat_mul(a, b, out):  # pragma: no cover - compiled
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw


@njit(cache=True)
def _rotvec_quat(v0, v1, v2, out):  # pragma: no cover - compiled
    angle = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    scale = 0.5 - angle**2 / 48.0 if angle < 1e-8 else math.sin(0.5 * angle) / angle
    out[0] = math.cos(0.5 * angle)
    out[1] = scale * v0
    out[2] = scale * v1
    out[3] = scale * v2


@njit(cache=True)
def _normalize(q):  # pragma: no cover - compiled
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    for i in range(4):
        q[i] /= norm


@njit(cache=True)
def _filter_step(
    dt, x, P_trans, q, omega, P_rot, jerk_psd, angular_psd, position_var, attitude_var, p_meas, q_meas
):  # pragma: no cover - compiled
    """``PoseFilter.update`` for every body: predict by ``dt`` (s; none when not positive),
    then correct with the measured positions ``p_meas`` (B, 3) and attitudes ``q_meas`` (B, 4);
    the state arrays are changed in place."""
    B = x.shape[0]
    F = np.zeros((3, 3))
    Q = np.zeros((3, 3))
    F6 = np.zeros((6, 6))
    Q6 = np.zeros((6, 6))
    T = np.zeros((6, 6))
    turn = np.empty(4)
    tmp = np.empty(4)
    conj = np.empty(4)
    gain = np.empty((6, 3))
    for b in range(B):
        if dt > 0.0:
            F[0, 0], F[0, 1], F[0, 2] = 1.0, dt, 0.5 * dt**2
            F[1, 0], F[1, 1], F[1, 2] = 0.0, 1.0, dt
            F[2, 0], F[2, 1], F[2, 2] = 0.0, 0.0, 1.0
            Q[0, 0], Q[0, 1], Q[0, 2] = dt**5 / 20.0, dt**4 / 8.0, dt**3 / 6.0
            Q[1, 0], Q[1, 1], Q[1, 2] = dt**4 / 8.0, dt**3 / 3.0, dt**2 / 2.0
            Q[2, 0], Q[2, 1], Q[2, 2] = dt**3 / 6.0, dt**2 / 2.0, dt
            x[b] = F @ x[b]
            P_trans[b] = F @ P_trans[b] @ F.T + jerk_psd[b] * Q
            # rotation: dtheta' = Exp(-omega dt) dtheta + dt domega
            _rotvec_quat(omega[b, 0] * dt, omega[b, 1] * dt, omega[b, 2] * dt, turn)
            w, i, j, k = turn[0], turn[1], turn[2], turn[3]
            F6[:, :] = 0.0
            for r in range(6):
                F6[r, r] = 1.0
            # the rotation's transpose (world to body of the turn)
            F6[0, 0], F6[1, 0], F6[2, 0] = 1 - 2 * (j * j + k * k), 2 * (i * j - k * w), 2 * (i * k + j * w)
            F6[0, 1], F6[1, 1], F6[2, 1] = 2 * (i * j + k * w), 1 - 2 * (i * i + k * k), 2 * (j * k - i * w)
            F6[0, 2], F6[1, 2], F6[2, 2] = 2 * (i * k - j * w), 2 * (j * k + i * w), 1 - 2 * (i * i + j * j)
            for r in range(3):
                F6[r, 3 + r] = dt
            Q6[:, :] = 0.0
            for r in range(3):
                Q6[r, r] = Q[1, 1]
                Q6[r, 3 + r] = Q[1, 2]
                Q6[3 + r, r] = Q[2, 1]
                Q6[3 + r, 3 + r] = Q[2, 2]
            T[:, :] = F6 @ P_rot[b]
            P_rot[b] = T @ F6.T + angular_psd[b] * Q6
            _quat_mul(q[b], turn, tmp)
            _normalize(tmp)
            q[b] = tmp
        # translation: H = [1, 0, 0] on each axis
        P = P_trans[b]
        denominator = P[0, 0] + position_var
        g0, g1, g2 = P[0, 0] / denominator, P[1, 0] / denominator, P[2, 0] / denominator
        for c in range(3):
            innovation = p_meas[b, c] - x[b, 0, c]
            x[b, 0, c] += g0 * innovation
            x[b, 1, c] += g1 * innovation
            x[b, 2, c] += g2 * innovation
        row0 = P[0].copy()
        for c in range(3):
            P[0, c] -= g0 * row0[c]
            P[1, c] -= g1 * row0[c]
            P[2, c] -= g2 * row0[c]
        # rotation: the measured attitude seen from the predicted one, a small body rotation
        R6 = P_rot[b]
        S = R6[:3, :3].copy()
        for r in range(3):
            S[r, r] += attitude_var
        gain[:, :] = np.linalg.solve(S, R6[:3, :]).T  # P H^T S^-1
        conj[0], conj[1], conj[2], conj[3] = q[b, 0], -q[b, 1], -q[b, 2], -q[b, 3]
        _quat_mul(conj, q_meas[b], tmp)
        if tmp[0] < 0.0:
            for r in range(4):
                tmp[r] = -tmp[r]
        sin_half = math.sqrt(tmp[1] * tmp[1] + tmp[2] * tmp[2] + tmp[3] * tmp[3])
        scale = 2.0 if sin_half < 1e-12 else 2.0 * math.atan2(sin_half, tmp[0]) / sin_half
        r0, r1, r2 = scale * tmp[1], scale * tmp[2], scale * tmp[3]
        correction = np.empty(6)
        for r in range(6):
            correction[r] = gain[r, 0] * r0 + gain[r, 1] * r1 + gain[r, 2] * r2
        _rotvec_quat(correction[0], correction[1], correction[2], turn)
        _quat_mul(q[b], turn, tmp)
        _normalize(tmp)
        q[b] = tmp
        for r in range(3):
            omega[b, r] += correction[3 + r]
        top = R6[:3, :].copy()
        R6 -= gain @ top
        for r in range(6):
            for c in range(r):
                mean = 0.5 * (R6[r, c] + R6[c, r])
                R6[r, c] = mean
                R6[c, r] = mean


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
