"""Numba kernels: load-cable-quadrotor physics and the onboard controllers, compiled together.

Everything here takes flat float64 arrays laid out by ``cableload_sim.layout`` and scalars, and
allocates nothing inside the time loop. The Python shell (``EmbeddedSimulator``) owns the arrays.

Physics
-------
Bodies: the load (index 0) and n quadrotors (index i + 1), rigid, with world position and
velocity, attitude quaternion and body-frame angular velocity. Cables are massless unilateral
spring-dampers between ``p_L + R_L rho_i`` and ``p_i + R_i r_i``: tension
``max(0, k (L - l0) + c dL/dt)`` while stretched (``L > l0``), zero while slack; force only, no
moment at the joints. Each quadrotor has four rotors with first-order speed dynamics
(integrated exactly over a step), thrust ``k_f w^2`` and drag torque ``k_m w^2``.

Integrator: velocity Verlet (kick-drift-kick). Kicks add half a step of force to the linear
momenta and of torque to the body-frame angular momenta; the drift moves positions with their
velocities and turns each attitude by the free rigid-body flow, the body momentum
counter-rotating with it: exactly for axially symmetric bodies (the quadrotors: a turn about
the momentum vector, then one about body z), otherwise a turn about the momentum vector and a
symmetric splitting of the remainder into exact rotations about body y (h/2), z (h), y (h/2)
(in the manner of Dullweber, Leimkuhler and McLachlan 1997). Why:

- cables are the stiff part (axial mode about 140 rad/s with the default 5000 N/m); the scheme
  is symplectic and time-reversible and second order, so with damping off the energy error stays
  bounded (measured: 1e-7 of the energy over 10 s of taut, vibrating cables at 1 ms) instead of
  drifting (RK2 gains energy; Euler variants drift at first order), stable while ``w h < 2``;
- cable forces are central, so total linear and angular momentum are conserved to rounding,
  without gyroscopic terms written out (they come from carrying the momentum);
- it needs one force evaluation per step (reused first-same-as-last), which is what makes more
  than 1000x real time possible at 1 ms; RK4 would need four.
Velocity-dependent forces (cable damping) use the half-step velocities, first order in the
damping only; a cable going slack or taut inside a step is a kink in the force, with a local
error of first order at that instant. Rotor speeds follow their commands exactly (first-order
lag integrated in closed form). The default step is 1 ms (w h = 0.14); ``SimulationParams``
refuses steps above 2 ms. Load inertia must be given in principal axes (the load frame).

Controller (per quadrotor, every ``decimation`` physics steps)
--------------------------------------------------------------
Samples the last received plan at the current time (cubic Hermite between nodes for position,
velocity and acceleration, linear for jerk and body rates), or holds hover where it entered
hold when there is no plan, the plan has run out, or it held a non-finite value or
non-increasing times (rejected, counted). Position: ``a_cmd = a_ref + Kp e_p + Kv e_v``; INDI
force: ``F = F_filt + m (a_cmd - a_filt) + beta f_fast`` where ``a_filt`` is the filtered
measured acceleration and ``F_filt`` the equally filtered rotor thrust vector, so the cable's
pull ``f = m a_filt - F_filt + m g e_z`` is compensated without a cable model.

Compensating all of it would leave the load's swing undamped: the quadrotors would be fixed
points for it, and the lag of the compensation (mostly the attitude loop tilting the thrust)
damps the swing slightly when the pendulum is faster than the position loop and excites it
when slower (one or two quadrotors). So ``f`` is split into a slow part (first-order filter,
``pull_cutoff_hz``, restarted from the pull as it is at every change between tracking and
holding) and a fast part ``f_fast``, and the quadrotor yields to the fast part: all
of it (``beta`` = ``hold_compliance``, 1: as its own mass would) when holding, where the
velocity gain then damps the swing. When tracking, ``beta`` (``tracking_compliance``) is 0
unless the system's swing is slower than the position loop (``layout``): planners move the
load through tension changes and plan for the quadrotors to follow exactly. Where it is not 0,
only the part across the cable is yielded to, and ``mu a_ref`` is added to ``f`` first: the
pull a mass mu (from the slow pull's vertical part) carried rigidly would add under the plan's
acceleration, which the plan explains.

Tilt-prioritized attitude control (Brescianini et al. 2013) to the thrust direction at the held
heading (the horizontal direction perpendicular to body y when hold began, which the target
construction gives back exactly), plus the plan's body-rate feedforward, then a barrier on the
body rates that keeps the flown tilt within the limit the thrust direction is held to (the
attitude cascade overshoots it by some 15 % otherwise). INDI body rates:
``tau = tau_filt + J (K_w (w_cmd - w) - alpha_filt)``. Rotor thrusts from the inverse
allocation; when a rotor saturates the yaw torque is dropped first, then the collective thrust
shifted so that the roll and pitch torque fit, then clipped.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from cableload_sim.layout import (
    CM_DAMPING,
    CM_LOAD_ATTACH,
    CM_REST_LENGTH,
    CM_SIZE,
    CM_STIFFNESS,
    CS_ACC_FILT,
    CS_ALPHA_FILT,
    CS_FORCE_FILT,
    CS_HEADING,
    CS_HOLD_POS,
    CS_INITIALIZED,
    CS_MODE,
    CS_PREV_FORCE,
    CS_PREV_RATE,
    CS_PREV_TORQUE,
    CS_PREV_VEL,
    CS_PULL_SLOW,
    CS_ROTOR_CMD,
    CS_SEGMENT,
    CS_TORQUE_FILT,
    G_ATT_GAIN,
    G_COS_HALF_TILT,
    G_FILTER_ALPHA,
    G_HOLD_COMPLIANCE,
    G_INV_DT,
    G_KP,
    G_KV,
    G_MAX_POS_ERR,
    G_MAX_TILT,
    G_PULL_ALPHA,
    G_RATE_GAIN,
    G_RATE_LAG,
    G_TAN_MAX_TILT,
    G_TRACK_COMPLIANCE,
    G_YAW_GAIN,
    K_HOLD_UPDATES,
    K_REJECTED_PLANS,
    LOAD_POS,
    LOAD_RATE,
    LOAD_SIZE,
    LOAD_VEL,
    M_GRAVITY,
    M_HEADER,
    M_LOAD_INERTIA,
    M_LOAD_MASS,
    MODE_HOLD_EXPIRED,
    MODE_HOLD_NO_PLAN,
    MODE_HOLD_REJECTED,
    MODE_TRACKING,
    PLAN_NEW,
    PLAN_REJECTED,
    PLAN_VALID,
    QM_ALLOC,
    QM_ALLOC_INV,
    QM_ATTACH,
    QM_INERTIA,
    QM_KF,
    QM_MASS,
    QM_MOTOR_TAU,
    QM_SIZE,
    QM_SPEED_MAX,
    QM_SPEED_MIN,
    QUAD_POS,
    QUAD_QUAT,
    QUAD_RATE,
    QUAD_ROTOR,
    QUAD_SIZE,
    QUAD_VEL,
    ST_LONGEST_SLACK,
    ST_MAX_THRUST_RATIO,
    ST_MIN_UAV_DIST_SQ,
    ST_SLACK_ANY,
    ST_STEPS,
    ST_STREAK,
    TR_ACC,
    TR_JERK,
    TR_POS,
    TR_RATE,
    TR_TIME,
    TR_VEL,
)

FAST_CACHE = True
# Fast-math without the no-NaN/no-Inf assumptions (non-finite values must stay detectable) and
# without contraction into FMA or reassociation, whose choices depend on inlining context and
# would make results depend on what else a process compiled first.
FASTMATH = {"nsz", "arcp", "afn"}

# ---------------------------------------------------------------------------------------------
# Small helpers on scalars and fixed slots


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _body_offset(b):
    """State offset of body b: 0 for the load, quadrotor i at b = i + 1."""
    return 0 if b == 0 else LOAD_SIZE + QUAD_SIZE * (b - 1)


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def quat_to_rot(x, k, R, b):
    """Write the rotation matrix of the quaternion x[k:k+4] into R[b, 0:9] (row-major)."""
    w = x[k]
    qx = x[k + 1]
    qy = x[k + 2]
    qz = x[k + 3]
    s = 2.0 / (w * w + qx * qx + qy * qy + qz * qz)
    R[b, 0] = 1.0 - s * (qy * qy + qz * qz)
    R[b, 1] = s * (qx * qy - w * qz)
    R[b, 2] = s * (qx * qz + w * qy)
    R[b, 3] = s * (qx * qy + w * qz)
    R[b, 4] = 1.0 - s * (qx * qx + qz * qz)
    R[b, 5] = s * (qy * qz - w * qx)
    R[b, 6] = s * (qx * qz - w * qy)
    R[b, 7] = s * (qy * qz + w * qx)
    R[b, 8] = 1.0 - s * (qx * qx + qy * qy)


# ---------------------------------------------------------------------------------------------
# Forces


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def compute_forces(x, model, n, wrench, R, force, torque, tension):
    """Forces (world, N) and body-frame torques (N m) on every body at state x.

    Writes R (n+1, 9) rotation matrices, force (n+1, 3), torque (n+1, 3) and tension (n,) (N).
    ``wrench`` (6,) is an external force and torque on the load, both world frame.
    Cable damping uses the velocities stored in x.
    """
    g = model[M_GRAVITY]
    for b in range(n + 1):
        quat_to_rot(x, _body_offset(b) + 3, R, b)
    # load: gravity and the external wrench
    mL = model[M_LOAD_MASS]
    force[0, 0] = wrench[0]
    force[0, 1] = wrench[1]
    force[0, 2] = wrench[2] - mL * g
    for r in range(3):
        torque[0, r] = R[0, r] * wrench[3] + R[0, 3 + r] * wrench[4] + R[0, 6 + r] * wrench[5]
    # quadrotors: gravity, rotor thrust along body z, rotor torques
    for i in range(n):
        b = i + 1
        o = LOAD_SIZE + QUAD_SIZE * i
        qm = M_HEADER + QM_SIZE * i
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
    # cables
    cm0 = M_HEADER + QM_SIZE * n
    wLx = x[LOAD_RATE]
    wLy = x[LOAD_RATE + 1]
    wLz = x[LOAD_RATE + 2]
    for i in range(n):
        b = i + 1
        o = LOAD_SIZE + QUAD_SIZE * i
        cm = cm0 + CM_SIZE * i
        qm = M_HEADER + QM_SIZE * i
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


# ---------------------------------------------------------------------------------------------
# Integrator pieces


# per-body constants gathered once per advance: inverse mass and principal inertia data
BODY_INV_MASS = 0
BODY_INERTIA = 1  # (3)
BODY_INV_INERTIA = 4  # (3)
BODY_SIZE = 7


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def body_constants(model, n):
    """(n+1, BODY_SIZE): inverse mass and principal moments of inertia of every body."""
    out = np.empty((n + 1, BODY_SIZE))
    out[0, BODY_INV_MASS] = 1.0 / model[M_LOAD_MASS]
    for k in range(3):
        out[0, BODY_INERTIA + k] = model[M_LOAD_INERTIA + 4 * k]
    for i in range(n):
        qm = M_HEADER + QM_SIZE * i
        out[i + 1, BODY_INV_MASS] = 1.0 / model[qm + QM_MASS]
        for k in range(3):
            out[i + 1, BODY_INERTIA + k] = model[qm + QM_INERTIA + k]
    for b in range(n + 1):
        for k in range(3):
            out[b, BODY_INV_INERTIA + k] = 1.0 / out[b, BODY_INERTIA + k]
    return out


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _rates_from_momenta(x, n, mom, body):
    """Body rates w = J^-1 m of every body from its body-frame angular momentum."""
    for b in range(n + 1):
        o = _body_offset(b) + 10
        for k in range(3):
            x[o + k] = mom[b, k] * body[b, BODY_INV_INERTIA + k]


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _momenta_from_rates(x, n, mom, body):
    for b in range(n + 1):
        o = _body_offset(b) + 10
        for k in range(3):
            mom[b, k] = x[o + k] * body[b, BODY_INERTIA + k]


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _kick(x, n, force, torque, half_h, mom, body):
    """Half-step kick of every body: v += h/2 F/m; body momentum += h/2 tau; w = J^-1 momentum.

    ``mom`` (n+1, 3) holds each body's angular momentum in its body frame between calls.
    """
    for b in range(n + 1):
        o = _body_offset(b)
        scale = half_h * body[b, BODY_INV_MASS]
        for r in range(3):
            x[o + 7 + r] += scale * force[b, r]
            mom[b, r] += half_h * torque[b, r]
            x[o + 10 + r] = mom[b, r] * body[b, BODY_INV_INERTIA + r]


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _half_angle(a):
    """cos and sin of a (a half rotation angle); a Taylor series for the small angles of one step."""
    if abs(a) > 0.05:
        return math.cos(a), math.sin(a)
    a2 = a * a
    return 1.0 - a2 * (0.5 - a2 * (1.0 / 24.0 - a2 / 720.0)), \
        a * (1.0 - a2 * (1.0 / 6.0 - a2 * (1.0 / 120.0 - a2 / 5040.0)))


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _turn_about_body_axis(x, o, mom, b, axis, theta):
    """Exact flow of the kinetic energy about one principal axis for an angle theta: the body
    turns by theta about its own axis; its body-frame momentum turns the opposite way."""
    c2, s2 = _half_angle(0.5 * theta)
    c = c2 * c2 - s2 * s2
    s = 2.0 * s2 * c2
    w = x[o + 3]
    qx = x[o + 4]
    qy = x[o + 5]
    qz = x[o + 6]
    if axis == 0:
        x[o + 3] = w * c2 - qx * s2
        x[o + 4] = qx * c2 + w * s2
        x[o + 5] = qy * c2 + qz * s2
        x[o + 6] = qz * c2 - qy * s2
        m1 = mom[b, 1]
        m2 = mom[b, 2]
        mom[b, 1] = c * m1 + s * m2
        mom[b, 2] = c * m2 - s * m1
    elif axis == 1:
        x[o + 3] = w * c2 - qy * s2
        x[o + 4] = qx * c2 - qz * s2
        x[o + 5] = qy * c2 + w * s2
        x[o + 6] = qz * c2 + qx * s2
        m0 = mom[b, 0]
        m2 = mom[b, 2]
        mom[b, 0] = c * m0 - s * m2
        mom[b, 2] = c * m2 + s * m0
    else:
        x[o + 3] = w * c2 - qz * s2
        x[o + 4] = qx * c2 + qy * s2
        x[o + 5] = qy * c2 - qx * s2
        x[o + 6] = qz * c2 + w * s2
        m0 = mom[b, 0]
        m1 = mom[b, 1]
        mom[b, 0] = c * m0 + s * m1
        mom[b, 1] = c * m1 - s * m0


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _turn_about_momentum(x, o, mom, b, scale):
    """Exact flow of an isotropic kinetic energy |m|^2 / (2 J): the body turns about its
    momentum vector m (body frame, unchanged) by the angle |m| scale, scale = h / J."""
    ax = 0.5 * scale * mom[b, 0]
    ay = 0.5 * scale * mom[b, 1]
    az = 0.5 * scale * mom[b, 2]
    a2 = ax * ax + ay * ay + az * az
    if a2 > 0.0025:
        angle = math.sqrt(a2)
        c2 = math.cos(angle)
        k = math.sin(angle) / angle
    else:  # Taylor series of cos(a) and sin(a) / a in a^2: no square root needed
        c2 = 1.0 - a2 * (0.5 - a2 * (1.0 / 24.0 - a2 / 720.0))
        k = 1.0 - a2 * (1.0 / 6.0 - a2 * (1.0 / 120.0 - a2 / 5040.0))
    dx = k * ax
    dy = k * ay
    dz = k * az
    w = x[o + 3]
    qx = x[o + 4]
    qy = x[o + 5]
    qz = x[o + 6]
    x[o + 3] = w * c2 - qx * dx - qy * dy - qz * dz
    x[o + 4] = w * dx + qx * c2 + qy * dz - qz * dy
    x[o + 5] = w * dy - qx * dz + qy * c2 + qz * dx
    x[o + 6] = w * dz + qx * dy - qy * dx + qz * c2


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _drift(x, n, h, mom, body):
    """Free flight for h: positions move with their velocities and each attitude follows the
    free rigid-body flow of its kinetic energy T = sum_k m_k^2 / (2 J_k), split into an
    isotropic part |m|^2 / (2 Jx), exactly a turn about the momentum vector, and the rest,
    m_y^2 (1/Jy - 1/Jx) / 2 + m_z^2 (1/Jz - 1/Jx) / 2, exactly turns about body axes. |m|^2 is
    a Casimir, so the isotropic flow commutes with the others:

    - axially symmetric bodies (Jx = Jy: quadrotors): isotropic turn, then a turn about z, is
      the exact free flow;
    - other bodies (the load): isotropic turn, then y for h/2, z for h, y for h/2 (a symmetric
      splitting in the manner of Dullweber, Leimkuhler and McLachlan 1997), second order.
    Both keep the scheme symplectic and time-reversible.
    """
    for b in range(n + 1):
        o = _body_offset(b)
        for r in range(3):
            x[o + r] += h * x[o + 7 + r]
        ix = body[b, BODY_INV_INERTIA]
        iy = body[b, BODY_INV_INERTIA + 1]
        iz = body[b, BODY_INV_INERTIA + 2]
        _turn_about_momentum(x, o, mom, b, h * ix)
        if ix == iy:
            _turn_about_body_axis(x, o, mom, b, 2, h * mom[b, 2] * (iz - ix))
        else:
            _turn_about_body_axis(x, o, mom, b, 1, 0.5 * h * mom[b, 1] * (iy - ix))
            _turn_about_body_axis(x, o, mom, b, 2, h * mom[b, 2] * (iz - ix))
            _turn_about_body_axis(x, o, mom, b, 1, 0.5 * h * mom[b, 1] * (iy - ix))
        # renormalize: the turns keep |q| = 1 up to rounding, so one Newton step on
        # 1/sqrt(|q|^2) near 1 is exact to machine precision
        qw = x[o + 3]
        qx = x[o + 4]
        qy = x[o + 5]
        qz = x[o + 6]
        inv = 1.5 - 0.5 * (qw * qw + qx * qx + qy * qy + qz * qz)
        for r in range(4):
            x[o + 3 + r] *= inv


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _motors(x, ctrl, n, decay):
    """Exact first-order response of every rotor toward its commanded speed over one step;
    ``decay[i]`` is exp(-h / motor time constant)."""
    for i in range(n):
        o = LOAD_SIZE + QUAD_SIZE * i
        for r in range(4):
            cmd = ctrl[i, CS_ROTOR_CMD + r]
            x[o + QUAD_ROTOR + r] = cmd + (x[o + QUAD_ROTOR + r] - cmd) * decay[i]


# ---------------------------------------------------------------------------------------------
# Controller

# slots of the controller's scratch array
SC_REF = 0  # sampled reference: p, v, a, jerk, body rates (15)
SC_ERR = 15  # clipped position error (3)
SC_FORCE = 18  # commanded thrust vector (3)
SC_RATE_CMD = 21  # attitude loop's body-rate command (3)
SC_TORQUE = 24  # commanded body torque (3)
SC_WRENCH = 27  # rotor thrust vector (world) and torque (body) (6)
SC_ROTOR = 33  # rotor thrusts (4)
SC_PULL = 37  # share of the cable's fast pull yielded to, world (3)
SC_SIZE = 40


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _validate_plan(plan):
    """A plan is usable when all its values are finite and its node times strictly increase."""
    nodes = plan.shape[0]
    for j in range(nodes):
        for f in range(plan.shape[1]):
            if not math.isfinite(plan[j, f]):
                return False
        if j > 0 and plan[j, TR_TIME] <= plan[j - 1, TR_TIME]:
            return False
    return True


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _hermite(p0, m0, p1, m1, dt, s):
    """Cubic Hermite value between (p0, slope m0) and (p1, slope m1) at s in [0, 1] of dt."""
    s2 = s * s
    s3 = s2 * s
    return (2 * s3 - 3 * s2 + 1) * p0 + (s3 - 2 * s2 + s) * dt * m0 + (-2 * s3 + 3 * s2) * p1 \
        + (s3 - s2) * dt * m1


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def sample_plan(plan, t, hint, out, w):
    """Sample a valid plan at time t into out[w:w+15]: p, v, a, jerk, body rates.

    Returns the segment index used, or -1 when t is past the last node. Before the first node
    the first node's values are used.
    """
    nodes = plan.shape[0]
    if t > plan[nodes - 1, TR_TIME]:
        return -1
    if t <= plan[0, TR_TIME]:
        for f in range(15):
            out[w + f] = plan[0, 1 + f]
        return 0
    j = hint if 0 <= hint < nodes - 1 else 0
    if plan[j, TR_TIME] > t:
        j = 0
    while j < nodes - 2 and plan[j + 1, TR_TIME] < t:
        j += 1
    dt = plan[j + 1, TR_TIME] - plan[j, TR_TIME]
    s = (t - plan[j, TR_TIME]) / dt
    for r in range(3):
        out[w + r] = _hermite(plan[j, TR_POS + r], plan[j, TR_VEL + r],
                          plan[j + 1, TR_POS + r], plan[j + 1, TR_VEL + r], dt, s)
        out[w + 3 + r] = _hermite(plan[j, TR_VEL + r], plan[j, TR_ACC + r],
                              plan[j + 1, TR_VEL + r], plan[j + 1, TR_ACC + r], dt, s)
        out[w + 6 + r] = _hermite(plan[j, TR_ACC + r], plan[j, TR_JERK + r],
                              plan[j + 1, TR_ACC + r], plan[j + 1, TR_JERK + r], dt, s)
        out[w + 9 + r] = (1 - s) * plan[j, TR_JERK + r] + s * plan[j + 1, TR_JERK + r]
        out[w + 12 + r] = (1 - s) * plan[j, TR_RATE + r] + s * plan[j + 1, TR_RATE + r]
    return j


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _rotor_wrench(x, o, cmodel, qm, R, b, out, w):
    """Thrust vector (world, out[w:w+3]) and rotor torque (body, out[w+3:w+6]) from rotor speeds."""
    kf = cmodel[qm + QM_KF]
    thrust = 0.0
    for r in range(3):
        out[w + 3 + r] = 0.0
    for k in range(4):
        f = kf * x[o + QUAD_ROTOR + k] ** 2
        thrust += f
        for r in range(3):
            out[w + 3 + r] += cmodel[qm + QM_ALLOC + 4 * (r + 1) + k] * f
    out[w] = R[b, 2] * thrust
    out[w + 1] = R[b, 5] * thrust
    out[w + 2] = R[b, 8] * thrust


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _hold_heading(R, b, cs):
    """Keep the current heading as the yaw target: the horizontal unit vector c perpendicular to
    the body y axis, ``c ~ y_B x e_z``. The target attitude is built from a thrust axis z and c
    as ``y = z x c / |z x c|``, ``x = y x z``, which gives back this very attitude for z = z_B;
    the horizontal projection of body x would not (it leaves the vertical plane of c as soon as
    the body tilts about an axis other than x or y), and would turn a hovering, tilted
    quadrotor about its z axis on every entry into hold."""
    hx = R[b, 4]
    hy = -R[b, 1]
    norm = math.sqrt(hx * hx + hy * hy)
    if norm < 1e-6:  # body y axis vertical: any heading will do
        hx = 1.0
        hy = 0.0
        norm = 1.0
    cs[CS_HEADING] = hx / norm
    cs[CS_HEADING + 1] = hy / norm


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def _tilt_barrier(R, b, scratch, wc, max_tilt, cos_half_max_tilt, lag):
    """Limit the body-rate command scratch[wc:wc+3] so that the tilt of body z from the vertical
    cannot overshoot ``max_tilt``. With e the horizontal direction of body z and k = e_z x e
    (world), the tilt grows with the world rate about k and the tilt direction turns with the
    rate about e. The rate about k may grow the tilt at most at ``brake (max_tilt - tilt)``
    (above the limit: must shrink it at least at that rate) and shrink it at most at
    ``brake (max_tilt + tilt)``, since a tilt swinging through the vertical must stop on the
    other side too; the rate about e, which near the vertical turns into tilt as fast, is kept
    within ``brake max_tilt``. ``brake = 1 / (4 lag)``, ``lag`` the delay with which the body
    rate follows its command: it brakes a lagging first-order follower without overshoot
    (critical damping). The thrust direction command is limited to ``max_tilt`` already; this
    keeps the attitude loop from overshooting it."""
    # nothing to limit (the common case, no square root or division): tilt at most half the
    # limit and |w| <= brake max_tilt / 2 = max_tilt / (8 lag); |w| bounds the rates about k
    # and about e
    reach = 8.0 * lag
    w2 = scratch[wc] * scratch[wc] + scratch[wc + 1] * scratch[wc + 1] \
        + scratch[wc + 2] * scratch[wc + 2]
    if R[b, 8] >= cos_half_max_tilt and w2 * reach * reach <= max_tilt * max_tilt:
        return
    # world rate w = R w_B (horizontal part)
    wx = R[b, 0] * scratch[wc] + R[b, 1] * scratch[wc + 1] + R[b, 2] * scratch[wc + 2]
    wy = R[b, 3] * scratch[wc] + R[b, 4] * scratch[wc + 1] + R[b, 5] * scratch[wc + 2]
    zx = R[b, 2]
    zy = R[b, 5]
    sin_tilt = math.sqrt(zx * zx + zy * zy)
    if sin_tilt < 1e-9:
        return
    inv = 1.0 / sin_tilt
    about_k = (zx * wy - zy * wx) * inv
    about_e = (zx * wx + zy * wy) * inv
    brake = 0.25 / lag
    turn_max = brake * max_tilt
    tilt = math.atan2(sin_tilt, R[b, 8])
    dk = max(min(about_k, brake * (max_tilt - tilt)), -brake * (max_tilt + tilt)) - about_k
    de = max(min(about_e, turn_max), -turn_max) - about_e
    if dk == 0.0 and de == 0.0:
        return
    # back to the body frame: R^T (dk k + de e)
    dwx = (de * zx - dk * zy) * inv
    dwy = (dk * zx + de * zy) * inv
    for r in range(3):
        scratch[wc + r] += R[b, r] * dwx + R[b, 3 + r] * dwy


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", inline="always")
def controller_update(x, i, cs, plan, plan_status, counters, cmodel, gains, t, R, scratch):
    """One update of quadrotor i's onboard controller at time t.

    Reads the state x (its own block only) and its plan; writes its controller state cs (row),
    its rotor speed commands cs[CS_ROTOR_CMD:...] and counters. ``R`` (n+1, 9) must hold the
    current rotation matrices; ``scratch`` is a (SC_SIZE,) work array.
    """
    o = LOAD_SIZE + QUAD_SIZE * i
    qm = M_HEADER + QM_SIZE * i
    b = i + 1
    inv_dt = gains[G_INV_DT]
    alpha = gains[G_FILTER_ALPHA]
    g = cmodel[M_GRAVITY]
    mass = cmodel[qm + QM_MASS]
    rw = SC_WRENCH
    _rotor_wrench(x, o, cmodel, qm, R, b, scratch, rw)

    # measurements and INDI filters
    fresh = cs[CS_INITIALIZED] == 0.0
    if fresh:
        for r in range(3):
            cs[CS_ACC_FILT + r] = 0.0
            cs[CS_ALPHA_FILT + r] = 0.0
            cs[CS_FORCE_FILT + r] = scratch[rw + r]
            cs[CS_TORQUE_FILT + r] = scratch[rw + 3 + r]
            cs[CS_HOLD_POS + r] = x[o + QUAD_POS + r]
        _hold_heading(R, b, cs)
        cs[CS_MODE] = MODE_HOLD_NO_PLAN
        cs[CS_INITIALIZED] = 1.0
    else:
        for r in range(3):
            acc = (x[o + QUAD_VEL + r] - cs[CS_PREV_VEL + r]) * inv_dt
            ang = (x[o + QUAD_RATE + r] - cs[CS_PREV_RATE + r]) * inv_dt
            fmid = 0.5 * (scratch[rw + r] + cs[CS_PREV_FORCE + r])
            tmid = 0.5 * (scratch[rw + 3 + r] + cs[CS_PREV_TORQUE + r])
            cs[CS_ACC_FILT + r] += alpha * (acc - cs[CS_ACC_FILT + r])
            cs[CS_ALPHA_FILT + r] += alpha * (ang - cs[CS_ALPHA_FILT + r])
            cs[CS_FORCE_FILT + r] += alpha * (fmid - cs[CS_FORCE_FILT + r])
            cs[CS_TORQUE_FILT + r] += alpha * (tmid - cs[CS_TORQUE_FILT + r])
    for r in range(3):
        cs[CS_PREV_VEL + r] = x[o + QUAD_VEL + r]
        cs[CS_PREV_RATE + r] = x[o + QUAD_RATE + r]
        cs[CS_PREV_FORCE + r] = scratch[rw + r]
        cs[CS_PREV_TORQUE + r] = scratch[rw + 3 + r]

    # reference: the plan, or hover hold
    if plan_status[i] == PLAN_NEW:
        if _validate_plan(plan):
            plan_status[i] = PLAN_VALID
            cs[CS_SEGMENT] = 0.0
        else:
            plan_status[i] = PLAN_REJECTED
            counters[i, K_REJECTED_PLANS] += 1.0
    ref = SC_REF
    mode = MODE_HOLD_NO_PLAN
    if plan_status[i] == PLAN_VALID:
        seg = sample_plan(plan, t, int(cs[CS_SEGMENT]), scratch, ref)
        if seg >= 0:
            mode = MODE_TRACKING
            cs[CS_SEGMENT] = seg
        else:
            mode = MODE_HOLD_EXPIRED
    elif plan_status[i] == PLAN_REJECTED:
        mode = MODE_HOLD_REJECTED
    if mode != MODE_TRACKING:
        if cs[CS_MODE] == MODE_TRACKING:
            for r in range(3):
                cs[CS_HOLD_POS + r] = x[o + QUAD_POS + r]
            _hold_heading(R, b, cs)
        for f in range(15):
            scratch[ref + f] = 0.0
        for r in range(3):
            scratch[ref + r] = cs[CS_HOLD_POS + r]
        counters[i, K_HOLD_UPDATES] += 1.0
    # the slow pull restarts from the pull as it is on the first update and whenever the
    # controller changes between tracking and holding
    restart = fresh or ((cs[CS_MODE] == MODE_TRACKING) != (mode == MODE_TRACKING))
    cs[CS_MODE] = mode

    # The cable's pull as INDI sees it, m a_filt - F_filt + m g e_z, and its slow part: a
    # first-order filter, kept only while some of the fast part is yielded to. The share
    # yielded to: all of it when holding. When tracking, a share that is 0 unless the swing
    # needs it; then only the part across the cable (tension changes along it are how planners
    # move the load) and not what a mass mu carried rigidly would add under the plan's
    # acceleration (the plan explains it; mu from the vertical part of the slow pull).
    beta = gains[G_HOLD_COMPLIANCE]
    mu = 0.0
    if mode == MODE_TRACKING:
        beta = gains[G_TRACK_COMPLIANCE]
        if beta != 0.0 and not restart and cs[CS_PULL_SLOW + 2] < 0.0:
            mu = -cs[CS_PULL_SLOW + 2] / g
    if beta != 0.0:
        slow = 1.0 if restart else gains[G_PULL_ALPHA]
        for r in range(3):
            pull = mass * cs[CS_ACC_FILT + r] - cs[CS_FORCE_FILT + r] + mu * scratch[ref + 6 + r]
            if r == 2:
                pull += mass * g
            cs[CS_PULL_SLOW + r] += slow * (pull - cs[CS_PULL_SLOW + r])
            scratch[SC_PULL + r] = beta * (pull - cs[CS_PULL_SLOW + r])
        norm2 = cs[CS_PULL_SLOW] ** 2 + cs[CS_PULL_SLOW + 1] ** 2 + cs[CS_PULL_SLOW + 2] ** 2
        if mode == MODE_TRACKING and norm2 > 0.0:
            along = (scratch[SC_PULL] * cs[CS_PULL_SLOW] + scratch[SC_PULL + 1] * cs[CS_PULL_SLOW + 1]
                     + scratch[SC_PULL + 2] * cs[CS_PULL_SLOW + 2]) / norm2
            for r in range(3):
                scratch[SC_PULL + r] -= along * cs[CS_PULL_SLOW + r]

    # position control with INDI force compensation
    ex = scratch[ref] - x[o + QUAD_POS]
    ey = scratch[ref + 1] - x[o + QUAD_POS + 1]
    ez = scratch[ref + 2] - x[o + QUAD_POS + 2]
    enorm = math.sqrt(ex * ex + ey * ey + ez * ez)
    if enorm > gains[G_MAX_POS_ERR]:
        scale = gains[G_MAX_POS_ERR] / enorm
        ex *= scale
        ey *= scale
        ez *= scale
    scratch[SC_ERR] = ex
    scratch[SC_ERR + 1] = ey
    scratch[SC_ERR + 2] = ez
    for r in range(3):
        acmd = scratch[ref + 6 + r] + gains[G_KP + r] * scratch[SC_ERR + r] \
            + gains[G_KV + r] * (scratch[ref + 3 + r] - x[o + QUAD_VEL + r])
        scratch[SC_FORCE + r] = cs[CS_FORCE_FILT + r] + mass * (acmd - cs[CS_ACC_FILT + r])
    if beta != 0.0:
        for r in range(3):
            scratch[SC_FORCE + r] += scratch[SC_PULL + r]
    fx = scratch[SC_FORCE]
    fy = scratch[SC_FORCE + 1]
    fz = scratch[SC_FORCE + 2]
    # keep the thrust axis upward and within the tilt limit
    fz_min = 0.2 * mass * g
    if fz < fz_min:
        fz = fz_min
    fh = math.sqrt(fx * fx + fy * fy)
    fh_max = gains[G_TAN_MAX_TILT] * fz
    if fh > fh_max:
        fx *= fh_max / fh
        fy *= fh_max / fh
    inv_fn = 1.0 / math.sqrt(fx * fx + fy * fy + fz * fz)
    zx = fx * inv_fn
    zy = fy * inv_fn
    zz = fz * inv_fn
    thrust = fx * R[b, 2] + fy * R[b, 5] + fz * R[b, 8]

    # desired attitude: thrust axis z, heading the held yaw
    cxw = cs[CS_HEADING]
    cyw = cs[CS_HEADING + 1]
    yx = -zz * cyw
    yy = zz * cxw
    yz = zx * cyw - zy * cxw
    inv_yn = 1.0 / math.sqrt(yx * yx + yy * yy + yz * yz)
    yx *= inv_yn
    yy *= inv_yn
    yz *= inv_yn
    xx = yy * zz - yz * zy
    xy = yz * zx - yx * zz
    xz = yx * zy - yy * zx
    # rotation matrix [x y z] -> quaternion (Shepperd); R[r][c] = column c's component r
    tr = xx + yy + zz
    if tr > 0.0:
        s = 2.0 * math.sqrt(1.0 + tr)
        inv_s = 1.0 / s
        dw = 0.25 * s
        dxq = (yz - zy) * inv_s
        dyq = (zx - xz) * inv_s
        dzq = (xy - yx) * inv_s
    elif xx > yy and xx > zz:
        s = 2.0 * math.sqrt(1.0 + xx - yy - zz)
        dw = (yz - zy) / s
        dxq = 0.25 * s
        dyq = (yx + xy) / s
        dzq = (zx + xz) / s
    elif yy > zz:
        s = 2.0 * math.sqrt(1.0 + yy - xx - zz)
        dw = (zx - xz) / s
        dxq = (yx + xy) / s
        dyq = 0.25 * s
        dzq = (zy + yz) / s
    else:
        s = 2.0 * math.sqrt(1.0 + zz - xx - yy)
        dw = (xy - yx) / s
        dxq = (zx + xz) / s
        dyq = (zy + yz) / s
        dzq = 0.25 * s
    # error quaternion q_e = conj(q) (x) q_des
    qw = x[o + QUAD_QUAT]
    qx = -x[o + QUAD_QUAT + 1]
    qy = -x[o + QUAD_QUAT + 2]
    qz = -x[o + QUAD_QUAT + 3]
    ew = qw * dw - qx * dxq - qy * dyq - qz * dzq
    ewx = qw * dxq + qx * dw + qy * dzq - qz * dyq
    ewy = qw * dyq - qx * dzq + qy * dw + qz * dxq
    ewz = qw * dzq + qx * dyq - qy * dxq + qz * dw
    if ew < 0.0:
        ew = -ew
        ewx = -ewx
        ewy = -ewy
        ewz = -ewz
    # tilt-prioritized split q_e = q_tilt (x) q_yaw
    c = math.sqrt(ew * ew + ewz * ewz)
    wc = SC_RATE_CMD
    if c > 1e-9:
        inv_c = 1.0 / c
        scratch[wc] = gains[G_ATT_GAIN] * (ew * ewx - ewy * ewz) * inv_c
        scratch[wc + 1] = gains[G_ATT_GAIN] * (ew * ewy + ewx * ewz) * inv_c
        scratch[wc + 2] = gains[G_YAW_GAIN] * ewz * inv_c
    else:  # upside down relative to the target: rotate about x
        scratch[wc] = gains[G_ATT_GAIN]
        scratch[wc + 1] = 0.0
        scratch[wc + 2] = 0.0

    # the plan's body rates fed forward; then the tilt limit as a barrier on the flown tilt
    for r in range(3):
        scratch[wc + r] += scratch[ref + 12 + r]
    _tilt_barrier(R, b, scratch, wc, gains[G_MAX_TILT], gains[G_COS_HALF_TILT],
                  gains[G_RATE_LAG] + cmodel[qm + QM_MOTOR_TAU])

    # INDI body-rate control
    tau = SC_TORQUE
    for r in range(3):
        alpha_cmd = gains[G_RATE_GAIN + r] * (scratch[wc + r] - x[o + QUAD_RATE + r])
        scratch[tau + r] = cs[CS_TORQUE_FILT + r] \
            + cmodel[qm + QM_INERTIA + r] * (alpha_cmd - cs[CS_ALPHA_FILT + r])

    # allocation: when a rotor saturates, yaw torque dropped first, then the collective thrust
    # shifted so that the roll and pitch torque fit (attitude before thrust), then clip
    kf = cmodel[qm + QM_KF]
    f_min = kf * cmodel[qm + QM_SPEED_MIN] ** 2
    f_max = kf * cmodel[qm + QM_SPEED_MAX] ** 2
    thrust = min(max(thrust, 4.0 * f_min), 4.0 * f_max)
    for attempt in range(2):
        saturated = False
        for k in range(4):
            a = qm + QM_ALLOC_INV + 4 * k
            f = cmodel[a] * thrust + cmodel[a + 1] * scratch[tau] + cmodel[a + 2] * scratch[tau + 1]
            if attempt == 0:
                f += cmodel[a + 3] * scratch[tau + 2]
            if f < f_min or f > f_max:
                saturated = True
            scratch[SC_ROTOR + k] = f
        if not saturated:
            break
    if saturated:
        lo = min(min(scratch[SC_ROTOR], scratch[SC_ROTOR + 1]),
                 min(scratch[SC_ROTOR + 2], scratch[SC_ROTOR + 3]))
        hi = max(max(scratch[SC_ROTOR], scratch[SC_ROTOR + 1]),
                 max(scratch[SC_ROTOR + 2], scratch[SC_ROTOR + 3]))
        shift = 0.0
        if lo < f_min and hi + (f_min - lo) <= f_max:
            shift = f_min - lo
        elif hi > f_max and lo - (hi - f_max) >= f_min:
            shift = f_max - hi
        for k in range(4):
            scratch[SC_ROTOR + k] += shift
    inv_kf = 1.0 / kf
    for k in range(4):
        f = min(max(scratch[SC_ROTOR + k], f_min), f_max)
        cs[CS_ROTOR_CMD + k] = math.sqrt(f * inv_kf)


# ---------------------------------------------------------------------------------------------
# Time stepping


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _slack_statistics(n, h, tension, stats):
    """Every physics step: time with any cable slack, and each cable's longest slack streak."""
    stats[ST_STEPS] += 1.0
    any_slack = False
    for i in range(n):
        if tension[i] == 0.0:
            any_slack = True
            stats[ST_STREAK + i] += h
            if stats[ST_STREAK + i] > stats[ST_LONGEST_SLACK]:
                stats[ST_LONGEST_SLACK] = stats[ST_STREAK + i]
        else:
            stats[ST_STREAK + i] = 0.0
    if any_slack:
        stats[ST_SLACK_ANY] += 1.0


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def _sampled_statistics(x, n, model, stats):
    """At every controller update: largest thrust ratio and closest pair of quadrotors."""
    for i in range(n):
        o = LOAD_SIZE + QUAD_SIZE * i
        qm = M_HEADER + QM_SIZE * i
        w2 = 0.0
        for r in range(4):
            w2 += x[o + QUAD_ROTOR + r] ** 2
        full = 4.0 * model[qm + QM_SPEED_MAX] ** 2
        if w2 > stats[ST_MAX_THRUST_RATIO] * full:  # the division only for a new largest
            stats[ST_MAX_THRUST_RATIO] = max(w2 / full, stats[ST_MAX_THRUST_RATIO])
        for k in range(i):
            ok = LOAD_SIZE + QUAD_SIZE * k
            d2 = 0.0
            for r in range(3):
                d2 += (x[o + r] - x[ok + r]) ** 2
            if d2 < stats[ST_MIN_UAV_DIST_SQ]:
                stats[ST_MIN_UAV_DIST_SQ] = d2


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def advance(x, ctrl, plans, plan_status, counters, model, cmodel, gains, n, step0, h, n_steps,
            decimation, wrench, stats, fcache, fvalid, log_every, log_x, log_tension):
    """Advance one system by ``n_steps`` physics steps of ``h`` seconds.

    ``step0`` is the global index of the first step (time ``step0 * h``); the controllers run
    on every step whose global index is a multiple of ``decimation``. ``wrench`` (m, 6) gives
    the load's external world force and torque held during each step (the last row repeats
    when m < n_steps). ``fcache`` (n+1, 9) carries the forces, torques and body angular momenta
    at the end of the last step into the next call (valid when ``fvalid[0]`` is 1), so
    splitting a run into calls changes no bit of it; without it they are evaluated at x with
    ``wrench[0]``. When
    ``log_every`` > 0, the state and tensions after every global step index that is a multiple
    of it go to ``log_x`` and ``log_tension``; returns the number of rows written.
    """
    R = np.empty((n + 1, 9))
    force = np.empty((n + 1, 3))
    torque = np.empty((n + 1, 3))
    tension = np.empty(n)
    mom = np.empty((n + 1, 3))
    scratch = np.empty(SC_SIZE)
    rows = 0
    half = 0.5 * h
    m_last = wrench.shape[0] - 1
    decay = np.empty(n)
    for i in range(n):
        decay[i] = math.exp(-h / model[M_HEADER + QM_SIZE * i + QM_MOTOR_TAU])
    body = body_constants(model, n)
    if fvalid[0] == 1:
        for b in range(n + 1):
            quat_to_rot(x, _body_offset(b) + 3, R, b)
            for r in range(3):
                force[b, r] = fcache[b, r]
                torque[b, r] = fcache[b, 3 + r]
                mom[b, r] = fcache[b, 6 + r]
    else:
        compute_forces(x, model, n, wrench[0], R, force, torque, tension)
        _momenta_from_rates(x, n, mom, body)
    for k in range(n_steps):
        step = step0 + k
        if step % decimation == 0:
            t = step * h
            for i in range(n):
                controller_update(x, i, ctrl[i], plans[i], plan_status, counters, cmodel, gains,
                                  t, R, scratch)
            _sampled_statistics(x, n, model, stats)
        _kick(x, n, force, torque, half, mom, body)
        _drift(x, n, h, mom, body)
        _rates_from_momenta(x, n, mom, body)
        _motors(x, ctrl, n, decay)
        compute_forces(x, model, n, wrench[min(k, m_last)], R, force, torque, tension)
        _kick(x, n, force, torque, half, mom, body)
        _slack_statistics(n, h, tension, stats)
        if log_every > 0 and (step + 1) % log_every == 0 and rows < log_x.shape[0]:
            for s in range(x.shape[0]):
                log_x[rows, s] = x[s]
            for i in range(n):
                log_tension[rows, i] = tension[i]
            rows += 1
    for b in range(n + 1):
        for r in range(3):
            fcache[b, r] = force[b, r]
            fcache[b, 3 + r] = torque[b, r]
            fcache[b, 6 + r] = mom[b, r]
    fvalid[0] = 1
    return rows


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy", parallel=True)
def advance_batch(X, CTRL, PLANS, STATUS, COUNTERS, MODELS, cmodel, gains, n, step0, h, n_steps,
                  decimation, WRENCH, STATS, FCACHE, FVALID):
    """``advance`` for B independent systems in parallel (no logging); leading axis B."""
    log_x = np.empty((0, X.shape[1]))
    log_tension = np.empty((0, n))
    for bsys in prange(X.shape[0]):
        advance(X[bsys], CTRL[bsys], PLANS[bsys], STATUS[bsys], COUNTERS[bsys], MODELS[bsys],
                cmodel, gains, n, step0, h, n_steps, decimation, WRENCH[bsys], STATS[bsys],
                FCACHE[bsys], FVALID[bsys], 0, log_x, log_tension)


@njit(cache=FAST_CACHE, fastmath=FASTMATH, error_model="numpy")
def cable_tensions(x, model, n, out_tension, out_dir):
    """Tension (N) of each cable and its unit direction from the load's end to the quadrotor's."""
    R = np.empty((n + 1, 9))
    force = np.empty((n + 1, 3))
    torque = np.empty((n + 1, 3))
    zero = np.zeros(6)
    compute_forces(x, model, n, zero, R, force, torque, out_tension)
    cm0 = M_HEADER + QM_SIZE * n
    for i in range(n):
        o = LOAD_SIZE + QUAD_SIZE * i
        qm = M_HEADER + QM_SIZE * i
        cm = cm0 + CM_SIZE * i
        d = np.zeros(3)
        for r in range(3):
            d[r] = x[o + r] - x[LOAD_POS + r]
            for c in range(3):
                d[r] += R[i + 1, 3 * r + c] * model[qm + QM_ATTACH + c] \
                    - R[0, 3 * r + c] * model[cm + CM_LOAD_ATTACH + c]
        norm = math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
        for r in range(3):
            out_dir[i, r] = d[r] / norm
