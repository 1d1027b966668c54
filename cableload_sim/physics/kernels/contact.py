"""Ground contact, cables that snap taut by an impulse, and the onboard controller's idle on
the ground (run only when the model has a ground, ``layout.M_GROUND``).

Ground (part of the forces stage): the plane z = 0. The load touches it with the 8 corners of
its box, each quadrotor with 4 landing points under its rotor hubs, ``M_GROUND_LANDING`` below
its centre of gravity. A point at depth ``d = -z > 0`` sinking at ``d' = -v_z`` is pushed up by
``N = max(0, k d + c d')`` (unilateral: pushes, never pulls) and held by regularized Coulomb
friction ``-mu N s / max(|s|, slip_speed)`` of its horizontal slip velocity s; both act at the
point, so they also turn the body. A body whose centre is higher than its reach (the farthest
point from its centre of mass) is skipped with one comparison: in the air the ground costs
nothing else. Velocities are those stored in x (the half-step ones inside a step), as for
cable damping.

Snap (part of the integrator stage, after the drift): RotorTM's model of a slack cable that
reaches its length with its ends separating, a perfectly inelastic collision along the cable:
an impulse ``P = u / w`` along the cable's direction d removes the relative velocity u of its
two ends along d (``w = 1/m_L + 1/m_Q + |J_L^-1/2 (r_L x d)|^2 + |J_Q^-1/2 (r_Q x d)|^2``, the
inverse effective mass of the pair at the attachments), the load pulled by +P d, the quadrotor
by -P d: linear and angular momentum are conserved, the kinetic energy of u lost. A cable
counts as reaching its length in this step when ``stretch - u h <= 0`` (it was slack a step
ago, to first order), so a taut cable's small oscillations never fire it. The spring-damper
carries the load after the snap.
"""

from __future__ import annotations

import math

from cableload_sim.physics.kernels.jit import (
    body_offset,
    cable_model_offset,
    kernel,
    quad_model_offset,
    quad_offset,
    quat_to_rot,
)
from cableload_sim.physics.layout import (
    BC_INV_INERTIA,
    BC_INV_MASS,
    BODY_POS,
    BODY_QUAT,
    BODY_RATE,
    BODY_VEL,
    CM_LOAD_ATTACH,
    CM_REST_LENGTH,
    CS_ACC_FILT,
    CS_ALPHA_FILT,
    CS_FORCE_FILT,
    CS_HOLD_POS,
    CS_LANDED,
    CS_ROTOR_CMD,
    CS_TORQUE_FILT,
    M_GROUND_DAMPING,
    M_GROUND_FRICTION,
    M_GROUND_LANDING,
    M_GROUND_LOAD_REACH,
    M_GROUND_QUAD_REACH,
    M_GROUND_SLIP_SPEED,
    M_GROUND_STIFFNESS,
    M_LOAD_BOX_CENTRE,
    M_LOAD_HALF_SIZE,
    QM_ATTACH,
    QM_ROTOR_XY,
    QM_SPEED_MIN,
    QUAD_POS,
    QUAD_VEL,
    REF_POS,
    REF_VEL,
    SC_REF,
    SC_WRENCH,
)

CONTACT_ZONE = 0.02
"""A quadrotor whose landing points are within this height of the ground is on it (m)."""
CLIMB_REQUEST = 0.05
"""An idling quadrotor takes off when its reference is this much higher than it (m)."""
SETTLE = 0.02
"""A quadrotor on the ground idles when its reference is at most this much above it (m)..."""
SETTLE_SPEED = 0.1
"""... and it moves slower than this (m/s)."""


@kernel(inline="always")
def _point_contact(x, o, b, rx, ry, rz, R, force, torque, k, c, mu, slip):
    """Ground force on body b (state block at o) at its point r (body frame), if below z = 0."""
    pz = x[o + BODY_POS + 2] + R[b, 6] * rx + R[b, 7] * ry + R[b, 8] * rz
    if pz >= 0.0:
        return
    wx = x[o + BODY_RATE]
    wy = x[o + BODY_RATE + 1]
    wz = x[o + BODY_RATE + 2]
    cx = wy * rz - wz * ry
    cy = wz * rx - wx * rz
    cz = wx * ry - wy * rx
    vz = x[o + BODY_VEL + 2] + R[b, 6] * cx + R[b, 7] * cy + R[b, 8] * cz
    normal = -k * pz - c * vz
    if normal <= 0.0:
        return
    fx = 0.0
    fy = 0.0
    if mu > 0.0:
        vx = x[o + BODY_VEL] + R[b, 0] * cx + R[b, 1] * cy + R[b, 2] * cz
        vy = x[o + BODY_VEL + 1] + R[b, 3] * cx + R[b, 4] * cy + R[b, 5] * cz
        factor = -mu * normal / max(math.sqrt(vx * vx + vy * vy), slip)
        fx = factor * vx
        fy = factor * vy
    force[b, 0] += fx
    force[b, 1] += fy
    force[b, 2] += normal
    # torque in the body frame: r x (R^T f)
    bx = R[b, 0] * fx + R[b, 3] * fy + R[b, 6] * normal
    by = R[b, 1] * fx + R[b, 4] * fy + R[b, 7] * normal
    bz = R[b, 2] * fx + R[b, 5] * fy + R[b, 8] * normal
    torque[b, 0] += ry * bz - rz * by
    torque[b, 1] += rz * bx - rx * bz
    torque[b, 2] += rx * by - ry * bx


@kernel(inline="always")
def ground_forces(x, model, n, R, force, torque):
    """The ground's push and friction added to ``force`` (world, N) and ``torque`` (body,
    N m) of the load and every quadrotor that reaches it. ``R`` holds the rotations."""
    k = model[M_GROUND_STIFFNESS]
    c = model[M_GROUND_DAMPING]
    mu = model[M_GROUND_FRICTION]
    slip = model[M_GROUND_SLIP_SPEED]
    if x[BODY_POS + 2] < model[M_GROUND_LOAD_REACH]:
        for corner in range(8):
            sx = 1.0 if corner & 1 else -1.0
            sy = 1.0 if corner & 2 else -1.0
            sz = 1.0 if corner & 4 else -1.0
            _point_contact(
                x,
                0,
                0,
                model[M_LOAD_BOX_CENTRE] + sx * model[M_LOAD_HALF_SIZE],
                model[M_LOAD_BOX_CENTRE + 1] + sy * model[M_LOAD_HALF_SIZE + 1],
                model[M_LOAD_BOX_CENTRE + 2] + sz * model[M_LOAD_HALF_SIZE + 2],
                R,
                force,
                torque,
                k,
                c,
                mu,
                slip,
            )
    reach = model[M_GROUND_QUAD_REACH]
    below = -model[M_GROUND_LANDING]
    for i in range(n):
        o = quad_offset(i)
        if x[o + QUAD_POS + 2] >= reach:
            continue
        qm = quad_model_offset(i) + QM_ROTOR_XY
        for r in range(4):
            _point_contact(
                x, o, i + 1, model[qm + 2 * r], model[qm + 2 * r + 1], below, R, force, torque, k, c, mu, slip
            )


@kernel(inline="always")
def _end(x, o, b, rx, ry, rz, R):
    """World offset and velocity of body b's point r (body frame): (ox, oy, oz, vx, vy, vz)."""
    ox = R[b, 0] * rx + R[b, 1] * ry + R[b, 2] * rz
    oy = R[b, 3] * rx + R[b, 4] * ry + R[b, 5] * rz
    oz = R[b, 6] * rx + R[b, 7] * ry + R[b, 8] * rz
    wx = x[o + BODY_RATE]
    wy = x[o + BODY_RATE + 1]
    wz = x[o + BODY_RATE + 2]
    cx = wy * rz - wz * ry
    cy = wz * rx - wx * rz
    cz = wx * ry - wy * rx
    return (
        ox,
        oy,
        oz,
        x[o + BODY_VEL] + R[b, 0] * cx + R[b, 1] * cy + R[b, 2] * cz,
        x[o + BODY_VEL + 1] + R[b, 3] * cx + R[b, 4] * cy + R[b, 5] * cz,
        x[o + BODY_VEL + 2] + R[b, 6] * cx + R[b, 7] * cy + R[b, 8] * cz,
    )


@kernel(inline="always")
def _apply_impulse(x, o, b, rx, ry, rz, px, py, pz, R, mom, body):
    """Impulse p (world, N s) at body b's point r (body frame): velocity, body momentum, rates."""
    inv_m = body[b, BC_INV_MASS]
    x[o + BODY_VEL] += inv_m * px
    x[o + BODY_VEL + 1] += inv_m * py
    x[o + BODY_VEL + 2] += inv_m * pz
    bx = R[b, 0] * px + R[b, 3] * py + R[b, 6] * pz
    by = R[b, 1] * px + R[b, 4] * py + R[b, 7] * pz
    bz = R[b, 2] * px + R[b, 5] * py + R[b, 8] * pz
    mom[b, 0] += ry * bz - rz * by
    mom[b, 1] += rz * bx - rx * bz
    mom[b, 2] += rx * by - ry * bx
    for r in range(3):
        x[o + BODY_RATE + r] = mom[b, r] * body[b, BC_INV_INERTIA + r]


@kernel(inline="always")
def _angular_share(b, rx, ry, rz, dx, dy, dz, R, body):
    """|J^-1/2 (r x R^T d)|^2 of body b (principal inertia) for the world direction d."""
    bx = R[b, 0] * dx + R[b, 3] * dy + R[b, 6] * dz
    by = R[b, 1] * dx + R[b, 4] * dy + R[b, 7] * dz
    bz = R[b, 2] * dx + R[b, 5] * dy + R[b, 8] * dz
    ax = ry * bz - rz * by
    ay = rz * bx - rx * bz
    az = rx * by - ry * bx
    return (
        ax * ax * body[b, BC_INV_INERTIA]
        + ay * ay * body[b, BC_INV_INERTIA + 1]
        + az * az * body[b, BC_INV_INERTIA + 2]
    )


@kernel(inline="always")
def cable_snaps(x, model, n, h, R, mom, body):
    """RotorTM's inelastic snap of every cable that reached its length in the last drift of h
    with its ends separating (see the module docstring). Writes ``R`` (the rotations at x)
    and changes velocities, body momenta ``mom`` and rates in place; returns the sum of the
    impulses (N s)."""
    for b in range(n + 1):
        quat_to_rot(x, body_offset(b) + BODY_QUAT, R, b)
    total = 0.0
    for sweep in range(3):  # cables snapping together share the load: a few Gauss-Seidel sweeps
        fired = False
        for i in range(n):
            o = quad_offset(i)
            cm = cable_model_offset(n, i)
            qm = quad_model_offset(i)
            lx = model[cm + CM_LOAD_ATTACH]
            ly = model[cm + CM_LOAD_ATTACH + 1]
            lz = model[cm + CM_LOAD_ATTACH + 2]
            sx = model[qm + QM_ATTACH]
            sy = model[qm + QM_ATTACH + 1]
            sz = model[qm + QM_ATTACH + 2]
            oLx, oLy, oLz, vLx, vLy, vLz = _end(x, 0, 0, lx, ly, lz, R)
            oQx, oQy, oQz, vQx, vQy, vQz = _end(x, o, i + 1, sx, sy, sz, R)
            dx = x[o + QUAD_POS] + oQx - x[BODY_POS] - oLx
            dy = x[o + QUAD_POS + 1] + oQy - x[BODY_POS + 1] - oLy
            dz = x[o + QUAD_POS + 2] + oQz - x[BODY_POS + 2] - oLz
            length = math.sqrt(dx * dx + dy * dy + dz * dz)
            stretch = length - model[cm + CM_REST_LENGTH]
            if stretch <= 0.0:
                continue
            dx /= length
            dy /= length
            dz /= length
            rate = dx * (vQx - vLx) + dy * (vQy - vLy) + dz * (vQz - vLz)
            if rate <= 0.0 or stretch > rate * h * (1.0 + sweep):
                continue
            w = (
                body[0, BC_INV_MASS]
                + body[i + 1, BC_INV_MASS]
                + _angular_share(0, lx, ly, lz, dx, dy, dz, R, body)
                + _angular_share(i + 1, sx, sy, sz, dx, dy, dz, R, body)
            )
            p = rate / w
            _apply_impulse(x, 0, 0, lx, ly, lz, p * dx, p * dy, p * dz, R, mom, body)
            _apply_impulse(x, o, i + 1, sx, sy, sz, -p * dx, -p * dy, -p * dz, R, mom, body)
            total += p
            fired = True
        if not fired:
            break
    return total


@kernel(inline="always")
def landed_idle(x, o, cs, cmodel, qm, scratch):
    """Whether quadrotor (state block o) idles on the ground this update; then its rotors are
    commanded to idle and its INDI filters and hold point reseeded where it sits, so nothing
    winds up against the ground's reaction. It starts idling when on the ground, slow, with its
    reference not above it (by ``SETTLE``); it takes off when the reference climbs
    ``CLIMB_REQUEST`` above it. ``scratch`` holds this update's reference and rotor wrench."""
    z = x[o + QUAD_POS + 2]
    ref_z = scratch[SC_REF + REF_POS + 2]
    if cs[CS_LANDED] != 0.0:
        if ref_z > z + CLIMB_REQUEST:
            cs[CS_LANDED] = 0.0
            return False
    else:
        if (
            z - cmodel[M_GROUND_LANDING] > CONTACT_ZONE
            or ref_z > z + SETTLE
            or scratch[SC_REF + REF_VEL + 2] > 0.0
        ):
            return False
        v2 = x[o + QUAD_VEL] ** 2 + x[o + QUAD_VEL + 1] ** 2 + x[o + QUAD_VEL + 2] ** 2
        if v2 > SETTLE_SPEED * SETTLE_SPEED:
            return False
        cs[CS_LANDED] = 1.0
    idle = cmodel[qm + QM_SPEED_MIN]
    for r in range(4):
        cs[CS_ROTOR_CMD + r] = idle
    for r in range(3):
        cs[CS_ACC_FILT + r] = 0.0
        cs[CS_ALPHA_FILT + r] = 0.0
        cs[CS_FORCE_FILT + r] = scratch[SC_WRENCH + r]
        cs[CS_TORQUE_FILT + r] = scratch[SC_WRENCH + 3 + r]
        cs[CS_HOLD_POS + r] = x[o + QUAD_POS + r]
    return True
