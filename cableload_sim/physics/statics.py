"""Hover statics: where the quadrotors sit around a hanging load, and the cable tensions.

The cables splay outward along lines that all meet at one point (the apex) on the vertical
through the load's centre of mass, below it. Every cable force and the weight then pass through
the apex, so the moment balance holds for any tensions and the level load is in equilibrium when
the forces balance: ``sum_i t_i u_i = m_L g e_z``. With three cables that fixes the tensions;
with two (both in one vertical plane) the balance within that plane does; with more, the
minimum-norm tensions are used (equal on a regular polygon).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cableload_sim.params import AeroParams, SystemParams
from cableload_sim.physics.world import WorldState
from cableload_sim.rotations import matrix_to_quat, quat_exp, quat_to_matrix


@dataclass(frozen=True)
class HoverGeometry:
    """Hover configuration in the load frame (load level, at the origin)."""

    directions: np.ndarray
    """Unit cable directions from each load attachment to the quadrotor's (n, 3)."""
    tensions: np.ndarray
    """Cable tensions (n,), N."""
    apex_depth: float
    """Depth of the cables' common point below the load's centre of mass (m)."""


def cable_tensions_for(directions: np.ndarray, weight: float) -> np.ndarray:
    """Minimum-norm tensions (N) with ``sum t_i u_i = weight e_z``.

    ``directions`` (n, 3) are unit vectors. Solved by least squares (SVD), which also covers two
    cables, whose directions span only their vertical plane (rank 2: the normal equations
    ``U U^T`` are singular there). Raises if the cables cannot balance the weight or a tension
    is not positive.
    """
    U = np.asarray(directions, dtype=float).T  # 3 x n
    target = np.array([0.0, 0.0, weight])
    tensions = np.linalg.lstsq(U, target, rcond=None)[0]
    residual = float(np.linalg.norm(U @ tensions - target))
    if not residual <= 1e-9 * abs(weight):
        raise ValueError(
            f"cable directions {np.round(directions, 3).tolist()} cannot balance a weight of "
            f"{weight!r} N (force residual {residual:.3g} N); expected the vertical to lie in "
            "their span"
        )
    if np.any(tensions <= 0.0):
        raise ValueError(
            f"hover tensions {np.round(tensions, 3).tolist()} N are not all positive; the load's "
            "centre of mass must lie inside the polygon of its attachment points"
        )
    return tensions


def _directions(attachments: np.ndarray, depth: float) -> np.ndarray:
    apex = np.array([0.0, 0.0, -depth])
    d = attachments - apex
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _min_spacing(attachments: np.ndarray, directions: np.ndarray, length: np.ndarray) -> float:
    pts = attachments + length[:, None] * directions
    diff = pts[:, None, :] - pts[None, :, :]
    dist = np.linalg.norm(diff, axis=-1)
    dist[np.diag_indices(len(pts))] = np.inf
    return float(dist.min())


def hover_geometry(system: SystemParams) -> HoverGeometry:
    """The hover configuration of ``system`` as its ``FormationParams`` ask."""
    rho = system.attachment_array()
    length = np.array([c.length for c in system.cables])
    radius = float(np.mean(np.linalg.norm(rho[:, :2], axis=1)))
    height = float(np.mean(rho[:, 2]))
    spec = system.formation

    def depth_for(angle_deg: float) -> float:
        return radius / np.tan(np.radians(angle_deg)) - height

    angle = max(spec.min_cable_angle_deg, 1.0)
    if _min_spacing(rho, _directions(rho, depth_for(angle)), length) < spec.min_spacing_m:
        lo, hi = angle, 79.0
        if _min_spacing(rho, _directions(rho, depth_for(hi)), length) < spec.min_spacing_m:
            raise ValueError(
                f"formation.min_spacing_m={spec.min_spacing_m!r} cannot be reached with "
                f"{system.n_uavs} cables of {length.min():.2f} m; expected a smaller spacing"
            )
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if _min_spacing(rho, _directions(rho, depth_for(mid)), length) < spec.min_spacing_m:
                lo = mid
            else:
                hi = mid
        angle = hi
    depth = depth_for(angle)
    directions = _directions(rho, depth)
    tensions = cable_tensions_for(directions, system.load.mass * system.gravity)
    return HoverGeometry(directions=directions, tensions=tensions, apex_depth=depth)


@dataclass(frozen=True)
class HoverState:
    """Every body at rest in equilibrium, world frame."""

    load_p: np.ndarray
    load_q: np.ndarray
    uav_p: np.ndarray  # (n, 3)
    uav_q: np.ndarray  # (n, 4)
    rotor_speeds: np.ndarray  # (n, 4) rad/s
    tensions: np.ndarray  # (n,) N
    thrusts: np.ndarray  # (n, 3) world thrust vectors, N
    cable_dirs: np.ndarray  # (n, 3) unit vectors from each attachment point up to its quadrotor

    def world_state(self, t: float = 0.0) -> WorldState:
        """The planners' view of this equilibrium at time ``t``: every body at rest."""
        n = len(self.uav_p)
        return WorldState(
            t=t,
            load_p=self.load_p.copy(),
            load_q=self.load_q.copy(),
            load_v=np.zeros(3),
            load_omega=np.zeros(3),
            uav_p=self.uav_p.copy(),
            uav_q=self.uav_q.copy(),
            uav_v=np.zeros((n, 3)),
            uav_omega=np.zeros((n, 3)),
            rotor_speeds=self.rotor_speeds.copy(),
            cable_tension=self.tensions.copy(),
            cable_dir=self.cable_dirs.copy(),
        )


def hover_state(
    system: SystemParams,
    load_p,
    load_q,
    geometry: HoverGeometry | None = None,
    uav_yaw: float = 0.0,
) -> HoverState:
    """Equilibrium of ``system`` with the load at (``load_p``, ``load_q``).

    ``geometry`` gives the cable directions (by default ``hover_geometry(system)``); the cables
    are stretched by tension / stiffness, each quadrotor is tilted so its thrust balances its
    weight plus its cable's pull, heading ``uav_yaw``, and its rotors also cancel the moment the
    cable makes about its centre of gravity. Exact for a level load (any yaw).
    """
    geometry = geometry or hover_geometry(system)
    load_p = np.asarray(load_p, dtype=float)
    load_q = np.asarray(load_q, dtype=float)
    R_L = quat_to_matrix(load_q)
    g = system.gravity
    n = system.n_uavs
    uav_p = np.empty((n, 3))
    uav_q = np.empty((n, 4))
    rotors = np.empty((n, 4))
    thrusts = np.empty((n, 3))
    dirs = np.empty((n, 3))
    for i, (quad, cable) in enumerate(zip(system.quadrotors, system.cables)):
        u = dirs[i] = R_L @ geometry.directions[i]
        t = geometry.tensions[i]
        load_end = load_p + R_L @ np.asarray(system.load.attachments[i])
        quad_end = load_end + (cable.length + t / cable.stiffness) * u
        thrust = quad.mass * g * np.array([0.0, 0.0, 1.0]) + t * u
        R_i = _attitude_with_axis(thrust, uav_yaw)
        uav_q[i] = matrix_to_quat(R_i)
        r = np.asarray(quad.attachment, dtype=float)
        uav_p[i] = quad_end - R_i @ r
        # rotor torque must cancel the cable's moment about the centre of gravity
        cable_torque = np.cross(r, R_i.T @ (-t * u))
        alloc = quad.rotor.allocation_matrix()
        forces = np.linalg.solve(alloc, np.concatenate([[np.linalg.norm(thrust)], -cable_torque]))
        if np.any(forces <= 0.0):
            raise ValueError(f"quadrotor {i} cannot hover here: rotor thrusts {forces} N")
        rotors[i] = np.sqrt(forces / quad.rotor.thrust_coeff)
        thrusts[i] = thrust
    return HoverState(load_p, load_q, uav_p, uav_q, rotors, geometry.tensions.copy(), thrusts, dirs)


def rotor_drag_at_hover(system: SystemParams, aero: AeroParams) -> np.ndarray:
    """Each quadrotor's rotor drag (``aero.rotor_drag_coeff``) linearized at its rotor speed in
    the system's hover, ``4 k_d w_hover`` (n,) (kg/s: in-plane force per in-plane airspeed),
    ``w_hover`` from the thrust that carries its weight and its cable's pull, shared equally
    by its four rotors."""
    geometry = hover_geometry(system)
    out = np.empty(system.n_uavs)
    for i, quad in enumerate(system.quadrotors):
        thrust = np.linalg.norm(
            quad.mass * np.array([0.0, 0.0, system.gravity]) + geometry.tensions[i] * geometry.directions[i]
        )
        out[i] = 4.0 * aero.rotor_drag_coeff * np.sqrt(thrust / (4.0 * quad.rotor.thrust_coeff))
    return out


def _attitude_with_axis(axis: np.ndarray, yaw: float) -> np.ndarray:
    """Rotation whose z column is ``axis`` (normalized) and whose x column heads ``yaw``."""
    z = axis / np.linalg.norm(axis)
    heading = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    y = np.cross(z, heading)
    y /= np.linalg.norm(y)
    x = np.cross(y, z)
    return np.column_stack([x, y, z])


SWING_CENTRE_MOTION = 0.2
"""A swing moves the load's centre of mass by more than this per radian the load turns (m/rad);
the load's turns about axes through its centre (torsion, rocking) move it by less."""


def swing_frequencies(system: SystemParams, geometry: HoverGeometry | None = None) -> np.ndarray:
    """Angular frequencies (rad/s, ascending) of the load's swings in hover with the cables'
    upper ends held fixed, as a stiff position loop holds them.

    The load (6 degrees of freedom, level, at rest) is linearized in the cables' pulls: exact
    geometry, central differences, cables as the unilateral springs they are (taut at hover).
    Its modes with the centre of mass moving more than ``SWING_CENTRE_MOTION`` per radian of
    turn are the swings; the stiff modes that stretch the cables (above 60 rad/s) are left out.
    """
    geometry = geometry or hover_geometry(system)
    rho = system.attachment_array()
    rest = np.array([c.length for c in system.cables])
    stiffness = np.array([c.stiffness for c in system.cables])
    stretched = rest + geometry.tensions / stiffness
    tops = rho + stretched[:, None] * geometry.directions

    def wrench(motion: np.ndarray) -> np.ndarray:
        R = quat_to_matrix(quat_exp(motion[3:]))
        ends = motion[:3] + rho @ R.T
        d = tops - ends
        length = np.linalg.norm(d, axis=1)
        pulls = (stiffness * np.maximum(length - rest, 0.0) / length)[:, None] * d
        return np.concatenate([pulls.sum(axis=0), np.cross(ends - motion[:3], pulls).sum(axis=0)])

    step = 1e-6
    K = np.empty((6, 6))
    for k in range(6):
        dm = np.zeros(6)
        dm[k] = step
        K[:, k] = -(wrench(dm) - wrench(-dm)) / (2.0 * step)
    mass = np.zeros((6, 6))
    mass[:3, :3] = system.load.mass * np.eye(3)
    mass[3:, 3:] = system.load.inertia_matrix()
    omega2, modes = np.linalg.eig(np.linalg.solve(mass, K))
    omega2, modes = omega2.real, modes.real
    centre = np.linalg.norm(modes[:2], axis=0) / np.maximum(np.abs(modes[3:]).max(axis=0), 1e-300)
    swings = (omega2 > 0.0) & (omega2 < 60.0**2) & (centre > SWING_CENTRE_MOTION)
    return np.sort(np.sqrt(omega2[swings]))


def skew(v: np.ndarray) -> np.ndarray:
    """(..., 3, 3) cross-product matrices of (..., 3) vectors: ``skew(v) @ x = v x x``."""
    v = np.asarray(v, dtype=float)
    out = np.zeros((*v.shape[:-1], 3, 3))
    out[..., 0, 1], out[..., 0, 2] = -v[..., 2], v[..., 1]
    out[..., 1, 0], out[..., 1, 2] = v[..., 2], -v[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -v[..., 1], v[..., 0]
    return out


def load_wrench(system: SystemParams, R: np.ndarray, s) -> tuple[np.ndarray, np.ndarray]:
    """What the cables must exert on the load to move it along the reference samples ``s``
    (attitudes ``R`` (K, 3, 3)): the force ``m (a + g e_z)`` and the torque about its centre of
    mass ``R (J alpha + omega x J omega)``, world frame, (K, 3) each."""
    load = system.load
    J = load.inertia_matrix()
    body_torque = s.alpha @ J.T + np.cross(s.omega, s.omega @ J.T)
    force = load.mass * (s.a + np.array([0.0, 0.0, system.gravity]))
    return force, np.einsum("kab,kb->ka", R, body_torque)


def wrench_correction(
    forces: np.ndarray, arms: np.ndarray, force: np.ndarray, torque: np.ndarray
) -> np.ndarray:
    """The least (sum of squares) change (K, n, 3) of cable forces ``forces`` (K, n, 3),
    pulling at ``arms`` (K, n, 3) from the load's centre of mass, after which they exert
    ``force`` and ``torque`` (K, 3) on the load; least squares where they cannot (two cables
    exert no torque about the line through their attachment points)."""
    k, n = forces.shape[:2]
    residual = np.concatenate(
        [force - forces.sum(axis=1), torque - np.cross(arms, forces).sum(axis=1)], axis=1
    )
    grasp = np.concatenate(
        [np.tile(np.eye(3), (k, 1, n)), np.concatenate([skew(arms[:, i]) for i in range(n)], axis=2)], axis=1
    )  # (K, 6, 3n)
    correction = np.einsum("kij,kj->ki", np.linalg.pinv(grasp, rcond=1e-9), residual)
    return correction.reshape(k, n, 3)
