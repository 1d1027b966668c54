"""Formation baseline: every quadrotor rides a rigid formation that moves with the load reference.

Each quadrotor's reference sits above its load attachment point at the hover cable angle
(``cableload_sim.physics.statics.hover_geometry``): ``p_i = p_L + R_L rho_i + l_i u_i - R_i r_i`` with
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

Made from a config (``from_config``), the wrench formation is also told the drag of
``[aero]``: its cables supply the load's drag at the reference's velocity, and the body rates
fed forward follow the thrust that also balances each quadrotor's drag at its slot's velocity.

A reference from the ground (``cableload_sim.trajectories.lift``, with ``climb(t)``) moves each
quadrotor from where it rested at the first plan to its slot and back by that share.

With ``follow`` (planner ``formation-follow``: the wrench formation with it) the formation
is no longer open loop: it moves by a share of the load's transient position error
(``LoadFollower``). Open loop, a swing the load picks up in a sharp turn is not damped (on the
paper's Zandvoort track at 1.5 m/s, zero-sideslip, the wrench formation's error after the
tightest corner stays 47-69 mm for the last 15 s, the teacher's 14 mm); following the load with
the lag of the quadrotors' tracking damps it.

With ``converge_s`` the plans start where each quadrotor is and join its slot exponentially
with that time constant (``anchored``); the student plans relative to this variant of
formation-tilt (``planners.student``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from cableload_sim.horizon import node_times
from cableload_sim.params import AeroParams, SystemParams
from cableload_sim.physics.statics import (
    hover_geometry,
    load_wrench,
    rotor_drag_at_hover,
    wrench_correction,
)
from cableload_sim.physics.world import UavTrajectory, WorldState
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.trajectories import LoadReferenceSample

_FD_STEP = 2e-3  # s, finite-difference step for the formation's derivatives
_STENCIL = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])


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


@njit(cache=True)
def _solve_spd6(G, b, x):
    """``x = G^-1 b`` for a symmetric positive definite ``G`` (6, 6) by Cholesky, written out:
    LAPACK's call costs more than the arithmetic at this size, a hundred times a decision.
    ``G`` is overwritten by its factor."""
    m = G.shape[0]
    for j in range(m):
        d = G[j, j]
        for k in range(j):
            d -= G[j, k] * G[j, k]
        d = math.sqrt(d)
        G[j, j] = d
        for i in range(j + 1, m):
            v = G[i, j]
            for k in range(j):
                v -= G[i, k] * G[j, k]
            G[i, j] = v / d
    for i in range(m):  # L y = b
        v = b[i]
        for k in range(i):
            v -= G[i, k] * x[k]
        x[i] = v / G[i, i]
    for i in range(m - 1, -1, -1):  # L^T x = y
        v = x[i]
        for k in range(i + 1, m):
            v -= G[k, i] * x[k]
        x[i] = v / G[i, i]


WRENCH_MIN_TENSION_SHARE = 0.2
"""No cable of the wrench formation pulls with less than this share of its tilted-cone tension
(along the tilted direction): the change toward the wrench is cut short there."""

WRENCH_REGULARIZATION = 1e-12
"""Relative regularization of ``A A^T`` in ``_wrench_forces`` (two cables cannot exert every
torque: the least-squares wrench is taken then)."""


@njit(cache=True)
def _wrench_forces(
    units, pulls, arms, R, w, alpha, force0, force1, force2, inertia, gram, residual, lam, changed
):
    """The cable forces ``pulls * units`` (tensions (n,), directions (n, 3), world), pulling at
    ``arms`` (n, 3: the attachment points from the load's centre of mass, world), changed by
    the least (sum of squares) that makes them supply the load reference's wrench: the force
    ``m_L (a - g)`` and the torque ``R (I alpha + omega x I omega)`` (``w``, ``alpha`` body
    frame, ``inertia`` the principal moments). A tilted hover cone supplies the force but, with
    the attachment points fixed on a level load, a torque that tilts the load while it
    accelerates; these do not. In place. Where the change would slacken a cable (below
    ``WRENCH_MIN_TENSION_SHARE`` of its tension along its old direction) only the largest
    share of it that does not is made, so the formation stays continuous. ``gram`` (6, 6),
    ``residual``, ``lam`` (6) and ``changed`` (n, 3) are scratch.

    The least change is ``f - A^T (A A^T)^-1 (A f - b)`` with ``A f`` the forces' sum and
    torque about the centre of mass: a 6 x 6 solve whatever the number of cables, with
    ``A A^T = [[n I, -[S]x], [[S]x, sum(|r|^2 I - r r^T)]]``, ``S`` the sum of the arms."""
    n = units.shape[0]
    Iw0, Iw1, Iw2 = inertia[0] * w[0], inertia[1] * w[1], inertia[2] * w[2]
    b0 = inertia[0] * alpha[0] + (w[1] * Iw2 - w[2] * Iw1)
    b1 = inertia[1] * alpha[1] + (w[2] * Iw0 - w[0] * Iw2)
    b2 = inertia[2] * alpha[2] + (w[0] * Iw1 - w[1] * Iw0)
    residual[0], residual[1], residual[2] = -force0, -force1, -force2  # A f - b
    for c in range(3):
        residual[3 + c] = -(R[c, 0] * b0 + R[c, 1] * b1 + R[c, 2] * b2)
    gram[:, :] = 0.0
    s0 = s1 = s2 = 0.0
    for i in range(n):
        r0, r1, r2 = arms[i, 0], arms[i, 1], arms[i, 2]
        f0, f1, f2 = pulls[i] * units[i, 0], pulls[i] * units[i, 1], pulls[i] * units[i, 2]
        residual[0] += f0
        residual[1] += f1
        residual[2] += f2
        residual[3] += r1 * f2 - r2 * f1
        residual[4] += r2 * f0 - r0 * f2
        residual[5] += r0 * f1 - r1 * f0
        s0, s1, s2 = s0 + r0, s1 + r1, s2 + r2
        square = r0 * r0 + r1 * r1 + r2 * r2
        r = (r0, r1, r2)
        for a in range(3):
            gram[3 + a, 3 + a] += square
            for b in range(3):
                gram[3 + a, 3 + b] -= r[a] * r[b]
    for a in range(3):
        gram[a, a] = n
    # [S]x below the diagonal, its transpose -[S]x above
    gram[4, 0], gram[5, 0], gram[3, 1], gram[5, 1], gram[3, 2], gram[4, 2] = (s2, -s1, -s2, s0, s1, -s0)
    for a in range(3):
        for b in range(3):
            gram[a, 3 + b] = gram[3 + b, a]
    trace = 0.0
    for a in range(6):
        trace += gram[a, a]
    for a in range(6):
        gram[a, a] += WRENCH_REGULARIZATION * trace
    _solve_spd6(gram, residual, lam)
    share = 1.0  # of the change, the most that leaves every cable pulling enough
    for i in range(n):
        r0, r1, r2 = arms[i, 0], arms[i, 1], arms[i, 2]
        f0, f1, f2 = pulls[i] * units[i, 0], pulls[i] * units[i, 1], pulls[i] * units[i, 2]
        # A^T lam for cable i: lam_force + [r_i]x^T lam_torque = lam_force + lam_torque x r_i
        d0 = lam[0] + lam[4] * r2 - lam[5] * r1
        d1 = lam[1] + lam[5] * r0 - lam[3] * r2
        d2 = lam[2] + lam[3] * r1 - lam[4] * r0
        changed[i, 0], changed[i, 1], changed[i, 2] = d0, d1, d2
        # the tension along the old direction, |f|^2 - s f.d, must stay >= share_min |f|^2
        square, toward = f0 * f0 + f1 * f1 + f2 * f2, f0 * d0 + f1 * d1 + f2 * d2
        if toward > 0.0:
            share = min(share, (1.0 - WRENCH_MIN_TENSION_SHARE) * square / toward)
    for i in range(n):
        f0 = pulls[i] * units[i, 0] - share * changed[i, 0]
        f1 = pulls[i] * units[i, 1] - share * changed[i, 1]
        f2 = pulls[i] * units[i, 2] - share * changed[i, 2]
        pull = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
        pulls[i] = pull
        units[i, 0], units[i, 1], units[i, 2] = f0 / pull, f1 / pull, f2 / pull


@njit(cache=True)
def _formation_points(
    ref_p,
    ref_v,
    ref_a,
    ref_q,
    ref_w,
    ref_alpha,
    directions,
    tensions,
    rho,
    lengths,
    attach,
    masses,
    gravity,
    tilt,
    wrench,
    load_mass,
    load_inertia,
    load_drag,
    out_p,
    out_pull,
):
    """``FormationPlanner._formation`` at every reference sample (the NumPy expressions of
    ``_formation_numpy`` point by point: every student decision computes the prior, and
    NumPy's per-call cost on a few hundred small vectors was most of a decision's time). The
    rotation matrix is written out, not taken from ``kernels.jit.quat_to_rot``: that one
    scales by 2 / |q|^2 where ``quat_to_matrix`` normalizes first, and numba caches this
    function on this file alone, so a helper of another module could run stale. With
    ``wrench`` the cable forces are then made to supply the reference's wrench
    (``_wrench_forces``), the load's drag included (``load_drag``: 1/2 rho C_d A of the faces
    normal to each load axis; still air, the reference's velocity)."""
    R = np.empty((3, 3))
    M = np.empty((3, 3))
    n = directions.shape[0]
    units = np.empty((n, 3))  # cable directions, quadrotor side
    pulls = np.empty(n)  # tensions
    arms = np.empty((n, 3))
    gram, residual, lam, changed = np.empty((6, 6)), np.empty(6), np.empty(6), np.empty((n, 3))
    for k in range(ref_p.shape[0]):
        w, x, y, z = ref_q[k, 0], ref_q[k, 1], ref_q[k, 2], ref_q[k, 3]
        norm = math.sqrt(w * w + x * x + y * y + z * z)
        w, x, y, z = w / norm, x / norm, y / norm, z / norm
        R[0, 0], R[0, 1], R[0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
        R[1, 0], R[1, 1], R[1, 2] = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
        R[2, 0], R[2, 1], R[2, 2] = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
        acc0, acc1, acc2 = ref_a[k, 0], ref_a[k, 1], ref_a[k, 2] + gravity  # a - g
        # what the cables must supply per unit load mass: a - g less the drag D / m_L
        need0, need1, need2 = acc0, acc1, acc2
        if wrench:
            v0, v1, v2 = ref_v[k, 0], ref_v[k, 1], ref_v[k, 2]
            u0 = R[0, 0] * v0 + R[1, 0] * v1 + R[2, 0] * v2  # airspeed in the load frame
            u1 = R[0, 1] * v0 + R[1, 1] * v1 + R[2, 1] * v2
            u2 = R[0, 2] * v0 + R[1, 2] * v1 + R[2, 2] * v2
            d0 = -load_drag[0] * abs(u0) * u0 / load_mass
            d1 = -load_drag[1] * abs(u1) * u1 / load_mass
            d2 = -load_drag[2] * abs(u2) * u2 / load_mass
            need0 -= R[0, 0] * d0 + R[0, 1] * d1 + R[0, 2] * d2
            need1 -= R[1, 0] * d0 + R[1, 1] * d1 + R[1, 2] * d2
            need2 -= R[2, 0] * d0 + R[2, 1] * d1 + R[2, 2] * d2
        need_norm = math.sqrt(need0 * need0 + need1 * need1 + need2 * need2)
        scale = need_norm / gravity
        if tilt:  # the smallest rotation taking e_z to need / |need|
            n0, n1, n2 = need0 / need_norm, need1 / need_norm, need2 / need_norm
            v0, v1, v2 = -n1, n0, 0.0  # e_z x n
            f = 1.0 / (1.0 + n2)
            T00, T01, T02 = 1.0 - (v1 * v1 + v2 * v2) * f, -v2 + v0 * v1 * f, v1 + v0 * v2 * f
            T10, T11, T12 = v2 + v0 * v1 * f, 1.0 - (v0 * v0 + v2 * v2) * f, -v0 + v1 * v2 * f
            T20, T21, T22 = -v1 + v0 * v2 * f, v0 + v1 * v2 * f, 1.0 - (v0 * v0 + v1 * v1) * f
            for c in range(3):
                r0, r1, r2 = R[0, c], R[1, c], R[2, c]
                M[0, c] = T00 * r0 + T01 * r1 + T02 * r2
                M[1, c] = T10 * r0 + T11 * r1 + T12 * r2
                M[2, c] = T20 * r0 + T21 * r1 + T22 * r2
        else:
            M[:, :] = R
        for i in range(n):
            d0, d1, d2 = directions[i, 0], directions[i, 1], directions[i, 2]
            pulls[i] = tensions[i] * scale
            units[i, 0] = M[0, 0] * d0 + M[0, 1] * d1 + M[0, 2] * d2
            units[i, 1] = M[1, 0] * d0 + M[1, 1] * d1 + M[1, 2] * d2
            units[i, 2] = M[2, 0] * d0 + M[2, 1] * d1 + M[2, 2] * d2
            a0, a1, a2 = rho[i, 0], rho[i, 1], rho[i, 2]
            arms[i, 0] = R[0, 0] * a0 + R[0, 1] * a1 + R[0, 2] * a2
            arms[i, 1] = R[1, 0] * a0 + R[1, 1] * a1 + R[1, 2] * a2
            arms[i, 2] = R[2, 0] * a0 + R[2, 1] * a1 + R[2, 2] * a2
        if wrench:
            _wrench_forces(
                units,
                pulls,
                arms,
                R,
                ref_w[k],
                ref_alpha[k],
                load_mass * need0,
                load_mass * need1,
                load_mass * need2,
                load_inertia,
                gram,
                residual,
                lam,
                changed,
            )
        for i in range(n):
            u0, u1, u2 = units[i, 0], units[i, 1], units[i, 2]
            pull = pulls[i]
            f0, f1, f2 = pull * u0, pull * u1, pull * u2
            e0 = ref_p[k, 0] + arms[i, 0] + lengths[i] * u0
            e1 = ref_p[k, 1] + arms[i, 1] + lengths[i] * u1
            e2 = ref_p[k, 2] + arms[i, 2] + lengths[i] * u2
            out_pull[k, i, 0], out_pull[k, i, 1], out_pull[k, i, 2] = f0, f1, f2
            # the quadrotor's attitude: thrust axis along m_i (a_L - g) + pull, heading +x
            t0 = masses[i] * acc0 + f0
            t1 = masses[i] * acc1 + f1
            t2 = masses[i] * acc2 + f2
            tn = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
            z0, z1, z2 = t0 / tn, t1 / tn, t2 / tn
            yn = math.sqrt(z2 * z2 + z1 * z1)
            y1, y2 = z2 / yn, -z1 / yn  # z x e_x, normalized (y0 = 0)
            x0, x1, x2 = y1 * z2 - y2 * z1, y2 * z0, -y1 * z0  # y x z
            b0, b1, b2 = attach[i, 0], attach[i, 1], attach[i, 2]
            out_p[k, i, 0] = e0 - (x0 * b0 + z0 * b2)
            out_p[k, i, 1] = e1 - (x1 * b0 + y1 * b1 + z1 * b2)
            out_p[k, i, 2] = e2 - (x2 * b0 + y2 * b1 + z2 * b2)


@njit(cache=True)
def _slot_derivatives(p, pull, masses, gravity, h, rotor_drag, frame_drag, out):
    """From the formation on the five-point stencil of each node (``p``, ``pull``: (5 k, n, 3))
    the slots' p, v, a, j and body rates (``out``: (5, k, n, 3)), as ``_slot_derivatives_numpy``
    (five-point differences; the thrust axis at the middle three points for its rate, balancing
    the quadrotor's drag at its velocity there: ``rotor_drag`` (n,) each one's linearized rotor
    drag, ``frame_drag`` (3,) its frame's per body axis; zeros: none)."""
    z = np.empty((3, 3))
    vel = np.empty((3, 3))
    drag = False
    for c in range(3):
        drag = drag or frame_drag[c] != 0.0
    for i in range(rotor_drag.shape[0]):
        drag = drag or rotor_drag[i] != 0.0
    for k in range(out.shape[1]):
        for i in range(out.shape[2]):
            for c in range(3):
                pm2, pm1, p0 = p[5 * k, i, c], p[5 * k + 1, i, c], p[5 * k + 2, i, c]
                pp1, pp2 = p[5 * k + 3, i, c], p[5 * k + 4, i, c]
                a = (-pp2 + 16 * pp1 - 30 * p0 + 16 * pm1 - pm2) / (12 * h * h)
                v = (-pp2 + 8 * pp1 - 8 * pm1 + pm2) / (12 * h)
                out[0, k, i, c] = p0
                out[1, k, i, c] = v
                out[2, k, i, c] = a
                out[3, k, i, c] = (pp2 - 2 * pp1 + 2 * pm1 - pm2) / (2 * h**3)
                g = -gravity if c == 2 else 0.0
                accs = ((p0 - 2 * pm1 + pm2) / h**2, a, (pp2 - 2 * pp1 + p0) / h**2)
                vel[0, c], vel[1, c], vel[2, c] = (p0 - pm2) / (2 * h), v, (pp2 - p0) / (2 * h)
                for m in range(3):
                    z[m, c] = masses[i] * (accs[m] - g) + pull[5 * k + 1 + m, i, c]
            if drag:  # the thrust also balances the drag D: m (a - g) + pull - D
                for m in range(3):
                    norm = math.sqrt(z[m, 0] ** 2 + z[m, 1] ** 2 + z[m, 2] ** 2)
                    z0, z1, z2 = z[m, 0] / norm, z[m, 1] / norm, z[m, 2] / norm
                    yn = math.sqrt(z2 * z2 + z1 * z1)  # the body axes, heading +x
                    y1, y2 = z2 / yn, -z1 / yn
                    x0, x1, x2 = y1 * z2 - y2 * z1, y2 * z0, -y1 * z0
                    v0, v1, v2 = vel[m, 0], vel[m, 1], vel[m, 2]
                    u0 = x0 * v0 + x1 * v1 + x2 * v2
                    u1 = y1 * v1 + y2 * v2
                    u2 = z0 * v0 + z1 * v1 + z2 * v2
                    b0 = -frame_drag[0] * abs(u0) * u0 - rotor_drag[i] * u0
                    b1 = -frame_drag[1] * abs(u1) * u1 - rotor_drag[i] * u1
                    b2 = -frame_drag[2] * abs(u2) * u2
                    z[m, 0] -= x0 * b0 + z0 * b2
                    z[m, 1] -= x1 * b0 + y1 * b1 + z1 * b2
                    z[m, 2] -= x2 * b0 + y2 * b1 + z2 * b2
            for m in range(3):
                norm = math.sqrt(z[m, 0] ** 2 + z[m, 1] ** 2 + z[m, 2] ** 2)
                z[m, 0], z[m, 1], z[m, 2] = z[m, 0] / norm, z[m, 1] / norm, z[m, 2] / norm
            z0, z1, z2 = z[1, 0], z[1, 1], z[1, 2]
            d0 = (z[2, 0] - z[0, 0]) / (2 * h)
            d1 = (z[2, 1] - z[0, 1]) / (2 * h)
            d2 = (z[2, 2] - z[0, 2]) / (2 * h)
            yn = math.sqrt(z2 * z2 + z1 * z1)
            y1, y2 = z2 / yn, -z1 / yn
            x0, x1, x2 = y1 * z2 - y2 * z1, y2 * z0, -y1 * z0
            out[4, k, i, 0] = -(y1 * d1 + y2 * d2)
            out[4, k, i, 1] = x0 * d0 + x1 * d1 + x2 * d2
            out[4, k, i, 2] = 0.0


FOLLOW_GAIN = 0.5
"""Share of the load's transient position error the follow formation moves by. Chosen on 12
held-out draws of the generalist distribution (seed 4242, 20 s, link and motion capture on),
never on the named cases. Score (position / 1 cm + attitude / 1 deg, mean over the draws) by
gain, open loop first:

- n = 3: 1.59; 0.35: 1.09; 0.5: 1.07; 0.8: 1.13.
- n = 4: 3.32; 0.3: 2.96; 0.5: 2.91.
- n = 6: 1.28; 0.3: 1.32; 0.5: 1.36: worse at every gain tried, so the student of six keeps
  the open-loop prior.

The damping comes from the lag: the quadrotors reach their moved slots late. For a pendulum
``x'' = (g / l) (s - x)`` whose pivot follows it late, ``s = k x(t - d) ~ k (x - d x')``, the
swing obeys ``x'' + (g / l) k d x' + (g / l) (1 - k) x = 0``: damped."""

FOLLOW_WASHOUT_S = 2.0
"""Time constant (s) of the load error's mean that the follow formation does not follow: a
steady offset (a heavier load, a biased estimate) is left alone instead of grown by
``1 / (1 - FOLLOW_GAIN)``. Without it, the draws above score 1.22 (n = 3, gain 0.5) and the
easy ones lose 1-3 mm."""

FOLLOW_LIMIT_M = 0.25
"""The follow formation moves by at most this far (m): a load error of meters (a lost
estimate, a load on the ground) moves it no further. The swings it damps move it by 1-5 cm."""


class LoadFollower:
    """One planner's estimate of the load's transient position error and the formation's
    offset from it: ``FOLLOW_GAIN (e - mean(e))``, ``e`` the load's position less the
    reference's at the same time and ``mean`` its exponential mean over ``FOLLOW_WASHOUT_S``,
    no longer than ``FOLLOW_LIMIT_M``. Stateful: ``reset`` between flights; a time that goes
    back restarts it."""

    def __init__(
        self, gain: float = FOLLOW_GAIN, washout_s: float = FOLLOW_WASHOUT_S, limit_m: float = FOLLOW_LIMIT_M
    ):
        if not (math.isfinite(gain) and 0.0 <= gain < 1.0):
            raise ValueError(f"gain: expected a share in [0, 1), got {gain!r}")
        if not (math.isfinite(washout_s) and washout_s > 0.0):
            raise ValueError(f"washout_s: expected a positive time (s), got {washout_s!r}")
        if not (math.isfinite(limit_m) and limit_m > 0.0):
            raise ValueError(f"limit_m: expected a positive distance (m), got {limit_m!r}")
        self.gain = gain
        self.washout_s = washout_s
        self.limit_m = limit_m
        self.reset()

    def reset(self) -> None:
        self.mean: np.ndarray | None = None
        self.t = -math.inf

    def offset(self, t: float, load_p: np.ndarray, reference_p: np.ndarray) -> np.ndarray:
        """The formation's offset (3,) at time ``t`` from the load's observed position and the
        reference's then; a non-finite observation changes nothing and moves nothing."""
        error = np.subtract(load_p, reference_p, dtype=float)
        if not (math.isfinite(t) and math.isfinite(float(error.sum()))):
            return np.zeros(3)
        if self.mean is None or t < self.t:
            self.mean = error.copy()
        else:
            self.mean += min(1.0, (t - self.t) / self.washout_s) * (error - self.mean)
        self.t = t
        offset = self.gain * (error - self.mean)
        length = math.sqrt(float(offset @ offset))
        return offset if length <= self.limit_m else offset * (self.limit_m / length)


_KERNELS_READY = False


def load_kernels() -> None:
    """Compile the formation's kernels, or load them from numba's cache, once per process: when
    the first formation (or student) planner is made, not in its first decision (a first
    compile takes seconds, and a planner node's first plans are due at once)."""
    global _KERNELS_READY
    if _KERNELS_READY:
        return
    k, n = 5, 3
    p, pull = np.zeros((k, n, 3)), np.zeros((k, n, 3))
    q = np.zeros((k, 4))
    q[:, 0] = 1.0
    rows = np.zeros((n, 3))
    zeros = np.zeros((k, 3))
    _formation_points(
        zeros,
        zeros,
        zeros,
        q,
        zeros,
        zeros,
        rows + [1.0, 0.0, 1.0],
        np.ones(n),
        rows + [0.1, 0.0, 0.0],
        np.ones(n),
        rows,
        np.ones(n),
        9.81,
        True,
        True,
        1.0,
        np.ones(3),
        np.zeros(3),
        p,
        pull,
    )
    pull[..., 2] = 1.0
    _slot_derivatives(p, pull, np.ones(n), 9.81, _FD_STEP, np.ones(n), np.ones(3), np.empty((5, 1, n, 3)))
    _KERNELS_READY = True


class FormationPlanner:
    """Centralized only in name: each quadrotor's plan uses the reference alone (and, with
    ``follow``, the load's observed position, which every quadrotor observes)."""

    def __init__(
        self,
        system: SystemParams,
        tilt: bool = False,
        converge_s: float | None = None,
        wrench: bool = False,
        aero: AeroParams | None = None,
        follow: bool = False,
    ):
        if converge_s is not None and not (np.isfinite(converge_s) and converge_s > 0.0):
            raise ValueError(f"converge_s: expected a positive time (s) or None, got {converge_s!r}")
        if wrench and not tilt:
            raise ValueError(
                "wrench: the wrench formation corrects the tilted cone; expected tilt=True with it"
            )
        if aero is not None and not wrench:
            raise ValueError(
                "aero: only the wrench formation supplies the load's drag; expected wrench=True with it"
            )
        if follow and not wrench:
            raise ValueError(
                "follow: the follow formation is the wrench formation's; expected wrench=True with it"
            )
        self.system = system
        self.tilt = tilt
        self.wrench = wrench
        self.converge_s = converge_s
        self.follower = LoadFollower() if follow else None
        self.name = (
            "formation-follow"
            if follow
            else "formation-wrench"
            if wrench
            else "formation-tilt"
            if tilt
            else "formation"
        )
        self.load_mass = float(system.load.mass)
        self.load_inertia = np.ascontiguousarray(np.diag(system.load.inertia_matrix()), dtype=float)
        self.load_drag = (
            np.zeros(3) if aero is None else np.ascontiguousarray(aero.load_drag(system.load), dtype=float)
        )
        self.frame_drag = np.zeros(3) if aero is None else np.array(aero.quadrotor_drag, dtype=float)
        self.rotor_drag = np.zeros(system.n_uavs) if aero is None else rotor_drag_at_hover(system, aero)
        geometry = hover_geometry(system)
        as_array = np.ascontiguousarray  # the kernel's arguments: contiguous float64
        self.directions = as_array(geometry.directions, dtype=float)  # load frame
        self.tensions = as_array(geometry.tensions, dtype=float)
        self.rho = as_array(system.attachment_array(), dtype=float)
        self.lengths = np.array([c.length for c in system.cables], dtype=float)
        self.attach = np.array([q.attachment for q in system.quadrotors], dtype=float)
        self.masses = np.array([q.mass for q in system.quadrotors], dtype=float)
        self.gravity = np.array([0.0, 0.0, -system.gravity])
        self._rest: np.ndarray | None = None
        load_kernels()

    @classmethod
    def from_config(cls, config, **options):
        """For ``config``'s system; the wrench formation also told the drag of ``config.aero``
        (nominal coefficients, still air: what the teacher knows): its cables supply the load's
        drag, and its slots' body rates turn the thrust that also balances each quadrotor's
        frame and rotor drag (linearized at the hover rotor speed)."""
        if options.get("wrench"):
            options = {"aero": config.aero, **options}
        return cls(config.system, **options)

    def reset(self) -> None:
        self._rest = None
        if self.follower is not None:
            self.follower.reset()

    def _rest_from(self, state: WorldState, reference) -> None:
        """A reference from the ground (``cableload_sim.trajectories.lift``): the quadrotors' resting
        places are where they are at its first plan."""
        if getattr(reference, "climb", None) is not None and getattr(self, "_rest", None) is None:
            self._rest = np.array(state.uav_p, dtype=float)

    def report(self) -> dict:
        return {}

    def _formation(self, reference, times: np.ndarray, ref=None) -> tuple[np.ndarray, np.ndarray]:
        """Quadrotor positions (k, n, 3) and cable pulls on them, t_i u_i (k, n, 3); ``ref``:
        the reference already sampled at ``times``."""
        ref = reference.sample(times) if ref is None else ref
        k, n = len(times), self.system.n_uavs
        p, pull = np.empty((k, n, 3)), np.empty((k, n, 3))
        c = np.ascontiguousarray
        _formation_points(
            c(ref.p, dtype=float),
            c(ref.v, dtype=float),
            c(ref.a, dtype=float),
            c(ref.q, dtype=float),
            c(ref.omega, dtype=float),
            c(ref.alpha, dtype=float),
            self.directions,
            self.tensions,
            self.rho,
            self.lengths,
            self.attach,
            self.masses,
            float(self.system.gravity),
            bool(self.tilt),
            bool(self.wrench),
            self.load_mass,
            self.load_inertia,
            self.load_drag,
            p,
            pull,
        )
        return self._from_ground(reference, times, p, pull)

    def cable_pulls(self, reference, times: np.ndarray, ref=None) -> np.ndarray:
        """The formation's cable forces on the quadrotors, ``t_i u_i`` (k, n, 3), at
        ``times`` (``ref``: the reference already sampled there, or a sample of its own: the
        teacher's prior passes one run at its pace)."""
        return self._formation(reference, times, ref)[1]

    def _formation_numpy(self, reference, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_formation`` in NumPy expressions (the kernel's definition; tests compare them)."""
        ref = reference.sample(times)
        R_L = quat_to_matrix(ref.q)  # (k, 3, 3)
        acceleration = ref.a - self.gravity
        drag = self._drag_numpy(R_L, ref.v)
        need = acceleration - drag / self.load_mass  # per unit load mass, the cables' force
        scale = np.linalg.norm(need, axis=-1) / self.system.gravity
        if self.tilt:
            tilt = _rotation_between(
                np.tile([0.0, 0.0, 1.0], (len(times), 1)), need / np.linalg.norm(need, axis=-1, keepdims=True)
            )
        else:
            tilt = np.broadcast_to(np.eye(3), R_L.shape)
        u = (tilt @ R_L) @ self.directions.T  # (k, 3, n)
        u = u.transpose(0, 2, 1)
        arms = (R_L @ self.rho.T).transpose(0, 2, 1)
        pull = (self.tensions[None, :] * scale[:, None])[..., None] * u
        if self.wrench:
            pull = self._wrench_numpy(pull, arms, R_L, ref, drag)
            u = pull / np.linalg.norm(pull, axis=-1, keepdims=True)
        load_end = ref.p[:, None, :] + arms
        quad_end = load_end + self.lengths[None, :, None] * u
        # the quadrotor's attitude, with its thrust axis about m_i (a_L - g) + pull
        thrust = self.masses[None, :, None] * acceleration[:, None, :] + pull
        R_i = _attitude_zero_heading(thrust / np.linalg.norm(thrust, axis=-1, keepdims=True))
        p = quad_end - (R_i @ self.attach[None, :, :, None])[..., 0]
        return self._from_ground(reference, times, p, pull)

    def _drag_numpy(self, R_L, velocity):
        """The load's drag (k, 3), world, at the reference's velocity in still air: per pair of
        faces ``-c_k |u_k| u_k``, u the velocity in the load frame (``kernels.aero``)."""
        airspeed = np.einsum("kji,kj->ki", R_L, velocity)
        return np.einsum("kij,kj->ki", R_L, -self.load_drag * np.abs(airspeed) * airspeed)

    def _wrench_numpy(self, pull, arms, R_L, ref, drag):
        """``_wrench_forces`` in NumPy expressions: the least change of the cable forces
        ``pull`` (k, n, 3) that supplies the reference's force (less the drag ``drag``) and
        torque (``statics.wrench_correction``), cut short where a cable would pull too little."""
        force, torque = load_wrench(self.system, R_L, ref)
        change = -wrench_correction(pull, arms, force - drag, torque)
        toward = np.sum(pull * change, -1)  # (k, n)
        limits = (1.0 - WRENCH_MIN_TENSION_SHARE) * np.sum(pull**2, -1)
        ratio = np.where(toward > 0.0, limits / np.where(toward > 0.0, toward, 1.0), np.inf)
        share = np.minimum(1.0, ratio.min(axis=1))
        return pull - share[:, None, None] * change

    def _from_ground(self, reference, times, p, pull):
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
        times, out, sample = self.slot_arrays_and_sample(state.t, reference)
        out[0] += self.follow_offset(state.t, state.load_p, sample.p[0], reference)
        plans = [UavTrajectory(*slot_of(times, out, i)) for i in range(self.system.n_uavs)]
        if self.converge_s is None:
            return plans
        return [self.anchored(plan, state.uav_p[i]) for i, plan in enumerate(plans)]

    def follow_offset(
        self,
        t: float,
        load_p: np.ndarray,
        reference_p: np.ndarray,
        reference,
        follower: LoadFollower | None = None,
    ) -> np.ndarray:
        """How far the follow formation moves at ``t`` (``LoadFollower.offset``; zeros for the
        open-loop formations and from the ground, where the load rests before the reference
        lifts it). ``follower``: whose state to use (default this planner's)."""
        follower = self.follower if follower is None else follower
        if follower is None or getattr(reference, "climb", None) is not None:
            return np.zeros(3)
        return follower.offset(t, load_p, reference_p)

    def anchored(
        self, plan: UavTrajectory, position: np.ndarray, velocity: np.ndarray | None = None
    ) -> UavTrajectory:
        """The slot plan made to start at ``position`` and join the slot exponentially:
        ``p(t) = slot(t) + (position - slot(t0)) exp(-(t - t0) / converge_s)``, derivatives
        exact (body rates left as the slot's). With ``velocity`` it starts there too and joins
        critically damped: ``p(t) = slot(t) + (e + (e_v + e / tau) (t - t0)) exp(-(t - t0) /
        tau)``, with e and e_v the position and velocity less the slot's at t0."""
        tau = self.converge_s
        if tau is None:
            raise ValueError("anchored: this planner was made without converge_s")
        gap = np.asarray(position, dtype=float) - plan.p[0]
        elapsed = (plan.t - plan.t[0])[:, None]
        g = np.exp(-elapsed / tau)
        if velocity is None:
            e0 = gap * g
            e1, e2, e3 = -e0 / tau, e0 / tau**2, -e0 / tau**3
        else:
            gap_v = np.asarray(velocity, dtype=float) - plan.v[0]
            b = gap_v + gap / tau
            e0 = (gap + b * elapsed) * g
            e1 = (gap_v - b * elapsed / tau) * g
            e2 = (-(b + gap_v) / tau + b * elapsed / tau**2) * g
            e3 = ((2.0 * b + gap_v) / tau**2 - b * elapsed / tau**3) * g
        return UavTrajectory(plan.t, plan.p + e0, plan.v + e1, plan.a + e2, plan.j + e3, plan.body_rates)

    def slot_plans(self, t: float, reference) -> list[UavTrajectory]:
        """Every quadrotor's slot in the formation over the horizon from ``t`` (reference
        only: no state)."""
        return self.slots_and_sample(t, reference)[0]

    def slots_and_sample(self, t: float, reference) -> tuple[list[UavTrajectory], LoadReferenceSample]:
        """``slot_plans`` and the reference at the horizon's nodes (sampled once for both:
        the derivatives' stencil holds the nodes)."""
        times, out, nodes = self.slot_arrays_and_sample(t, reference)
        return [UavTrajectory(*slot_of(times, out, i)) for i in range(self.system.n_uavs)], nodes

    def slot_arrays_and_sample(
        self, t: float, reference
    ) -> tuple[np.ndarray, np.ndarray, LoadReferenceSample]:
        """``slots_and_sample`` as arrays: the node times, every slot's p, v, a, j and body
        rates (5, nodes, n, 3; ``slot_of`` takes one quadrotor's), the reference at the nodes
        (a decision of one quadrotor builds no plan object for the others)."""
        times = node_times(t)
        stencil = (times[:, None] + _FD_STEP * _STENCIL[None, :]).ravel()
        ref = reference.sample(stencil)
        p, pull = self._formation(reference, stencil, ref)
        out = np.empty((5, times.size, self.system.n_uavs, 3))
        _slot_derivatives(
            p, pull, self.masses, float(self.system.gravity), _FD_STEP, self.rotor_drag, self.frame_drag, out
        )
        nodes = LoadReferenceSample(
            *(np.ascontiguousarray(getattr(ref, name)[2::5]) for name in _SAMPLE_FIELDS)
        )
        return times, out, nodes


_SAMPLE_FIELDS = tuple(f.name for f in dataclasses.fields(LoadReferenceSample))


class SlotArrays(NamedTuple):
    """One quadrotor's slot plan as ``UavTrajectory``'s arrays, unchecked (made by this
    module's kernels)."""

    t: np.ndarray
    p: np.ndarray
    v: np.ndarray
    a: np.ndarray
    j: np.ndarray
    body_rates: np.ndarray


def slot_of(times: np.ndarray, out: np.ndarray, i: int) -> SlotArrays:
    """Quadrotor ``i``'s slot from ``slot_arrays_and_sample``'s arrays."""
    return SlotArrays(times, *(np.ascontiguousarray(out[m, :, i]) for m in range(5)))


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


def _slot_derivatives_numpy(
    p: np.ndarray,
    pull: np.ndarray,
    masses: np.ndarray,
    gravity: np.ndarray,
    h: float,
    rotor_drag: np.ndarray | None = None,
    frame_drag: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """``_slot_derivatives`` in NumPy expressions (its definition; tests compare them)."""
    k = p.shape[0] // 5
    p = p.reshape(k, 5, -1, 3)
    pull = pull.reshape(k, 5, -1, 3)
    pm2, pm1, p0, pp1, pp2 = (p[:, s] for s in range(5))
    v = (-pp2 + 8 * pp1 - 8 * pm1 + pm2) / (12 * h)
    a = (-pp2 + 16 * pp1 - 30 * p0 + 16 * pm1 - pm2) / (12 * h * h)
    j = (pp2 - 2 * pp1 + 2 * pm1 - pm2) / (2 * h**3)
    acc = np.stack([(p0 - 2 * pm1 + pm2) / h**2, a, (pp2 - 2 * pp1 + p0) / h**2], axis=1)
    thrust = masses[None, None, :, None] * (acc - gravity) + pull[:, 1:4]
    if rotor_drag is not None:  # the drag at the velocity of each of the three points
        velocity = np.stack([(p0 - pm2) / (2 * h), v, (pp2 - p0) / (2 * h)], axis=1)
        axes = _attitude_zero_heading(thrust / np.linalg.norm(thrust, axis=-1, keepdims=True))
        airspeed = np.einsum("...ji,...j->...i", axes, velocity)  # body frame
        frame = np.zeros(3) if frame_drag is None else frame_drag
        body = -frame * np.abs(airspeed) * airspeed
        body[..., :2] -= rotor_drag[None, None, :, None] * airspeed[..., :2]
        thrust = thrust - np.einsum("...ij,...j->...i", axes, body)
    z = thrust / np.linalg.norm(thrust, axis=-1, keepdims=True)
    z_dot = (z[:, 2] - z[:, 0]) / (2 * h)
    return p0, v, a, j, _body_rates_zero_yaw(z[:, 1], z_dot)
