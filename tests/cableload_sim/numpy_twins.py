"""Plain-NumPy twins of the numba kernels in ``cableload_sim.physics.kernels``, used only by tests.

Written from the kernels' module docstring (the specification) and ``cableload_sim.physics.layout``,
not by transliterating the loops: the state is unpacked into per-body arrays, bodies are
handled together with array operations, rotations come from ``cableload_sim.rotations``.

Every function here is pure: its inputs are never modified and new arrays are returned.

The drift of axially symmetric bodies is the exact two-turn flow described in
``kernels.integrator.drift``; other bodies use the five-turn splitting. Without a force cache, ``advance``
evaluates the first step's forces at the given state with its stored velocities, as
``kernels.advance`` does.

Conventions (the project's): ``R`` maps body-frame vectors to the world, ``q = (w, x, y, z)``,
angular velocities and angular momenta are body frame, forces world frame, torques body frame.
Body 0 is the load, body ``i + 1`` is quadrotor ``i``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from cableload_sim.physics import layout as L
from cableload_sim.rotations import (
    matrix_to_quat,
    quat_conjugate,
    quat_exp,
    quat_multiply,
    quat_to_matrix,
)

# ---------------------------------------------------------------------------------------------
# Unpacking the flat arrays


def _vec(a: np.ndarray, start: int, width: int = 3) -> np.ndarray:
    return np.array(a[start : start + width], dtype=float)


@dataclass(frozen=True)
class QuadModel:
    """One quadrotor's block of a model vector."""

    mass: float
    inertia: np.ndarray  # (3,) principal moments
    attach: np.ndarray  # (3,) cable attachment, body frame
    kf: float
    speed_min: float
    speed_max: float
    motor_tau: float
    alloc: np.ndarray  # (4, 4) rotor thrusts -> [thrust, torque]
    alloc_inv: np.ndarray  # (4, 4)
    frame_drag: np.ndarray  # (3,) 1/2 rho C_d A per body axis (kg/m)
    rotor_drag: float  # k_d (kg/rad)
    rotor_xy: np.ndarray  # (4, 2) hub positions, body frame


def quad_model(model: np.ndarray, i: int) -> QuadModel:
    b = L.quad_model_offset(i)
    return QuadModel(
        mass=float(model[b + L.QM_MASS]),
        inertia=_vec(model, b + L.QM_INERTIA),
        attach=_vec(model, b + L.QM_ATTACH),
        kf=float(model[b + L.QM_KF]),
        speed_min=float(model[b + L.QM_SPEED_MIN]),
        speed_max=float(model[b + L.QM_SPEED_MAX]),
        motor_tau=float(model[b + L.QM_MOTOR_TAU]),
        alloc=_vec(model, b + L.QM_ALLOC, 16).reshape(4, 4),
        alloc_inv=_vec(model, b + L.QM_ALLOC_INV, 16).reshape(4, 4),
        frame_drag=_vec(model, b + L.QM_FRAME_DRAG),
        rotor_drag=float(model[b + L.QM_ROTOR_DRAG]),
        rotor_xy=_vec(model, b + L.QM_ROTOR_XY, 8).reshape(4, 2),
    )


@dataclass(frozen=True)
class Model:
    """A whole model vector as arrays over bodies / quadrotors / cables."""

    gravity: float
    mass: np.ndarray  # (n+1,) load first
    load_inertia: np.ndarray  # (3, 3)
    load_inertia_inv: np.ndarray  # (3, 3)
    quad_inertia: np.ndarray  # (n, 3)
    quad_attach: np.ndarray  # (n, 3)
    kf: np.ndarray  # (n,)
    speed_max: np.ndarray  # (n,)
    motor_tau: np.ndarray  # (n,)
    alloc: np.ndarray  # (n, 4, 4)
    rest_length: np.ndarray  # (n,)
    stiffness: np.ndarray  # (n,)
    damping: np.ndarray  # (n,)
    load_attach: np.ndarray  # (n, 3) load frame
    aero: bool  # whether drag acts
    load_drag: np.ndarray  # (3,) 1/2 rho C_d A per load axis (kg/m)
    frame_drag: np.ndarray  # (n, 3)
    rotor_drag: np.ndarray  # (n,)
    rotor_xy: np.ndarray  # (n, 4, 2)
    box_centre: np.ndarray  # (3,) the load's box centre from its centre of mass, load frame
    half_size: np.ndarray  # (3,) half the box's size


def unpack_model(model: np.ndarray, n: int) -> Model:
    quads = [quad_model(model, i) for i in range(n)]
    cables = np.stack([_vec(model, L.cable_model_offset(n, i), L.CM_SIZE) for i in range(n)])
    return Model(
        gravity=float(model[L.M_GRAVITY]),
        mass=np.array([model[L.M_LOAD_MASS]] + [q.mass for q in quads]),
        load_inertia=_vec(model, L.M_LOAD_INERTIA, 9).reshape(3, 3),
        load_inertia_inv=_vec(model, L.M_LOAD_INERTIA_INV, 9).reshape(3, 3),
        quad_inertia=np.stack([q.inertia for q in quads]),
        quad_attach=np.stack([q.attach for q in quads]),
        kf=np.array([q.kf for q in quads]),
        speed_max=np.array([q.speed_max for q in quads]),
        motor_tau=np.array([q.motor_tau for q in quads]),
        alloc=np.stack([q.alloc for q in quads]),
        rest_length=cables[:, L.CM_REST_LENGTH],
        stiffness=cables[:, L.CM_STIFFNESS],
        damping=cables[:, L.CM_DAMPING],
        load_attach=cables[:, L.CM_LOAD_ATTACH : L.CM_LOAD_ATTACH + 3],
        aero=bool(model[L.M_AERO] != 0.0),
        load_drag=_vec(model, L.M_LOAD_DRAG),
        frame_drag=np.stack([q.frame_drag for q in quads]),
        rotor_drag=np.array([q.rotor_drag for q in quads]),
        rotor_xy=np.stack([q.rotor_xy for q in quads]),
        box_centre=_vec(model, L.M_LOAD_BOX_CENTRE),
        half_size=_vec(model, L.M_LOAD_HALF_SIZE),
    )


def _field_index(n: int, load_field: int | None, quad_field: int, width: int) -> np.ndarray:
    """Indices into x of one field of every body: (n+1, width), or (n, width) for quadrotors
    only (``load_field`` None)."""
    starts = [L.quad_offset(i) + quad_field for i in range(n)]
    if load_field is not None:
        starts = [load_field] + starts
    return np.array(starts)[:, None] + np.arange(width)


@dataclass(frozen=True)
class Bodies:
    """The state x as arrays over bodies (load first) plus the quadrotors' rotor speeds."""

    pos: np.ndarray  # (n+1, 3) world
    quat: np.ndarray  # (n+1, 4)
    vel: np.ndarray  # (n+1, 3) world
    rate: np.ndarray  # (n+1, 3) body
    rotor: np.ndarray  # (n, 4)

    @property
    def n(self) -> int:
        return self.rotor.shape[0]


_FIELDS = (
    ("pos", L.LOAD_POS, L.QUAD_POS, 3),
    ("quat", L.LOAD_QUAT, L.QUAD_QUAT, 4),
    ("vel", L.LOAD_VEL, L.QUAD_VEL, 3),
    ("rate", L.LOAD_RATE, L.QUAD_RATE, 3),
    ("rotor", None, L.QUAD_ROTOR, 4),
)


def unpack_state(x: np.ndarray, n: int) -> Bodies:
    x = np.asarray(x, dtype=float)
    return Bodies(**{name: x[_field_index(n, lf, qf, w)] for name, lf, qf, w in _FIELDS})


def pack_state(bodies: Bodies) -> np.ndarray:
    n = bodies.n
    x = np.zeros(L.state_size(n))
    for name, lf, qf, w in _FIELDS:
        x[_field_index(n, lf, qf, w)] = getattr(bodies, name)
    return x


def _rotate(R: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R v for stacks of matrices and vectors."""
    return np.einsum("...ij,...j->...i", R, v)


def _rotate_back(R: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R^T v for stacks of matrices and vectors."""
    return np.einsum("...ji,...j->...i", R, v)


# ---------------------------------------------------------------------------------------------
# Forces


def rotor_thrusts(rotor: np.ndarray, kf) -> np.ndarray:
    """Thrust of every rotor, k_f w^2 (N)."""
    return np.asarray(kf)[..., None] * rotor**2


class Cables(NamedTuple):
    load_end: np.ndarray  # (n, 3) world position of each cable's end on the load
    quad_end: np.ndarray  # (n, 3) ... and on the quadrotor
    direction: np.ndarray  # (n, 3) unit vector from the load's end to the quadrotor's
    length: np.ndarray  # (n,)
    stretch: np.ndarray  # (n,) length - rest length (> 0: stretched)
    length_rate: np.ndarray  # (n,) d length / dt


def cable_state(b: Bodies, M: Model, R: np.ndarray | None = None) -> Cables:
    """Geometry and length rate of every cable; R (n+1, 3, 3) the bodies' rotations."""
    R = quat_to_matrix(b.quat) if R is None else R
    R_load, R_quad = R[0], R[1:]
    rho = M.load_attach  # (n, 3) load frame
    s = M.quad_attach  # (n, 3) body frames
    load_end = b.pos[0] + rho @ R_load.T
    load_end_vel = b.vel[0] + np.cross(b.rate[0], rho) @ R_load.T
    quad_end = b.pos[1:] + _rotate(R_quad, s)
    quad_end_vel = b.vel[1:] + _rotate(R_quad, np.cross(b.rate[1:], s))
    d = quad_end - load_end
    length = np.linalg.norm(d, axis=1)
    u = d / length[:, None]
    length_rate = np.sum(u * (quad_end_vel - load_end_vel), axis=1)
    return Cables(load_end, quad_end, u, length, length - M.rest_length, length_rate)


class Forces(NamedTuple):
    force: np.ndarray  # (n+1, 3) world
    torque: np.ndarray  # (n+1, 3) body
    tension: np.ndarray  # (n,)


def aero_forces(b: Bodies, M: Model, wind, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drag of the air moving at ``wind`` (world, m/s): (force (n+1, 3) world, torque
    (n+1, 3) body). Per axis of each body's frame, ``-c_k |u_k| u_k`` of the airspeed u in that
    frame; on each rotor, ``-k_d w (u + omega x r_hub)`` in the rotor plane, at the hub. The
    load's is that of its box centre c, and acts there."""
    u = _rotate_back(R, b.vel - np.asarray(wind, dtype=float))  # (n+1, 3) body frames
    u[0] += np.cross(b.rate[0], M.box_centre)
    coeff = np.vstack([M.load_drag, M.frame_drag])
    drag = -coeff * np.abs(u) * u
    hubs = np.concatenate([M.rotor_xy, np.zeros((b.n, 4, 1))], axis=2)  # (n, 4, 3)
    hub_air = u[1:, None, :] + np.cross(b.rate[1:, None, :], hubs)
    rotor = -(M.rotor_drag[:, None] * b.rotor)[..., None] * hub_air * [1.0, 1.0, 0.0]
    drag[1:] += rotor.sum(axis=1)
    torque = np.zeros_like(drag)
    torque[1:] = np.cross(hubs, rotor).sum(axis=1)
    torque[0] = np.cross(M.box_centre, drag[0])
    return _rotate(R, drag), torque


def _forces(b: Bodies, M: Model, wrench: np.ndarray, wind=(0.0, 0.0, 0.0)) -> Forces:
    wrench = np.asarray(wrench, dtype=float)
    R = quat_to_matrix(b.quat)  # (n+1, 3, 3)
    R_load, R_quad = R[0], R[1:]
    force = np.zeros_like(b.pos)
    torque = np.zeros_like(b.pos)

    # gravity on every body; the external wrench on the load
    force[:, 2] -= M.mass * M.gravity
    force[0] += wrench[:3]
    torque[0] += R_load.T @ wrench[3:]

    # rotors: thrust along body z, torques through the allocation matrix
    f = rotor_thrusts(b.rotor, M.kf)  # (n, 4)
    force[1:] += R_quad[:, :, 2] * f.sum(axis=1)[:, None]
    torque[1:] += np.einsum("nrk,nk->nr", M.alloc[:, 1:, :], f)

    # cables: unilateral spring-dampers between the two attachment points
    c = cable_state(b, M, R)
    tension = np.where(
        c.stretch > 0.0, np.maximum(M.stiffness * c.stretch + M.damping * c.length_rate, 0.0), 0.0
    )
    rho, s, u = M.load_attach, M.quad_attach, c.direction
    pull = tension[:, None] * u  # on the load, toward each quadrotor (world)
    force[0] += pull.sum(axis=0)
    force[1:] -= pull
    torque[0] += np.cross(rho, pull @ R_load).sum(axis=0)  # rho x (R_L^T f)
    torque[1:] += np.cross(s, _rotate_back(R_quad, -pull))

    if M.aero:
        drag, drag_torque = aero_forces(b, M, wind, R)
        force += drag
        torque += drag_torque
    return Forces(force, torque, tension)


def compute_forces(x, model, n, wrench, wind=(0.0, 0.0, 0.0)):
    """Twin of ``kernels.forces_in_wind``: (force (n+1,3) world, torque (n+1,3) body,
    tension (n,)) at state x, with the external world ``wrench`` (6,) on the load, in the
    ``wind`` (world, m/s)."""
    return tuple(_forces(unpack_state(x, n), unpack_model(model, n), wrench, wind))


def wind_at(wind: np.ndarray, wind_dt: float, t: float) -> np.ndarray:
    """Twin of ``kernels.wind_at``: samples every wind_dt from 0, linear between them, the last
    held."""
    times = wind_dt * np.arange(len(wind))
    return np.array([np.interp(t, times, wind[:, k]) for k in range(3)])


# ---------------------------------------------------------------------------------------------
# Velocity Verlet on linear momenta and body-frame angular momenta


def principal_inertia(M: Model) -> np.ndarray:
    """Principal moments of every body (n+1, 3); the load's tensor must be in principal axes."""
    return np.vstack([np.diag(M.load_inertia), M.quad_inertia])


def angular_momenta(b: Bodies, M: Model) -> np.ndarray:
    """Body-frame angular momenta J w (n+1, 3)."""
    return principal_inertia(M) * b.rate


def _rates(mom: np.ndarray, M: Model) -> np.ndarray:
    """Body rates J^-1 m (n+1, 3)."""
    return mom / principal_inertia(M)


def _kick(b: Bodies, mom: np.ndarray, fr: Forces, M: Model, dt: float):
    """Advance linear and body angular momenta by dt under fixed forces; rates from momenta."""
    mom = mom + dt * fr.torque
    vel = b.vel + dt * fr.force / M.mass[:, None]
    return replace(b, vel=vel, rate=_rates(mom, M)), mom


def _turn_about_axis(q: np.ndarray, mom: np.ndarray, axis: int, theta: np.ndarray):
    """Bodies turned by theta (n,) about their principal ``axis``: q <- q (x) exp(theta e / 2);
    the body-frame momentum counter-rotates, m <- R_e(theta)^T m (a plane rotation of the two
    other components). Stacked over the leading axis."""
    e = np.eye(3)[axis]
    q = quat_multiply(q, quat_exp(theta[:, None] * e))
    i, j = (axis + 1) % 3, (axis + 2) % 3
    c, s = np.cos(theta), np.sin(theta)
    mom = mom.copy()
    mom[:, i], mom[:, j] = c * mom[:, i] + s * mom[:, j], c * mom[:, j] - s * mom[:, i]
    return q, mom


# Splitting of the remainder m_y^2 (1/J_y - 1/J_x)/2 + m_z^2 (1/J_z - 1/J_x)/2 of the kinetic
# energy of a body without axial symmetry: (axis, fraction of the step), in order.
DRIFT_SPLITTING = ((1, 0.5), (2, 1.0), (1, 0.5))


def _drift(b: Bodies, mom: np.ndarray, M: Model, h: float):
    """Free flight for h: positions move with their velocities; attitudes follow the free
    rigid-body flow of T = sum m_k^2 / (2 J_k) (body momenta counter-rotating with each turn).
    T splits into |m|^2 / (2 J_x), a turn by h m / J_x about the momentum itself (m unchanged),
    which commutes with the rest, and the remainder:

    - axially symmetric bodies (J_x = J_y, the quadrotors), exactly: a turn about body z by
      h m_z (1/J_z - 1/J_x);
    - other bodies (the load): turns by fraction * h * m_k (1/J_k - 1/J_x) about body y, z, y in
      the order of ``DRIFT_SPLITTING``.

    Rates are not updated here.
    """
    J = principal_inertia(M)
    q, mom = b.quat.copy(), mom.copy()
    q = quat_multiply(q, quat_exp(h * mom / J[:, :1]))
    sym = J[:, 0] == J[:, 1]
    if sym.any():
        spin = h * mom[sym, 2] * (1.0 / J[sym, 2] - 1.0 / J[sym, 0])
        q[sym], mom[sym] = _turn_about_axis(q[sym], mom[sym], 2, spin)
    other = ~sym
    if other.any():
        q_o, m_o, J_o = q[other], mom[other], J[other]
        for axis, fraction in DRIFT_SPLITTING:
            theta = fraction * h * m_o[:, axis] * (1.0 / J_o[:, axis] - 1.0 / J_o[:, 0])
            q_o, m_o = _turn_about_axis(q_o, m_o, axis, theta)
        q[other], mom[other] = q_o, m_o
    q = q / np.linalg.norm(q, axis=1, keepdims=True)  # no sign flip: the kernel keeps the sign
    return replace(b, pos=b.pos + h * b.vel, quat=q), mom


def _motors(b: Bodies, rotor_cmd: np.ndarray, M: Model, h: float) -> Bodies:
    """Exact solution of tau dw/dt = cmd - w over h for a constant command."""
    decay = np.exp(-h / M.motor_tau)[:, None]
    return replace(b, rotor=rotor_cmd + (b.rotor - rotor_cmd) * decay)


class _Integrator:
    """Velocity Verlet with first-same-as-last forces: holds the forces at the current state."""

    def __init__(self, b: Bodies, M: Model, wrench: np.ndarray, wind=(0.0, 0.0, 0.0)):
        self.M = M
        self.bodies = b
        self.forces = _forces(b, M, wrench, wind)  # the state's own velocities for damping
        self.mom = angular_momenta(b, M)

    def step(
        self, rotor_cmd: np.ndarray, h: float, wrench_end: np.ndarray, wind_end=(0.0, 0.0, 0.0)
    ) -> Forces:
        M = self.M
        b, mom = _kick(self.bodies, self.mom, self.forces, M, 0.5 * h)
        b, mom = _drift(b, mom, M, h)
        b = replace(b, rate=_rates(mom, M))
        b = _motors(b, rotor_cmd, M, h)
        # forces at the new positions with half-step velocities, reused at the next step start
        self.forces = _forces(b, M, wrench_end, wind_end)
        self.bodies, self.mom = _kick(b, mom, self.forces, M, 0.5 * h)
        return self.forces


def physics_step(x, rotor_cmd, model, n, h, wrench, wrench_end=None):
    """One full physics step from x: kick, drift, rates, exact motor update toward
    ``rotor_cmd`` (n, 4), forces, kick. The first kick uses forces evaluated at x itself (as at
    the start of ``kernels.advance``) with ``wrench``; the second uses ``wrench_end`` (default:
    the same). Returns (new x, cable tensions at the end)."""
    M = unpack_model(model, n)
    wrench_end = wrench if wrench_end is None else wrench_end
    integ = _Integrator(unpack_state(x, n), M, wrench)
    fr = integ.step(np.asarray(rotor_cmd, dtype=float), h, wrench_end)
    return pack_state(integ.bodies), fr.tension


# ---------------------------------------------------------------------------------------------
# Plans


class Reference(NamedTuple):
    p: np.ndarray
    v: np.ndarray
    a: np.ndarray
    jerk: np.ndarray
    rate: np.ndarray

    def as_vector(self) -> np.ndarray:
        """In the kernel's scratch order: p, v, a, jerk, body rates (15,)."""
        return np.concatenate(self)


_REF_FIELDS = (L.TR_POS, L.TR_VEL, L.TR_ACC, L.TR_JERK, L.TR_RATE)


def plan_is_valid(plan: np.ndarray) -> bool:
    """All values finite and node times strictly increasing."""
    return bool(np.isfinite(plan).all() and np.all(np.diff(plan[:, L.TR_TIME]) > 0.0))


def _hermite(p0, m0, p1, m1, dt, s):
    basis = np.array([2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2])
    return basis @ np.stack([p0, dt * m0, p1, dt * m1])


def sample_plan(plan: np.ndarray, t: float, hint: int = 0):
    """(segment, Reference) of a valid plan at time t; (-1, None) past its last node.

    Cubic Hermite between nodes for p, v, a (slopes v, a, jerk), linear for jerk and body rates;
    before the first node, the first node's values. The segment search starts at ``hint`` when
    that segment has begun, and never goes backward from there.
    """
    times = plan[:, L.TR_TIME]
    if t > times[-1]:
        return -1, None
    if t <= times[0]:
        return 0, Reference(*(plan[0, f : f + 3].copy() for f in _REF_FIELDS))
    start = hint if 0 <= hint < len(times) - 1 and times[hint] <= t else 0
    j = max(start, int(np.searchsorted(times, t, side="left")) - 1)  # t in [t_j, t_j+1]
    node0, node1 = plan[j], plan[j + 1]
    dt = times[j + 1] - times[j]
    s = (t - times[j]) / dt

    def cubic(value, slope):
        return _hermite(
            node0[value : value + 3],
            node0[slope : slope + 3],
            node1[value : value + 3],
            node1[slope : slope + 3],
            dt,
            s,
        )

    def linear(field):
        return (1 - s) * node0[field : field + 3] + s * node1[field : field + 3]

    ref = Reference(
        p=cubic(L.TR_POS, L.TR_VEL),
        v=cubic(L.TR_VEL, L.TR_ACC),
        a=cubic(L.TR_ACC, L.TR_JERK),
        jerk=linear(L.TR_JERK),
        rate=linear(L.TR_RATE),
    )
    return j, ref


# ---------------------------------------------------------------------------------------------
# Controller


def _block(start: int, width: int = 3) -> slice:
    return slice(start, start + width)


def held_heading(R: np.ndarray) -> np.ndarray:
    """The heading c (cos, sin) for which the target construction of ``attitude_rate_command``
    with z = body z gives back R: horizontal and perpendicular to body y, ``c ~ y_B x e_z``;
    +x when body y is vertical."""
    h = np.cross(R[:, 1], [0.0, 0.0, 1.0])[:2]
    norm = np.hypot(*h)
    return np.array([1.0, 0.0]) if norm < 1e-6 else h / norm


def attitude_rate_command(q, z_des, heading, att_gain, yaw_gain):
    """Tilt-prioritized attitude law (Brescianini et al. 2013).

    Desired attitude: body z along ``z_des``, body x in the vertical plane of ``heading``.
    The error q_e = q^-1 (x) q_des (w >= 0) is split as q_e = q_tilt (x) q_yaw with q_yaw about
    body z and q_tilt about a horizontal body axis; the body rate command is
    (K_att q_tilt_x, K_att q_tilt_y, K_yaw q_yaw_z). Returns (rate command, upside_down).
    """
    c_heading = np.array([heading[0], heading[1], 0.0])
    y_des = np.cross(z_des, c_heading)
    y_des /= np.linalg.norm(y_des)
    x_des = np.cross(y_des, z_des)
    q_des = matrix_to_quat(np.column_stack([x_des, y_des, z_des]))
    q_err = quat_multiply(quat_conjugate(q), q_des)
    if q_err[0] < 0.0:
        q_err = -q_err
    c = np.hypot(q_err[0], q_err[3])
    if c <= 1e-9:  # thrust axis opposite to the target's: no unique split, tilt about x
        return np.array([att_gain, 0.0, 0.0]), True
    q_yaw = np.array([q_err[0], 0.0, 0.0, q_err[3]]) / c
    q_tilt = quat_multiply(q_err, quat_conjugate(q_yaw))
    return np.array([att_gain * q_tilt[1], att_gain * q_tilt[2], yaw_gain * q_yaw[3]]), False


def tilt_barrier(R: np.ndarray, rate: np.ndarray, max_tilt: float, brake: float):
    """Body-rate command ``rate`` limited so that the tilt cannot overshoot ``max_tilt``.

    With the tilt angle th of body z, its horizontal direction e and k = e_z x e (world): the
    world rate about k (the tilt rate) is kept within [-brake (max_tilt + th), brake (max_tilt -
    th)] and the one about e (the tilt direction's turn) within +-brake max_tilt; the rest of
    the rate is unchanged. Returns (rate, whether it was changed).
    """
    z = R[:, 2]
    sin_tilt = np.hypot(z[0], z[1])
    if sin_tilt < 1e-9:
        return rate, False
    e = np.array([z[0], z[1], 0.0]) / sin_tilt
    k = np.cross([0.0, 0.0, 1.0], e)
    tilt = np.arctan2(sin_tilt, z[2])
    world = R @ rate
    about_k, about_e = world @ k, world @ e
    dk = np.clip(about_k, -brake * (max_tilt + tilt), brake * (max_tilt - tilt)) - about_k
    de = np.clip(about_e, -brake * max_tilt, brake * max_tilt) - about_e
    if dk == 0.0 and de == 0.0:
        return rate, False
    return rate + R.T @ (dk * k + de * e), True


def allocate(thrust: float, torque: np.ndarray, quad: QuadModel):
    """Rotor speed commands for a collective thrust and body torque.

    The thrust is first limited to what four rotors can give; if a rotor would leave its range
    the yaw torque is dropped; if one still would, the collective thrust is shifted (all rotors
    equally, which leaves the torques alone) just enough to bring it back, when that keeps the
    others within range; finally every rotor thrust is clipped. Returns (speeds (4,), info).
    """
    f_min = quad.kf * quad.speed_min**2
    f_max = quad.kf * quad.speed_max**2
    thrust_limited = float(np.clip(thrust, 4.0 * f_min, 4.0 * f_max))
    f = quad.alloc_inv @ np.array([thrust_limited, *torque])
    yaw_dropped = bool(np.any((f < f_min) | (f > f_max)))
    shift = 0.0
    if yaw_dropped:
        f = quad.alloc_inv @ np.array([thrust_limited, torque[0], torque[1], 0.0])
        if f.min() < f_min and f.max() + (f_min - f.min()) <= f_max:
            shift = f_min - f.min()
        elif f.max() > f_max and f.min() - (f.max() - f_max) >= f_min:
            shift = f_max - f.max()
        f = f + shift
    clipped = bool(np.any((f < f_min) | (f > f_max)))
    f = np.clip(f, f_min, f_max)
    info = dict(
        thrust_limited=thrust_limited != thrust,
        yaw_dropped=yaw_dropped,
        thrust_shifted=shift != 0.0,
        rotor_clipped=clipped,
    )
    return np.sqrt(f / quad.kf), info


class ControllerResult(NamedTuple):
    cs: np.ndarray  # the quadrotor's new controller state row
    plan_status: np.ndarray  # (n,) new copy
    counters: np.ndarray  # (n, K_SIZE) new copy
    info: dict  # which branches were taken (for coverage checks in tests)


def controller_update(x, i, cs, plan, plan_status, counters, cmodel, gains, t) -> ControllerResult:
    """Twin of ``kernels.controller_update`` for quadrotor i at time t (R from x itself)."""
    cs = np.array(cs, dtype=float)
    plan_status = np.array(plan_status)
    counters = np.array(counters, dtype=float)
    quad = quad_model(cmodel, i)  # the controller knows only the nominal model
    g = float(cmodel[L.M_GRAVITY])
    o = L.quad_offset(i)
    p, v, w = (_vec(x, o + f) for f in (L.QUAD_POS, L.QUAD_VEL, L.QUAD_RATE))
    q = _vec(x, o + L.QUAD_QUAT, 4)
    R = quat_to_matrix(q)
    dt = gains[L.G_DT]
    info = {}

    # measured rotor thrust vector (world) and rotor torque (body), from the rotor speeds
    f_rotor = rotor_thrusts(_vec(x, o + L.QUAD_ROTOR, 4), quad.kf)
    thrust_vec = R[:, 2] * f_rotor.sum()
    rotor_torque = quad.alloc[1:] @ f_rotor

    # INDI filters: first-order low-pass on the finite-difference accelerations and, equally,
    # on the rotor thrust and torque averaged over the same interval
    acc, alpha_f = _block(L.CS_ACC_FILT), _block(L.CS_ALPHA_FILT)
    force_f, torque_f = _block(L.CS_FORCE_FILT), _block(L.CS_TORQUE_FILT)
    prev_v, prev_w = _block(L.CS_PREV_VEL), _block(L.CS_PREV_RATE)
    prev_f, prev_t = _block(L.CS_PREV_FORCE), _block(L.CS_PREV_TORQUE)
    heading = _block(L.CS_HEADING, 2)
    hold = _block(L.CS_HOLD_POS)
    pull_slow = _block(L.CS_PULL_SLOW)
    fresh = cs[L.CS_INITIALIZED] == 0.0
    if fresh:
        cs[acc] = 0.0
        cs[alpha_f] = 0.0
        cs[force_f] = thrust_vec
        cs[torque_f] = rotor_torque
        cs[hold] = p
        cs[heading] = held_heading(R)
        cs[L.CS_MODE] = L.MODE_HOLD_NO_PLAN
        cs[L.CS_INITIALIZED] = 1.0
    else:
        a = gains[L.G_FILTER_ALPHA]
        measured = (
            (acc, (v - cs[prev_v]) / dt),
            (alpha_f, (w - cs[prev_w]) / dt),
            (force_f, 0.5 * (thrust_vec + cs[prev_f])),
            (torque_f, 0.5 * (rotor_torque + cs[prev_t])),
        )
        for slot, value in measured:
            cs[slot] += a * (value - cs[slot])
    cs[prev_v], cs[prev_w], cs[prev_f], cs[prev_t] = v, w, thrust_vec, rotor_torque

    # reference: the plan, or hover where hold began
    if plan_status[i] == L.PLAN_NEW:
        if plan_is_valid(plan):
            plan_status[i] = L.PLAN_VALID
            cs[L.CS_SEGMENT] = 0.0
        else:
            plan_status[i] = L.PLAN_REJECTED
            counters[i, L.K_REJECTED_PLANS] += 1.0
    mode, ref = L.MODE_HOLD_NO_PLAN, None
    if plan_status[i] == L.PLAN_VALID:
        seg, ref = sample_plan(plan, t, int(cs[L.CS_SEGMENT]))
        if seg >= 0:
            mode = L.MODE_TRACKING
            cs[L.CS_SEGMENT] = seg
        else:
            mode = L.MODE_HOLD_EXPIRED
    elif plan_status[i] == L.PLAN_REJECTED:
        mode = L.MODE_HOLD_REJECTED
    if mode != L.MODE_TRACKING:
        if cs[L.CS_MODE] == L.MODE_TRACKING:  # entering hold: hold here, at this heading
            cs[hold] = p
            cs[heading] = held_heading(R)
        zero = np.zeros(3)
        ref = Reference(cs[hold].copy(), zero, zero, zero, zero)
        counters[i, L.K_HOLD_UPDATES] += 1.0
    restart = fresh or ((cs[L.CS_MODE] == L.MODE_TRACKING) != (mode == L.MODE_TRACKING))
    cs[L.CS_MODE] = mode
    info["mode"] = mode

    # the cable's pull as INDI sees it and its slow part (first-order filter), kept only while
    # some of the fast part is yielded to and restarted from the pull as it is on the first
    # update and on every change between tracking and holding; yielded to: all of its fast
    # part when holding; when tracking, a share (often 0) of its part across the cable (the
    # slow pull's direction), less what a mass mu carried rigidly would add under the plan's
    # acceleration
    tracking = mode == L.MODE_TRACKING
    compliance = gains[L.G_TRACK_COMPLIANCE] if tracking else gains[L.G_HOLD_COMPLIANCE]
    fast_pull = np.zeros(3)
    info["yielding"] = compliance != 0.0
    if compliance != 0.0:
        predict = tracking and not restart and cs[L.CS_PULL_SLOW + 2] < 0.0
        mu = -cs[L.CS_PULL_SLOW + 2] / g if predict else 0.0
        pull = quad.mass * cs[acc] - cs[force_f] + quad.mass * g * np.array([0.0, 0.0, 1.0]) + mu * ref.a
        cs[pull_slow] += (1.0 if restart else gains[L.G_PULL_ALPHA]) * (pull - cs[pull_slow])
        fast_pull = pull - cs[pull_slow]
        axis = cs[pull_slow]
        if tracking and axis @ axis > 0.0:
            fast_pull = fast_pull - (fast_pull @ axis) / (axis @ axis) * axis

    # position loop, INDI force: F = F_filt + m (a_cmd - a_filt) + compliance * fast pull
    e = ref.p - p
    e_norm = np.linalg.norm(e)
    info["error_clipped"] = bool(e_norm > gains[L.G_MAX_POS_ERR])
    if info["error_clipped"]:
        e = e * (gains[L.G_MAX_POS_ERR] / e_norm)
    a_cmd = ref.a + gains[_block(L.G_KP)] * e + gains[_block(L.G_KV)] * (ref.v - v)
    F = cs[force_f] + quad.mass * (a_cmd - cs[acc]) + compliance * fast_pull
    # thrust axis kept upward and within the tilt limit (the vertical part has priority)
    info["lift_raised"] = bool(F[2] < 0.2 * quad.mass * g)
    F[2] = max(F[2], 0.2 * quad.mass * g)
    fh, fh_max = np.hypot(F[0], F[1]), gains[L.G_TAN_MAX_TILT] * F[2]
    info["tilt_limited"] = bool(fh > fh_max)
    if info["tilt_limited"]:
        F[:2] *= fh_max / fh
    z_des = F / np.linalg.norm(F)
    thrust = F @ R[:, 2]  # the part of F the current thrust axis can give

    rate_cmd, info["upside_down"] = attitude_rate_command(
        q, z_des, cs[heading], gains[L.G_ATT_GAIN], gains[L.G_YAW_GAIN]
    )

    # plan rates fed forward, then the tilt barrier
    lag = gains[L.G_RATE_LAG] + quad.motor_tau  # rate loop and filters, motors
    rate_cmd, info["tilt_braked"] = tilt_barrier(R, rate_cmd + ref.rate, gains[L.G_MAX_TILT], 0.25 / lag)

    # INDI body rates: tau = tau_filt + J (K_w (w_cmd - w) - alpha_filt)
    alpha_cmd = gains[_block(L.G_RATE_GAIN)] * (rate_cmd - w)
    torque = cs[torque_f] + quad.inertia * (alpha_cmd - cs[alpha_f])

    cs[_block(L.CS_ROTOR_CMD, 4)], alloc_info = allocate(thrust, torque, quad)
    info.update(alloc_info)
    return ControllerResult(cs, plan_status, counters, info)


# ---------------------------------------------------------------------------------------------
# Statistics and the time loop


def _sampled_statistics(stats: np.ndarray, b: Bodies, M: Model) -> np.ndarray:
    """At controller updates: largest collective thrust ratio, closest pair of quadrotors."""
    stats = stats.copy()
    ratio = np.sum(b.rotor**2, axis=1) / (4.0 * M.speed_max**2)
    stats[L.ST_MAX_THRUST_RATIO] = max(stats[L.ST_MAX_THRUST_RATIO], ratio.max())
    quad_pos = b.pos[1:]
    d2 = np.sum((quad_pos[:, None, :] - quad_pos[None, :, :]) ** 2, axis=-1)
    pairs = np.triu_indices(b.n, k=1)
    stats[L.ST_MIN_UAV_DIST_SQ] = min(stats[L.ST_MIN_UAV_DIST_SQ], d2[pairs].min())
    return stats


def _slack_statistics(stats: np.ndarray, tension: np.ndarray, h: float) -> np.ndarray:
    """Every step: step count, steps with a slack cable, slack streaks and the longest one."""
    stats = stats.copy()
    n = tension.size
    slack = tension == 0.0
    streak = _block(L.ST_STREAK, n)
    stats[streak] = np.where(slack, stats[streak] + h, 0.0)
    stats[L.ST_STEPS] += 1.0
    stats[L.ST_SLACK_ANY] += float(slack.any())
    stats[L.ST_LONGEST_SLACK] = max(stats[L.ST_LONGEST_SLACK], stats[streak].max())
    return stats


class AdvanceResult(NamedTuple):
    x: np.ndarray
    ctrl: np.ndarray
    plan_status: np.ndarray
    counters: np.ndarray
    stats: np.ndarray
    rows: int
    log_x: np.ndarray
    log_tension: np.ndarray
    infos: list  # per controller update: list of each quadrotor's info dict


def advance(
    x,
    ctrl,
    plans,
    plan_status,
    counters,
    model,
    cmodel,
    gains,
    n,
    step0,
    h,
    n_steps,
    decimation,
    wrench,
    stats,
    log_every,
    log_x,
    log_tension,
    fcache=None,
    wind=None,
    wind_dt=1.0,
) -> AdvanceResult:
    """Twin of ``kernels.advance``; returns new arrays instead of writing in place.

    Per step k (global index step0 + k, time (step0 + k) h): the controllers first when the
    index is a multiple of ``decimation`` (with the state and rotations the previous step
    ended with), then kick, drift, rates, motors, forces at the new state (wrench row k, the
    last row repeating), kick, slack statistics, logging. The forces of the first kick are
    those of the previous step's end (FSAL), from ``fcache`` (n+1, 6) when given; otherwise
    those at x with ``wrench[0]``. ``wind`` (rows, 3): samples every ``wind_dt`` (``wind_at``),
    forces at the time they are evaluated at; None: still air.
    """
    wind = np.zeros((1, 3)) if wind is None else np.asarray(wind, dtype=float)
    M = unpack_model(model, n)
    ctrl = np.array(ctrl, dtype=float)
    plan_status = np.array(plan_status)
    counters = np.array(counters, dtype=float)
    stats = np.array(stats, dtype=float)
    log_x = np.array(log_x, dtype=float)
    log_tension = np.array(log_tension, dtype=float)
    wrench = np.asarray(wrench, dtype=float)
    rows = 0
    infos = []
    integ = _Integrator(unpack_state(x, n), M, wrench[0], wind_at(wind, wind_dt, step0 * h))
    if fcache is not None:
        integ.forces = integ.forces._replace(
            force=np.array(fcache[:, :3], dtype=float), torque=np.array(fcache[:, 3:], dtype=float)
        )
    for k in range(n_steps):
        step = step0 + k
        if step % decimation == 0:
            x_now = pack_state(integ.bodies)
            update_infos = []
            for i in range(n):
                res = controller_update(
                    x_now, i, ctrl[i], plans[i], plan_status, counters, cmodel, gains, step * h
                )
                ctrl[i], plan_status, counters = res.cs, res.plan_status, res.counters
                update_infos.append(res.info)
            infos.append(update_infos)
            stats = _sampled_statistics(stats, integ.bodies, M)
        rotor_cmd = ctrl[:, L.CS_ROTOR_CMD : L.CS_ROTOR_CMD + 4]
        fr = integ.step(rotor_cmd, h, wrench[min(k, len(wrench) - 1)], wind_at(wind, wind_dt, (step + 1) * h))
        stats = _slack_statistics(stats, fr.tension, h)
        if log_every > 0 and (step + 1) % log_every == 0 and rows < log_x.shape[0]:
            log_x[rows] = pack_state(integ.bodies)
            log_tension[rows] = fr.tension
            rows += 1
    return AdvanceResult(
        pack_state(integ.bodies), ctrl, plan_status, counters, stats, rows, log_x, log_tension, infos
    )


# ---------------------------------------------------------------------------------------------
# The sloshing ball (``kernels.ball``)


class Ball(NamedTuple):
    mass: float
    radius: float
    stiffness: float
    damping: float
    friction: float
    slip_speed: float


def unpack_ball(model: np.ndarray) -> Ball:
    return Ball(
        *(
            float(model[k])
            for k in (
                L.M_BALL_MASS,
                L.M_BALL_RADIUS,
                L.M_BALL_STIFFNESS,
                L.M_BALL_DAMPING,
                L.M_BALL_FRICTION,
                L.M_BALL_SLIP_SPEED,
            )
        )
    )


def ball_forces(x: np.ndarray, model: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(force on the ball (world), force on the load (world), torque on the load (body)) of
    the ball's weight and its wall contact: per load axis, the wall it penetrates pushes it
    back along the normal, ``max(0, k d + c d')``; on each touched wall, friction
    ``-mu |N| s / max(|s|, slip_speed)`` of the slip s in that wall's plane; the load takes
    minus the contact force at the ball's centre."""
    M = unpack_model(model, n)
    ball = unpack_ball(model)
    o = L.ball_offset(n)
    R = quat_to_matrix(x[L.LOAD_QUAT : L.LOAD_QUAT + 4])
    p = R.T @ (x[o + L.BALL_POS : o + L.BALL_POS + 3] - x[L.LOAD_POS : L.LOAD_POS + 3])
    slip = R.T @ (x[o + L.BALL_VEL : o + L.BALL_VEL + 3] - x[L.LOAD_VEL : L.LOAD_VEL + 3]) - np.cross(
        x[L.LOAD_RATE : L.LOAD_RATE + 3], p
    )
    u = p - M.box_centre
    upper = u + ball.radius - M.half_size  # penetration of the + walls
    lower = -u + ball.radius - M.half_size
    normal = np.where(
        upper > 0,
        -np.maximum(ball.stiffness * upper + ball.damping * slip, 0.0),
        np.where(lower > 0, np.maximum(ball.stiffness * lower - ball.damping * slip, 0.0), 0.0),
    )
    contact = normal.copy()
    if ball.friction > 0.0:
        for k in range(3):
            if normal[k] != 0.0:
                tangent = slip.copy()
                tangent[k] = 0.0
                contact += (
                    -ball.friction * abs(normal[k]) * tangent / max(np.linalg.norm(tangent), ball.slip_speed)
                )
    world = R @ contact
    on_ball = world - np.array([0.0, 0.0, ball.mass * M.gravity])
    return on_ball, -world, np.cross(p, -contact)
