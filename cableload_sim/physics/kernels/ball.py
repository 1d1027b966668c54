"""The sloshing ball (part of the forces and integrator stages, run only when the model has
one): a point mass free inside the load's box, kept in by penalty contact with the walls.

Contact, in the load frame, per wall (the faces of ``load.size`` around the box centre): the
ball penetrates by ``d = |u_k| + r - half_k`` when its centre u (from the box centre) comes
within its radius r of the wall normal to load axis k; the wall then pushes it back along the
normal with ``max(0, k_c d + c_c d')``, d' the rate of penetration (it pushes, never pulls).
Optional Coulomb friction on each touched wall, ``-mu N s / max(|s|, slip_speed)`` of the
tangential slip velocity s (regularized below ``slip_speed``). Both act at the ball's centre
and the load takes the reaction there, on the same line, so total linear and angular momentum
are conserved to rounding (the ball does not spin). Velocities are those stored in x (the
half-step ones inside a step), as for cable damping.
"""

from __future__ import annotations

import math

from cableload_sim.physics.kernels.jit import kernel
from cableload_sim.physics.layout import (
    BALL_POS,
    BALL_VEL,
    LOAD_POS,
    LOAD_RATE,
    LOAD_VEL,
    M_BALL_DAMPING,
    M_BALL_FRICTION,
    M_BALL_MASS,
    M_BALL_RADIUS,
    M_BALL_SLIP_SPEED,
    M_BALL_STIFFNESS,
    M_GRAVITY,
    M_LOAD_BOX_CENTRE,
    M_LOAD_HALF_SIZE,
    ball_offset,
)

ball_offset_ = kernel(inline="always")(ball_offset)


@kernel(inline="always")
def _wall_push(u, rate, half, radius, stiffness, damping):
    """Normal force (load frame, N) of the two walls normal to one axis on a ball whose centre
    is at u (from the box centre) moving at ``rate`` along that axis."""
    depth = u + radius - half
    if depth > 0.0:  # the + wall pushes toward -
        f = stiffness * depth + damping * rate
        return -f if f > 0.0 else 0.0
    depth = -u + radius - half
    if depth > 0.0:  # the - wall pushes toward +
        f = stiffness * depth - damping * rate
        return f if f > 0.0 else 0.0
    return 0.0


@kernel(inline="always")
def _friction(normal, mu, slip_speed, s1, s2):
    """Friction factor -mu |N| / max(|s|, slip_speed) for the slip (s1, s2) on a wall."""
    if normal == 0.0:
        return 0.0
    speed = math.sqrt(s1 * s1 + s2 * s2)
    return -mu * abs(normal) / max(speed, slip_speed)


@kernel(inline="always")
def ball_forces(x, model, n, R, force, torque):
    """The ball's weight and wall contact into ``force[n + 1]`` (world, N); the walls'
    reaction added to the load's ``force[0]`` (world) and ``torque[0]`` (body)."""
    o = ball_offset_(n)
    b = n + 1
    # the ball's centre p from the load's centre of mass, and its velocity relative to the
    # load's material point there, both in the load frame
    dx = x[o + BALL_POS] - x[LOAD_POS]
    dy = x[o + BALL_POS + 1] - x[LOAD_POS + 1]
    dz = x[o + BALL_POS + 2] - x[LOAD_POS + 2]
    px = R[0, 0] * dx + R[0, 3] * dy + R[0, 6] * dz
    py = R[0, 1] * dx + R[0, 4] * dy + R[0, 7] * dz
    pz = R[0, 2] * dx + R[0, 5] * dy + R[0, 8] * dz
    vx = x[o + BALL_VEL] - x[LOAD_VEL]
    vy = x[o + BALL_VEL + 1] - x[LOAD_VEL + 1]
    vz = x[o + BALL_VEL + 2] - x[LOAD_VEL + 2]
    wx = x[LOAD_RATE]
    wy = x[LOAD_RATE + 1]
    wz = x[LOAD_RATE + 2]
    sx = R[0, 0] * vx + R[0, 3] * vy + R[0, 6] * vz - (wy * pz - wz * py)
    sy = R[0, 1] * vx + R[0, 4] * vy + R[0, 7] * vz - (wz * px - wx * pz)
    sz = R[0, 2] * vx + R[0, 5] * vy + R[0, 8] * vz - (wx * py - wy * px)
    radius = model[M_BALL_RADIUS]
    k = model[M_BALL_STIFFNESS]
    c = model[M_BALL_DAMPING]
    fx = _wall_push(px - model[M_LOAD_BOX_CENTRE], sx, model[M_LOAD_HALF_SIZE], radius, k, c)
    fy = _wall_push(py - model[M_LOAD_BOX_CENTRE + 1], sy, model[M_LOAD_HALF_SIZE + 1], radius, k, c)
    fz = _wall_push(pz - model[M_LOAD_BOX_CENTRE + 2], sz, model[M_LOAD_HALF_SIZE + 2], radius, k, c)
    mu = model[M_BALL_FRICTION]
    if mu > 0.0:
        slip = model[M_BALL_SLIP_SPEED]
        ax = _friction(fx, mu, slip, sy, sz)
        ay = _friction(fy, mu, slip, sx, sz)
        az = _friction(fz, mu, slip, sx, sy)
        gx = (ay + az) * sx
        gy = (ax + az) * sy
        gz = (ax + ay) * sz
        fx += gx
        fy += gy
        fz += gz
    # world force on the ball; the load takes minus it at the ball's centre
    Fx = R[0, 0] * fx + R[0, 1] * fy + R[0, 2] * fz
    Fy = R[0, 3] * fx + R[0, 4] * fy + R[0, 5] * fz
    Fz = R[0, 6] * fx + R[0, 7] * fy + R[0, 8] * fz
    force[b, 0] = Fx
    force[b, 1] = Fy
    force[b, 2] = Fz - model[M_BALL_MASS] * model[M_GRAVITY]
    force[0, 0] -= Fx
    force[0, 1] -= Fy
    force[0, 2] -= Fz
    torque[0, 0] -= py * fz - pz * fy
    torque[0, 1] -= pz * fx - px * fz
    torque[0, 2] -= px * fy - py * fx


@kernel(inline="always")
def ball_kick(x, n, force, half_h, model):
    """Half-step kick of the ball: v += h/2 F/m."""
    o = ball_offset_(n)
    scale = half_h / model[M_BALL_MASS]
    for r in range(3):
        x[o + BALL_VEL + r] += scale * force[n + 1, r]


@kernel(inline="always")
def ball_drift(x, n, h):
    """The ball's free flight for h."""
    o = ball_offset_(n)
    for r in range(3):
        x[o + BALL_POS + r] += h * x[o + BALL_VEL + r]
