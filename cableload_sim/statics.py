"""Hover statics: where the quadrotors sit around a hanging load, and the cable tensions.

The cables splay outward along lines that all meet at one point (the apex) on the vertical
through the load's centre of mass, below it. Every cable force and the weight then pass through
the apex, so the moment balance holds for any tensions and the level load is in equilibrium when
the forces balance: ``sum_i t_i u_i = m_L g e_z``. With three cables that fixes the tensions;
with more, the minimum-norm tensions are used (equal on a regular polygon).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cableload_sim.params import SystemParams
from cableload_sim.rotations import matrix_to_quat, quat_to_matrix


@dataclass(frozen=True)
class HoverGeometry:
    """Hover configuration in the load frame (load level, at the origin)."""

    directions: np.ndarray
    """Unit cable directions from each load attachment to the quadrotor's (n, 3)."""
    tensions: np.ndarray
    """Cable tensions (n,), N."""
    apex_depth: float
    """Depth of the cables' common point below the load's centre of mass (m)."""

    def cable_angles_deg(self) -> np.ndarray:
        return np.degrees(np.arccos(np.clip(self.directions[:, 2], -1.0, 1.0)))


def cable_tensions_for(directions: np.ndarray, weight: float) -> np.ndarray:
    """Minimum-norm tensions (N) with ``sum t_i u_i = weight e_z``; raises if one is not positive."""
    U = np.asarray(directions, dtype=float).T  # 3 x n
    target = np.array([0.0, 0.0, weight])
    tensions = U.T @ np.linalg.solve(U @ U.T, target)
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
    for i, (quad, cable) in enumerate(zip(system.quadrotors, system.cables)):
        u = R_L @ geometry.directions[i]
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
    return HoverState(load_p, load_q, uav_p, uav_q, rotors, geometry.tensions.copy(), thrusts)


def _attitude_with_axis(axis: np.ndarray, yaw: float) -> np.ndarray:
    """Rotation whose z column is ``axis`` (normalized) and whose x column heads ``yaw``."""
    z = axis / np.linalg.norm(axis)
    heading = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    y = np.cross(z, heading)
    y /= np.linalg.norm(y)
    x = np.cross(y, z)
    return np.column_stack([x, y, z])
