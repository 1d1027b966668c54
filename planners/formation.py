"""Formation baseline: every quadrotor rides a rigid formation that moves with the load reference.

Each quadrotor's reference sits above its load attachment point at the hover cable angle
(``cableload_sim.statics.hover_geometry``): ``p_i = p_L + R_L rho_i + l_i u_i - R_i r_i`` with
the load pose taken from the reference. The load's acceleration is fed forward: the
formation's velocities and accelerations are those of the moving, rotating formation, and,
optionally, the cable cone tilts toward the force the load needs, ``m_L (a_L - g)``, as a
pendulum hanging from accelerating quadrotors would. Derivatives (v, a, jerk) of the formation are taken by
five-point finite differences of that closed-form position; body rates follow the thrust
direction ``m_i (a_i - g) + t_i u_i`` by differential flatness (zero yaw rate).

With ``tilt=False`` (planner ``formation``) the cone keeps its hover shape and only moves and
rotates with the load reference (velocities and accelerations fed forward); with ``tilt=True``
(planner ``formation-tilt``) it also leans toward the needed force, a much stronger baseline on
constant-orientation references. Neither knows dynamics beyond statics: they are the floor
every real planner must beat.

A reference from the ground (``cableload_sim.lift``, with ``climb(t)``) moves each
quadrotor from where it rested at the first plan to its slot and back by that share.

With ``converge_s`` the plans start where each quadrotor is and join its slot exponentially
with that time constant (``anchored``); the student plans relative to this variant of
formation-tilt (``planners.student``).
"""

from __future__ import annotations

import numpy as np

from cableload_sim.horizon import node_times
from cableload_sim.params import SystemParams
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.statics import hover_geometry
from cableload_sim.world import UavTrajectory, WorldState

_FD_STEP = 2e-3  # s, finite-difference step for the formation's derivatives


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b over the last axis (``np.cross`` without its checks and axis moves, which cost
    more than the product for the formation's few hundred vectors)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def _rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Smallest rotations taking unit vectors a (k, 3) to b (k, 3): (k, 3, 3)."""
    v = _cross(a, b)
    c = np.sum(a * b, axis=-1)
    vx = np.zeros(a.shape[:-1] + (3, 3))
    vx[..., 0, 1], vx[..., 0, 2] = -v[..., 2], v[..., 1]
    vx[..., 1, 0], vx[..., 1, 2] = v[..., 2], -v[..., 0]
    vx[..., 2, 0], vx[..., 2, 1] = -v[..., 1], v[..., 0]
    eye = np.broadcast_to(np.eye(3), vx.shape)
    return eye + vx + vx @ vx / (1.0 + c)[..., None, None]


class FormationPlanner:
    """Centralized only in name: each quadrotor's plan uses the reference alone."""

    def __init__(self, system: SystemParams, tilt: bool = False, converge_s: float | None = None):
        if converge_s is not None and not (np.isfinite(converge_s) and converge_s > 0.0):
            raise ValueError(f"converge_s: expected a positive time (s) or None, got {converge_s!r}")
        self.system = system
        self.tilt = tilt
        self.converge_s = converge_s
        self.name = "formation-tilt" if tilt else "formation"
        geometry = hover_geometry(system)
        self.directions = geometry.directions  # load frame
        self.tensions = geometry.tensions
        self.rho = system.attachment_array()
        self.lengths = np.array([c.length for c in system.cables])
        self.attach = np.array([q.attachment for q in system.quadrotors])
        self.masses = np.array([q.mass for q in system.quadrotors])
        self.gravity = np.array([0.0, 0.0, -system.gravity])
        self._rest = None

    def reset(self) -> None:
        self._rest = None

    def _rest_from(self, state: WorldState, reference) -> None:
        """A reference from the ground (``cableload_sim.lift``): the quadrotors' resting
        places are where they are at its first plan."""
        if getattr(reference, "climb", None) is not None and getattr(self, "_rest", None) is None:
            self._rest = np.array(state.uav_p, dtype=float)

    def report(self) -> dict:
        return {}

    def _formation(self, reference, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Quadrotor positions (k, n, 3) and cable pulls on them, t_i u_i (k, n, 3)."""
        ref = reference.sample(times)
        R_L = quat_to_matrix(ref.q)  # (k, 3, 3)
        need = ref.a - self.gravity  # force per unit load mass the cables must supply
        scale = np.linalg.norm(need, axis=-1) / self.system.gravity
        if self.tilt:
            tilt = _rotation_between(np.tile([0.0, 0.0, 1.0], (len(times), 1)),
                                     need / np.linalg.norm(need, axis=-1, keepdims=True))
        else:
            tilt = np.broadcast_to(np.eye(3), R_L.shape)
        u = (tilt @ R_L) @ self.directions.T  # (k, 3, n)
        u = u.transpose(0, 2, 1)
        load_end = ref.p[:, None, :] + (R_L @ self.rho.T).transpose(0, 2, 1)
        quad_end = load_end + self.lengths[None, :, None] * u
        pull = (self.tensions[None, :] * scale[:, None])[..., None] * u
        # the quadrotor's attitude, with its thrust axis about m_i (a_L - g) + pull
        thrust = self.masses[None, :, None] * need[:, None, :] + pull
        R_i = _attitude_zero_heading(thrust / np.linalg.norm(thrust, axis=-1, keepdims=True))
        p = quad_end - (R_i @ self.attach[None, :, :, None])[..., 0]
        rest = getattr(self, "_rest", None)
        if rest is not None and getattr(reference, "climb", None) is not None:
            # from the ground: from the resting places to the slots, the cables pulling only
            # once there
            share = reference.climb(times).value[:, None, None]
            p = rest[None] + share * (p - rest[None])
            pull = pull * share
        return p, pull

    def plan(self, state: WorldState, reference) -> list[UavTrajectory]:
        self._rest_from(state, reference)
        if self.converge_s is None:
            return self.slot_plans(state.t, reference)
        return [self.anchored(plan, state.uav_p[i])
                for i, plan in enumerate(self.slot_plans(state.t, reference))]

    def anchored(self, plan: UavTrajectory, position: np.ndarray) -> UavTrajectory:
        """The slot plan made to start at ``position`` and join the slot exponentially:
        ``p(t) = slot(t) + (position - slot(t0)) exp(-(t - t0) / converge_s)``, derivatives
        exact (body rates left as the slot's)."""
        tau = self.converge_s
        if tau is None:
            raise ValueError("anchored: this planner was made without converge_s")
        gap = np.asarray(position, dtype=float) - plan.p[0]
        g = np.exp(-(plan.t - plan.t[0]) / tau)[:, None]
        return UavTrajectory(plan.t, plan.p + gap * g, plan.v - gap * g / tau,
                             plan.a + gap * g / tau**2, plan.j - gap * g / tau**3,
                             plan.body_rates)

    def slot_plans(self, t: float, reference) -> list[UavTrajectory]:
        """Every quadrotor's slot in the formation over the horizon from ``t`` (reference
        only: no state)."""
        times = node_times(t)
        h = _FD_STEP
        offsets = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]) * h
        stencil = (times[:, None] + offsets[None, :]).ravel()
        p, pull = self._formation(reference, stencil)
        k = times.size
        p = p.reshape(k, 5, -1, 3)
        pull = pull.reshape(k, 5, -1, 3)
        pm2, pm1, p0, pp1, pp2 = (p[:, s] for s in range(5))
        v = (-pp2 + 8 * pp1 - 8 * pm1 + pm2) / (12 * h)
        a = (-pp2 + 16 * pp1 - 30 * p0 + 16 * pm1 - pm2) / (12 * h * h)
        j = (pp2 - 2 * pp1 + 2 * pm1 - pm2) / (2 * h**3)
        # thrust axis z = m (a - g) + pull at the stencil's middle three points, for its rate
        acc = np.stack([(p0 - 2 * pm1 + pm2) / h**2, a, (pp2 - 2 * pp1 + p0) / h**2], axis=1)
        thrust = self.masses[None, None, :, None] * (acc - self.gravity) + pull[:, 1:4]
        z = thrust / np.linalg.norm(thrust, axis=-1, keepdims=True)
        z_dot = (z[:, 2] - z[:, 0]) / (2 * h)
        rates = _body_rates_zero_yaw(z[:, 1], z_dot)
        return [UavTrajectory(times, p0[:, i], v[:, i], a[:, i], j[:, i], rates[:, i])
                for i in range(self.system.n_uavs)]


def _attitude_zero_heading(z: np.ndarray) -> np.ndarray:
    """Rotations (..., 3, 3) with unit thrust axis z whose body x axis heads along world +x."""
    y = np.zeros(z.shape)  # z x e_x
    y[..., 1] = z[..., 2]
    y[..., 2] = -z[..., 1]
    y /= np.sqrt(y[..., 1:2] ** 2 + y[..., 2:3] ** 2)
    R = np.empty(z.shape + (3,))
    R[..., 0] = _cross(y, z)
    R[..., 1] = y
    R[..., 2] = z
    return R


def _body_rates_zero_yaw(z: np.ndarray, z_dot: np.ndarray) -> np.ndarray:
    """Body rates (..., 3) of an attitude with thrust axis z, heading +x, zero yaw rate.

    With ``R = [x y z]`` and ``dz/dt = R (w x e_z) = w_y x - w_x y``: ``w_x = -y . dz/dt``,
    ``w_y = x . dz/dt``.
    """
    R = _attitude_zero_heading(z)
    x, y = R[..., 0], R[..., 1]
    rates = np.zeros(z.shape)
    rates[..., 0] = -np.sum(y * z_dot, axis=-1)
    rates[..., 1] = np.sum(x * z_dot, axis=-1)
    return rates
