"""Forces stage: every force and torque on every body at one state.

Gravity, the external wrench on the load, rotor thrust and torques, the cables (unilateral
spring-dampers, force only, no moment at the joints; see the package docstring), and the
drag of the air (``aero``), the ground's contact (``contact``).
"""

from __future__ import annotations

import math

import numpy as np

from cableload_sim.physics.kernels.aero import aero_forces
from cableload_sim.physics.kernels.contact import ground_forces
from cableload_sim.physics.kernels.jit import (
    body_offset,
    cable_model_offset,
    kernel,
    quad_model_offset,
    quad_offset,
    quat_to_rot,
)
from cableload_sim.physics.layout import (
    BODY_QUAT,
    CM_DAMPING,
    CM_LOAD_ATTACH,
    CM_REST_LENGTH,
    CM_STIFFNESS,
    LOAD_POS,
    LOAD_RATE,
    LOAD_VEL,
    M_AERO,
    M_GRAVITY,
    M_GROUND,
    M_LOAD_MASS,
    QM_ALLOC,
    QM_ATTACH,
    QM_KF,
    QM_MASS,
    QUAD_POS,
    QUAD_RATE,
    QUAD_ROTOR,
    QUAD_VEL,
)


@kernel(inline="always")
def _load_weight_and_wrench(model, wrench, R, force, torque):
    """The load's weight and the external wrench (force and torque, world frame)."""
    force[0, 0] = wrench[0]
    force[0, 1] = wrench[1]
    force[0, 2] = wrench[2] - model[M_LOAD_MASS] * model[M_GRAVITY]
    for r in range(3):
        torque[0, r] = R[0, r] * wrench[3] + R[0, 3 + r] * wrench[4] + R[0, 6 + r] * wrench[5]


@kernel(inline="always")
def _quadrotor_weights_and_rotors(x, model, n, R, force, torque):
    """Every quadrotor's weight, rotor thrust along body z and rotor torques."""
    g = model[M_GRAVITY]
    for i in range(n):
        b = i + 1
        o = quad_offset(i)
        qm = quad_model_offset(i)
        kf = model[qm + QM_KF]
        f0 = kf * x[o + QUAD_ROTOR] ** 2
        f1 = kf * x[o + QUAD_ROTOR + 1] ** 2
        f2 = kf * x[o + QUAD_ROTOR + 2] ** 2
        f3 = kf * x[o + QUAD_ROTOR + 3] ** 2
        thrust = f0 + f1 + f2 + f3
        force[b, 0] = R[b, 2] * thrust
        force[b, 1] = R[b, 5] * thrust
        force[b, 2] = R[b, 8] * thrust - model[qm + QM_MASS] * g
        for r in range(3):
            a = qm + QM_ALLOC + 4 * (r + 1)
            torque[b, r] = model[a] * f0 + model[a + 1] * f1 + model[a + 2] * f2 + model[a + 3] * f3


@kernel(inline="always")
def _cables(x, model, n, R, force, torque, tension):
    """Every cable's tension (N) into ``tension``, its force and torques added to the load and
    to its quadrotor. Damping uses the velocities stored in x.

    One loop with everything written out: numba's reference counting of the arrays is pruned
    in it, not around an inlined per-cable helper (2.5x slower, measured)."""
    wLx = x[LOAD_RATE]
    wLy = x[LOAD_RATE + 1]
    wLz = x[LOAD_RATE + 2]
    for i in range(n):
        b = i + 1
        o = quad_offset(i)
        cm = cable_model_offset(n, i)
        qm = quad_model_offset(i)
        # attachment on the load: world offset and velocity
        rx = model[cm + CM_LOAD_ATTACH]
        ry = model[cm + CM_LOAD_ATTACH + 1]
        rz = model[cm + CM_LOAD_ATTACH + 2]
        oLx = R[0, 0] * rx + R[0, 1] * ry + R[0, 2] * rz
        oLy = R[0, 3] * rx + R[0, 4] * ry + R[0, 5] * rz
        oLz = R[0, 6] * rx + R[0, 7] * ry + R[0, 8] * rz
        cx = wLy * rz - wLz * ry
        cy = wLz * rx - wLx * rz
        cz = wLx * ry - wLy * rx
        vLx = x[LOAD_VEL] + R[0, 0] * cx + R[0, 1] * cy + R[0, 2] * cz
        vLy = x[LOAD_VEL + 1] + R[0, 3] * cx + R[0, 4] * cy + R[0, 5] * cz
        vLz = x[LOAD_VEL + 2] + R[0, 6] * cx + R[0, 7] * cy + R[0, 8] * cz
        # attachment on the quadrotor
        sx = model[qm + QM_ATTACH]
        sy = model[qm + QM_ATTACH + 1]
        sz = model[qm + QM_ATTACH + 2]
        oQx = R[b, 0] * sx + R[b, 1] * sy + R[b, 2] * sz
        oQy = R[b, 3] * sx + R[b, 4] * sy + R[b, 5] * sz
        oQz = R[b, 6] * sx + R[b, 7] * sy + R[b, 8] * sz
        wx = x[o + QUAD_RATE]
        wy = x[o + QUAD_RATE + 1]
        wz = x[o + QUAD_RATE + 2]
        cx = wy * sz - wz * sy
        cy = wz * sx - wx * sz
        cz = wx * sy - wy * sx
        vQx = x[o + QUAD_VEL] + R[b, 0] * cx + R[b, 1] * cy + R[b, 2] * cz
        vQy = x[o + QUAD_VEL + 1] + R[b, 3] * cx + R[b, 4] * cy + R[b, 5] * cz
        vQz = x[o + QUAD_VEL + 2] + R[b, 6] * cx + R[b, 7] * cy + R[b, 8] * cz
        # cable vector from the load's end to the quadrotor's end
        dx = x[o + QUAD_POS] + oQx - x[LOAD_POS] - oLx
        dy = x[o + QUAD_POS + 1] + oQy - x[LOAD_POS + 1] - oLy
        dz = x[o + QUAD_POS + 2] + oQz - x[LOAD_POS + 2] - oLz
        length = math.sqrt(dx * dx + dy * dy + dz * dz)
        stretch = length - model[cm + CM_REST_LENGTH]
        t = 0.0
        if stretch > 0.0:
            inv = 1.0 / length
            dx *= inv
            dy *= inv
            dz *= inv
            rate = dx * (vQx - vLx) + dy * (vQy - vLy) + dz * (vQz - vLz)
            t = model[cm + CM_STIFFNESS] * stretch + model[cm + CM_DAMPING] * rate
            if t < 0.0:
                t = 0.0
        tension[i] = t
        if t == 0.0:
            continue
        fx = t * dx
        fy = t * dy
        fz = t * dz
        force[0, 0] += fx
        force[0, 1] += fy
        force[0, 2] += fz
        force[b, 0] -= fx
        force[b, 1] -= fy
        force[b, 2] -= fz
        # torques in the body frames: r x (R^T f)
        bx = R[0, 0] * fx + R[0, 3] * fy + R[0, 6] * fz
        by = R[0, 1] * fx + R[0, 4] * fy + R[0, 7] * fz
        bz = R[0, 2] * fx + R[0, 5] * fy + R[0, 8] * fz
        torque[0, 0] += ry * bz - rz * by
        torque[0, 1] += rz * bx - rx * bz
        torque[0, 2] += rx * by - ry * bx
        bx = -(R[b, 0] * fx + R[b, 3] * fy + R[b, 6] * fz)
        by = -(R[b, 1] * fx + R[b, 4] * fy + R[b, 7] * fz)
        bz = -(R[b, 2] * fx + R[b, 5] * fy + R[b, 8] * fz)
        torque[b, 0] += sy * bz - sz * by
        torque[b, 1] += sz * bx - sx * bz
        torque[b, 2] += sx * by - sy * bx


@kernel()
def forces_in_wind(x, model, n, wrench, wx, wy, wz, R, force, torque, tension):
    """Forces (world, N) and body-frame torques (N m) on every body at state x, in a wind
    (wx, wy, wz) (world, m/s).

    Writes R (n+1, 9) rotation matrices, force (n+1, 3), torque (n+1, 3) and tension (n,) (N).
    ``wrench`` (6,) is an external force and torque on the load, both world frame.
    Cable damping and drag use the velocities stored in x.
    """
    for b in range(n + 1):
        quat_to_rot(x, body_offset(b) + BODY_QUAT, R, b)
    _load_weight_and_wrench(model, wrench, R, force, torque)
    _quadrotor_weights_and_rotors(x, model, n, R, force, torque)
    _cables(x, model, n, R, force, torque, tension)
    if model[M_AERO] != 0.0:
        aero_forces(x, model, n, wx, wy, wz, R, force, torque)
    if model[M_GROUND] != 0.0:
        ground_forces(x, model, n, R, force, torque)


@kernel()
def compute_forces(x, model, n, wrench, R, force, torque, tension):
    """``forces_in_wind`` in still air."""
    forces_in_wind(x, model, n, wrench, 0.0, 0.0, 0.0, R, force, torque, tension)


@kernel()
def cable_tensions(x, model, n, out_tension, out_dir):
    """Tension (N) of each cable and its unit direction from the load's end to the quadrotor's."""
    R = np.empty((n + 1, 9))
    force = np.empty((n + 1, 3))
    torque = np.empty((n + 1, 3))
    zero = np.zeros(6)
    compute_forces(x, model, n, zero, R, force, torque, out_tension)
    for i in range(n):
        o = quad_offset(i)
        qm = quad_model_offset(i)
        cm = cable_model_offset(n, i)
        d = np.zeros(3)
        for r in range(3):
            d[r] = x[o + QUAD_POS + r] - x[LOAD_POS + r]
            for c in range(3):
                d[r] += (
                    R[i + 1, 3 * r + c] * model[qm + QM_ATTACH + c]
                    - R[0, 3 * r + c] * model[cm + CM_LOAD_ATTACH + c]
                )
        norm = math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
        for r in range(3):
            out_dir[i, r] = d[r] / norm
