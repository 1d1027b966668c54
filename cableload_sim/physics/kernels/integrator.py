"""Integrator stage: the velocity Verlet (kick-drift-kick) pieces and the motors.

Kicks add half a step of force to the linear momenta and of torque to the body-frame angular
momenta; the drift moves positions and turns attitudes by the free rigid-body flow; the motors
follow their commands exactly. See the package docstring for why this scheme.
"""

from __future__ import annotations

import math

import numpy as np

from cableload_sim.physics.kernels.jit import (
    body_offset,
    kernel,
    quad_model_offset,
    quad_offset,
    quat_product,
)
from cableload_sim.physics.layout import (
    BC_INERTIA,
    BC_INV_INERTIA,
    BC_INV_MASS,
    BC_SIZE,
    BODY_POS,
    BODY_QUAT,
    BODY_RATE,
    BODY_VEL,
    CS_ROTOR_CMD,
    M_LOAD_INERTIA,
    M_LOAD_MASS,
    QM_INERTIA,
    QM_MASS,
    QM_MOTOR_TAU,
    QUAD_ROTOR,
)


@kernel()
def body_constants(model, n):
    """(n+1, BC_SIZE): inverse mass and principal moments of inertia of every body."""
    out = np.empty((n + 1, BC_SIZE))
    out[0, BC_INV_MASS] = 1.0 / model[M_LOAD_MASS]
    for k in range(3):
        out[0, BC_INERTIA + k] = model[M_LOAD_INERTIA + 4 * k]  # the 3x3 matrix's diagonal
    for i in range(n):
        qm = quad_model_offset(i)
        out[i + 1, BC_INV_MASS] = 1.0 / model[qm + QM_MASS]
        for k in range(3):
            out[i + 1, BC_INERTIA + k] = model[qm + QM_INERTIA + k]
    for b in range(n + 1):
        for k in range(3):
            out[b, BC_INV_INERTIA + k] = 1.0 / out[b, BC_INERTIA + k]
    return out


@kernel()
def motor_decay(model, n, h):
    """(n,): exp(-h / motor time constant) of every quadrotor."""
    decay = np.empty(n)
    for i in range(n):
        decay[i] = math.exp(-h / model[quad_model_offset(i) + QM_MOTOR_TAU])
    return decay


@kernel()
def rates_from_momenta(x, n, mom, body):
    """Body rates w = J^-1 m of every body from its body-frame angular momentum."""
    for b in range(n + 1):
        o = body_offset(b) + BODY_RATE
        for k in range(3):
            x[o + k] = mom[b, k] * body[b, BC_INV_INERTIA + k]


@kernel()
def momenta_from_rates(x, n, mom, body):
    for b in range(n + 1):
        o = body_offset(b) + BODY_RATE
        for k in range(3):
            mom[b, k] = x[o + k] * body[b, BC_INERTIA + k]


@kernel()
def kick(x, n, force, torque, half_h, mom, body):
    """Half-step kick of every body: v += h/2 F/m; body momentum += h/2 tau; w = J^-1 momentum.

    ``mom`` (n+1, 3) holds each body's angular momentum in its body frame between calls.
    """
    for b in range(n + 1):
        o = body_offset(b)
        scale = half_h * body[b, BC_INV_MASS]
        for r in range(3):
            x[o + BODY_VEL + r] += scale * force[b, r]
            mom[b, r] += half_h * torque[b, r]
            x[o + BODY_RATE + r] = mom[b, r] * body[b, BC_INV_INERTIA + r]


@kernel(inline="always")
def _half_angle(a):
    """cos and sin of a (a half rotation angle); a Taylor series for the small angles of one step."""
    if abs(a) > 0.05:
        return math.cos(a), math.sin(a)
    a2 = a * a
    return 1.0 - a2 * (0.5 - a2 * (1.0 / 24.0 - a2 / 720.0)), a * (
        1.0 - a2 * (1.0 / 6.0 - a2 * (1.0 / 120.0 - a2 / 5040.0))
    )


@kernel(inline="always")
def _turn_about_body_axis(x, q, mom, b, axis, theta):
    """Exact flow of the kinetic energy about one principal axis for an angle theta: the body
    turns by theta about its own axis; its body-frame momentum turns the opposite way.
    ``q``: index of the body's quaternion in x."""
    c2, s2 = _half_angle(0.5 * theta)
    c = c2 * c2 - s2 * s2
    s = 2.0 * s2 * c2
    w = x[q]
    qx = x[q + 1]
    qy = x[q + 2]
    qz = x[q + 3]
    if axis == 0:
        x[q] = w * c2 - qx * s2
        x[q + 1] = qx * c2 + w * s2
        x[q + 2] = qy * c2 + qz * s2
        x[q + 3] = qz * c2 - qy * s2
        m1 = mom[b, 1]
        m2 = mom[b, 2]
        mom[b, 1] = c * m1 + s * m2
        mom[b, 2] = c * m2 - s * m1
    elif axis == 1:
        x[q] = w * c2 - qy * s2
        x[q + 1] = qx * c2 - qz * s2
        x[q + 2] = qy * c2 + w * s2
        x[q + 3] = qz * c2 + qx * s2
        m0 = mom[b, 0]
        m2 = mom[b, 2]
        mom[b, 0] = c * m0 - s * m2
        mom[b, 2] = c * m2 + s * m0
    else:
        x[q] = w * c2 - qz * s2
        x[q + 1] = qx * c2 + qy * s2
        x[q + 2] = qy * c2 - qx * s2
        x[q + 3] = qz * c2 + w * s2
        m0 = mom[b, 0]
        m1 = mom[b, 1]
        mom[b, 0] = c * m0 + s * m1
        mom[b, 1] = c * m1 - s * m0


@kernel(inline="always")
def _turn_about_momentum(x, q, mom, b, scale):
    """Exact flow of an isotropic kinetic energy |m|^2 / (2 J): the body turns about its
    momentum vector m (body frame, unchanged) by the angle |m| scale, scale = h / J.
    ``q``: index of the body's quaternion in x."""
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
    x[q], x[q + 1], x[q + 2], x[q + 3] = quat_product(x[q], x[q + 1], x[q + 2], x[q + 3], c2, dx, dy, dz)


@kernel()
def drift(x, n, h, mom, body):
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
        o = body_offset(b)
        for r in range(3):
            x[o + BODY_POS + r] += h * x[o + BODY_VEL + r]
        q = o + BODY_QUAT
        ix = body[b, BC_INV_INERTIA]
        iy = body[b, BC_INV_INERTIA + 1]
        iz = body[b, BC_INV_INERTIA + 2]
        _turn_about_momentum(x, q, mom, b, h * ix)
        if ix == iy:
            _turn_about_body_axis(x, q, mom, b, 2, h * mom[b, 2] * (iz - ix))
        else:
            _turn_about_body_axis(x, q, mom, b, 1, 0.5 * h * mom[b, 1] * (iy - ix))
            _turn_about_body_axis(x, q, mom, b, 2, h * mom[b, 2] * (iz - ix))
            _turn_about_body_axis(x, q, mom, b, 1, 0.5 * h * mom[b, 1] * (iy - ix))
        # renormalize: the turns keep |q| = 1 up to rounding, so one Newton step on
        # 1/sqrt(|q|^2) near 1 is exact to machine precision
        qw = x[q]
        qx = x[q + 1]
        qy = x[q + 2]
        qz = x[q + 3]
        inv = 1.5 - 0.5 * (qw * qw + qx * qx + qy * qy + qz * qz)
        for r in range(4):
            x[q + r] *= inv


@kernel()
def motors(x, ctrl, n, decay):
    """Exact first-order response of every rotor toward its commanded speed over one step;
    ``decay[i]`` is exp(-h / motor time constant)."""
    for i in range(n):
        o = quad_offset(i) + QUAD_ROTOR
        for r in range(4):
            cmd = ctrl[i, CS_ROTOR_CMD + r]
            x[o + r] = cmd + (x[o + r] - cmd) * decay[i]
