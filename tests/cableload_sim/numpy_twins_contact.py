"""NumPy twins of ``cableload_sim.physics.kernels.contact``: the ground's forces and the cables'
inelastic snap, written with arrays and the rotations module (used only by tests)."""

from __future__ import annotations

import numpy as np

from cableload_sim.physics import layout as L
from cableload_sim.rotations import quat_to_matrix


def _bodies(x: np.ndarray, n: int):
    """Offsets, positions, rotations, velocities and body rates of the load and quadrotors."""
    offsets = [L.body_offset(b) for b in range(n + 1)]
    p = np.array([x[o + L.BODY_POS : o + L.BODY_POS + 3] for o in offsets])
    R = np.array([quat_to_matrix(x[o + L.BODY_QUAT : o + L.BODY_QUAT + 4]) for o in offsets])
    v = np.array([x[o + L.BODY_VEL : o + L.BODY_VEL + 3] for o in offsets])
    w = np.array([x[o + L.BODY_RATE : o + L.BODY_RATE + 3] for o in offsets])
    return offsets, p, R, v, w


def contact_points(model: np.ndarray, n: int) -> list[np.ndarray]:
    """Each body's contact points in its own frame: the load's 8 box corners, each
    quadrotor's 4 landing points."""
    centre = model[L.M_LOAD_BOX_CENTRE : L.M_LOAD_BOX_CENTRE + 3]
    half = model[L.M_LOAD_HALF_SIZE : L.M_LOAD_HALF_SIZE + 3]
    signs = np.array(
        [[(c & 1) * 2 - 1, (c >> 1 & 1) * 2 - 1, (c >> 2 & 1) * 2 - 1] for c in range(8)], dtype=float
    )
    points = [centre + signs * half]
    for i in range(n):
        qm = L.quad_model_offset(i)
        hubs = model[qm + L.QM_ROTOR_XY : qm + L.QM_ROTOR_XY + 8].reshape(4, 2)
        points.append(np.column_stack([hubs, np.full(4, -model[L.M_GROUND_LANDING])]))
    return points


def ground_forces(x: np.ndarray, model: np.ndarray, n: int):
    """The ground's force (n+1, 3) (world, N) and torque (n+1, 3) (body, N m) on every body."""
    k, c = model[L.M_GROUND_STIFFNESS], model[L.M_GROUND_DAMPING]
    mu, slip = model[L.M_GROUND_FRICTION], model[L.M_GROUND_SLIP_SPEED]
    _, p, R, v, w = _bodies(x, n)
    force = np.zeros((n + 1, 3))
    torque = np.zeros((n + 1, 3))
    for b, points in enumerate(contact_points(model, n)):
        world = p[b] + points @ R[b].T
        velocity = v[b] + np.cross(w[b], points) @ R[b].T
        normal = np.maximum(-k * world[:, 2] - c * velocity[:, 2], 0.0)
        normal[world[:, 2] >= 0.0] = 0.0
        speed = np.linalg.norm(velocity[:, :2], axis=1)
        f = np.zeros_like(world)
        f[:, 2] = normal
        f[:, :2] = (-mu * normal / np.maximum(speed, slip))[:, None] * velocity[:, :2]
        force[b] = f.sum(axis=0)
        torque[b] = np.cross(points, f @ R[b]).sum(axis=0)
    return force, torque


def cable_snaps(x: np.ndarray, model: np.ndarray, n: int, h: float, inertia: np.ndarray):
    """The state after RotorTM's inelastic snap of every cable that reached its length within
    the last step of h; ``inertia`` (n+1, 3) principal moments. Returns (x, total impulse)."""
    x = x.copy()
    offsets, p, R, v, w = _bodies(x, n)
    mass = np.array([model[L.M_LOAD_MASS]] + [model[L.quad_model_offset(i) + L.QM_MASS] for i in range(n)])
    mom = w * inertia
    total = 0.0
    for sweep in range(3):
        fired = False
        for i in range(n):
            b = i + 1
            cm, qm = L.cable_model_offset(n, i), L.quad_model_offset(i)
            rL = model[cm + L.CM_LOAD_ATTACH : cm + L.CM_LOAD_ATTACH + 3]
            rQ = model[qm + L.QM_ATTACH : qm + L.QM_ATTACH + 3]
            span = p[b] + R[b] @ rQ - p[0] - R[0] @ rL
            length = np.linalg.norm(span)
            stretch = length - model[cm + L.CM_REST_LENGTH]
            if stretch <= 0.0:
                continue
            d = span / length
            wL, wQ = mom[0] / inertia[0], mom[b] / inertia[b]
            rate = d @ (v[b] + R[b] @ np.cross(wQ, rQ) - v[0] - R[0] @ np.cross(wL, rL))
            if rate <= 0.0 or stretch > rate * h * (1.0 + sweep):
                continue
            aL, aQ = np.cross(rL, R[0].T @ d), np.cross(rQ, R[b].T @ d)
            inv = 1 / mass[0] + 1 / mass[b] + aL @ (aL / inertia[0]) + aQ @ (aQ / inertia[b])
            impulse = rate / inv
            v[0] += impulse * d / mass[0]
            v[b] -= impulse * d / mass[b]
            mom[0] += impulse * aL
            mom[b] -= impulse * aQ
            total += impulse
            fired = True
        if not fired:
            break
    for b, o in enumerate(offsets):
        x[o + L.BODY_VEL : o + L.BODY_VEL + 3] = v[b]
        x[o + L.BODY_RATE : o + L.BODY_RATE + 3] = mom[b] / inertia[b]
    return x, total
