"""The teacher's optimal control problem and its SQP iteration (``TeacherOCP``).

Over the paper's 21-node horizon: track the load reference (position, attitude, velocity,
angular rate) with the load-cable model of ``teacher_model``, the cables pulled weakly toward
the formation prior (``formation_prior``: the formation-tilt cone, which fixes what the load's
motion leaves free with more than three cables), subject to hard path constraints at every node
after the first (``path_constraints``: tension bounds, thrust bounds, the distance between
quadrotors at the node and half-way through the interval before it) and input bounds.

Each SQP iteration linearizes the RK4 dynamics, the residuals and the constraints (C generated
by CasADi, compiled once per system and cached: weights and bounds are arguments) and takes one
primal-dual Newton step of ``riccati_ipm``: a Riccati sweep, the inequalities handled by an
interior-point method in elastic form, an exact L1 penalty of weight ``exact_penalty`` that
dominates their multipliers, so that the solution is that of the hard constraints whenever one
exists. The step is shortened to stay inside a trust region and to keep slacks and multipliers
positive.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import casadi as ca
import numpy as np

from cableload_sim.horizon import N_NODES, node_offsets
from cableload_sim.params import AeroParams, SystemParams, TeacherParams
from cableload_sim.physics.statics import hover_geometry
from cableload_sim.rotations import quat_to_matrix
from planners.codegen import compile_functions
from planners.riccati_ipm import newton_step
from planners.teacher_model import (
    C_DIR,
    C_DTENSION,
    C_RATE,
    C_TENSION,
    X_LOAD,
    X_POS,
    X_QUAT,
    X_RATE,
    X_VEL,
    LoadCableModel,
    cable_offset,
)

LOAD_REF_SIZE = 13  # per node: load p (3), q (4), v (3), omega (3); then per cable a direction
# (3) and a tension (1) of the formation prior (``formation_prior``)
REGULARIZATION = 1e-6  # Levenberg-Marquardt term of the Gauss-Newton Hessian
FORCE_UNIT = 1.0  # N: one unit of a tension or thrust constraint
DISTANCE_UNIT = 0.1  # m: one unit of a separation constraint
TILT_UNIT = 0.1  # one unit of the tilt constraint, in the cosine of the tilt
FRACTION_TO_BOUNDARY = 0.99


def _quat_error(q, q_ref):
    """Vector part of conj(q_ref) (x) q: half the rotation vector for small errors."""
    w1, x1, y1, z1 = q_ref[0], -q_ref[1], -q_ref[2], -q_ref[3]
    w2, x2, y2, z2 = q[0], q[1], q[2], q[3]
    return ca.vertcat(
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    )


def reference_size(n: int) -> int:
    return LOAD_REF_SIZE + 4 * n


RESIDUAL_WEIGHTS = (
    "weight_position",
    "weight_attitude",
    "weight_velocity",
    "weight_rate",
    "weight_direction",
    "weight_cable_rate",
    "weight_tension",
    "weight_tension_rate",
)
"""The weights of ``tracking_residuals``, in the order it takes their square roots."""


def cable_scale(params: TeacherParams, n: int) -> float:
    """What every per-cable weight is multiplied by with ``n`` cables
    (``TeacherParams.cable_weights_for``)."""
    return params.cable_weights_for / n if params.cable_weights_for > 0 else 1.0


def residual_weights(params: TeacherParams, n: int) -> np.ndarray:
    """Square roots of the ``RESIDUAL_WEIGHTS`` for ``n`` cables (the attitude's for
    half-angle errors, the cables' scaled by ``cable_scale``)."""
    w = np.array([getattr(params, name) for name in RESIDUAL_WEIGHTS])
    w[1] *= 4.0  # the quaternion error is half the rotation vector
    w[4:] *= cable_scale(params, n)
    return np.sqrt(w)


def tracking_residuals(model: LoadCableModel, x, ref, sqrt_weight):
    """Weighted residuals of one node's state: load tracking, and the cables' regularization
    toward the formation prior (directions, tensions) and rest (rates); ``sqrt_weight`` as
    ``residual_weights`` gives them (numbers or symbols)."""
    w = sqrt_weight
    e_q = _quat_error(x[X_QUAT : X_QUAT + 4], ref[3:7])
    parts = [
        w[0] * (x[X_POS : X_POS + 3] - ref[0:3]),
        w[1] * e_q,
        w[2] * (x[X_VEL : X_VEL + 3] - ref[7:10]),
        w[3] * (x[X_RATE:X_LOAD] - ref[10:13]),
    ]
    for i in range(model.n):
        o = cable_offset(i)
        prior = LOAD_REF_SIZE + 3 * i
        parts.append(w[4] * (-x[o + C_DIR : o + C_DIR + 3] - ref[prior : prior + 3]))
        parts.append(w[5] * x[o + C_RATE : o + C_RATE + 9])
        tension = LOAD_REF_SIZE + 3 * model.n + i
        parts.append(w[6] * (x[o + C_TENSION] - ref[tension]))
        parts.append(w[7] * x[o + C_DTENSION])
    return ca.vertcat(*parts)


def thrust_limit(system: SystemParams, params: TeacherParams) -> float:
    """Largest collective thrust a plan may ask of a quadrotor (N)."""
    return min(q.rotor.max_thrust() for q in system.quadrotors) * params.thrust_margin


def constraint_functions(model: LoadCableModel, x, midpoint_offset=0.0, kinematics=None):
    """The path constraints at one node without their bounds (``constraint_bounds``), in units
    of ``FORCE_UNIT``, ``DISTANCE_UNIT`` or ``TILT_UNIT``: per quadrotor t_i, -t_i, -|F_i|,
    |F_i| (tension, thrust); per pair (i, j), j < i, the distance between their centres of
    gravity; then per pair the same distance ``midpoint_offset`` (s, negative: before the node)
    away, predicted from the node's positions and their first three derivatives; then per
    quadrotor the vertical component of its thrust axis (the cosine of its tilt).

    The tilt bound keeps the far end of the horizon flyable: without it a plan whose
    quadrotor turns upside down 1.5 s ahead (thrust in bounds, pointing down, at 600 m/s^3 of
    jerk) passed every other constraint, and its body rates failed the plan check plan after
    plan (measured on a zero-sideslip circle at 3.1 m/s: 32 fallbacks, then diverged).

    The second set is what keeps the separation between the nodes: the onboard controller flies
    the plan between them (cubic Hermite), and intervals of up to 0.18 s are long enough for a
    formation turning at a few rad/s to dip 0.1 m below the separation half-way while every
    node keeps it (measured on zero-sideslip hairpins). Each node covers the middle of the
    interval before it, which keeps the constraints stage-wise.

    ``kinematics``: the load's (``LoadCableModel.load_kinematics``); computed from x when
    None."""
    return _constraint_rows(model, x, *_quad_points(model, x, midpoint_offset, kinematics))


def _quad_points(model: LoadCableModel, x, midpoint_offset, kinematics):
    """The quadrotors' centres of gravity at the node and ``midpoint_offset`` away, and their
    thrusts (n x 3 each)."""
    if kinematics is None:
        kinematics = model.load_kinematics(x)
    p, thrust = model.positions_thrusts_of(x, kinematics)
    _, v, a, jerk, *_ = model.quad_outputs(x, kinematics)
    tau = midpoint_offset
    later = p + tau * v + tau**2 / 2.0 * a + tau**3 / 6.0 * jerk
    return p, later, thrust


def _constraint_rows(model: LoadCableModel, x, p, later, thrust):
    """``constraint_functions`` from the points of ``_quad_points``."""
    parts = []
    for i in range(model.n):
        t = x[cable_offset(i) + C_TENSION]
        magnitude = ca.sqrt(ca.sumsqr(thrust[i, :]))
        parts += [t / FORCE_UNIT, -t / FORCE_UNIT, -magnitude / FORCE_UNIT, magnitude / FORCE_UNIT]
    for where in (p, later):
        for i in range(model.n):
            for j in range(i):
                parts.append(ca.sqrt(ca.sumsqr(where[i, :] - where[j, :])) / DISTANCE_UNIT)
    for i in range(model.n):  # the thrust axis's vertical component: the tilt
        magnitude = ca.sqrt(ca.sumsqr(thrust[i, :]) + 1e-9)
        parts.append(thrust[i, 2] / magnitude / TILT_UNIT)
    return ca.vertcat(*parts)


def constraints_and_jacobian(model: LoadCableModel, x, midpoint_offset=0.0):
    """``constraint_functions`` at x (an SX symbol) and their Jacobian in x: of two exact
    graphs, the one with fewer operations.

    Differentiated whole, each row's derivative walks the load's acceleration and jerk through
    all n cables again, and the Jacobian costs O(n^3) (917 000 operations a node for nine
    quadrotors with drag). The other graph applies the chain rule in two steps. Each
    constraint depends on x through the quadrotors' points q (``_quad_points``: centres of
    gravity at the node and between nodes, thrusts; 9 values a quadrotor), and each point
    depends on the load, its own cable and the load's kinematics y
    (``LoadCableModel.load_kinematics``, 12 values, the only coupling to the other cables):
    dq/dx = dq/dx|_y + dq/dy dy/dx and dh/dx = dh/dx|_q + dh/dq dq/dx, with dq/d(x, y)
    taken a row at a time in reverse (each row walks its own quadrotor's graph; forward
    sweeps walked every quadrotor's for each of the load's columns). That costs O(n^2):
    240 000 operations for nine, but 53 000 against 39 000 for three."""
    h = constraint_functions(model, x, midpoint_offset)
    direct = (h, ca.jacobian(h, x))
    return min(direct, chained_constraint_jacobian(model, x, midpoint_offset), key=_operation_count)


def chained_constraint_jacobian(model: LoadCableModel, x, midpoint_offset=0.0):
    """``constraint_functions`` and their Jacobian by the chain rule
    (``constraints_and_jacobian``)."""
    n = model.n
    y = ca.SX.sym("y", 12)
    points = ca.vertcat(*(ca.vec(part.T) for part in _quad_points(model, x, midpoint_offset, y)))
    q = ca.SX.sym("q", points.numel())
    p, later, thrust = (ca.reshape(q[k * 3 * n : (k + 1) * 3 * n], 3, n).T for k in range(3))
    h = _constraint_rows(model, x, p, later, thrust)
    xy = ca.vertcat(x, y)
    rows = ca.sparsify(ca.vertcat(*(ca.gradient(points[r], xy).T for r in range(points.numel()))))
    kinematics = model.load_kinematics(x)
    nx = x.numel()
    dq = rows[:, :nx] + ca.mtimes(rows[:, nx:], ca.jacobian(kinematics, x))
    dh = ca.jacobian(h, x) + ca.mtimes(ca.jacobian(h, q), dq)
    h, dh = ca.substitute([h, dh], [q], [points])
    h, dh = ca.substitute([h, dh], [y], [kinematics])
    return h, dh


def _operation_count(outputs) -> int:
    """Operations of an SX graph's evaluation (CasADi's instructions)."""
    symbols = ca.symvar(ca.veccat(*outputs))
    return ca.Function("count", symbols, list(outputs)).n_instructions()


def constraint_bounds(system: SystemParams, params: TeacherParams) -> np.ndarray:
    """What ``constraint_functions`` add up to each constraint's margin (>= 0 when it holds):
    tension above its minimum and below its maximum, thrust below its maximum and above its
    minimum, distance (at the node and between nodes) beyond
    ``min_distance + separation_margin``, tilt within ``max_tilt_deg``."""
    P = params
    n = system.n_uavs
    per_uav = np.array([-P.tension_min, P.tension_max, thrust_limit(system, P), -P.thrust_min])
    per_pair = -(P.min_distance + P.separation_margin) / DISTANCE_UNIT
    tilt = -np.cos(np.radians(P.max_tilt_deg)) / TILT_UNIT
    return np.concatenate(
        [np.tile(per_uav / FORCE_UNIT, n), np.full(n * (n - 1), per_pair), np.full(n, tilt)]
    )


def path_constraints(model: LoadCableModel, params: TeacherParams, x, midpoint_offset=0.0):
    """The path constraints at one node, each ``>= 0`` when it holds (see
    ``constraint_bounds``)."""
    return constraint_functions(model, x, midpoint_offset) + constraint_bounds(model.system, params)


def formation_prior(system: SystemParams, hover, q: np.ndarray, acceleration: np.ndarray):
    """Cable directions (k, n, 3, world, from the load to the quadrotor) and tensions (k, n) of
    the hover formation carried by a load at attitudes q (k, 4) accelerating at ``acceleration``
    (k, 3): the hover cone, rotated with the load, leans toward the force the load needs and
    its tensions scale with it (the ``formation-tilt`` planner's shape). The optimizer is
    pulled weakly toward it: it fixes what the load's motion leaves free (with more than three
    cables, the formation's shape and the split of the tensions)."""
    need = acceleration + np.array([0.0, 0.0, system.gravity])
    size = np.maximum(np.linalg.norm(need, axis=1), 1e-9)
    axis = need / size[:, None]
    axis[:, 2] = np.maximum(axis[:, 2], -0.99)  # a load falling faster than gravity: no cone
    # smallest rotation taking e_z to axis (Rodrigues)
    v = np.stack([-axis[:, 1], axis[:, 0], np.zeros(len(axis))], axis=1)  # e_z x axis
    vx = np.zeros((len(axis), 3, 3))
    vx[:, 0, 2], vx[:, 1, 2] = v[:, 1], -v[:, 0]
    vx[:, 2, 0], vx[:, 2, 1] = -v[:, 1], v[:, 0]
    tilt = np.eye(3) + vx + vx @ vx / (1.0 + axis[:, 2])[:, None, None]
    directions = np.einsum("kab,kbc,nc->kna", tilt, quat_to_matrix(q), hover.directions)
    tensions = hover.tensions[None, :] * (size / system.gravity)[:, None]
    return directions, tensions


def constraint_count(n: int) -> int:
    """Per node: five per quadrotor (tension and thrust bounds, tilt), two per pair (at the
    node, before it)."""
    return 5 * n + n * (n - 1)


def input_weights(params: TeacherParams, n: int) -> np.ndarray:
    """Diagonal weights of the inputs (d3r, d2t per cable)."""
    weights = np.array([params.weight_cable_jerk] * 3 + [params.weight_tension_accel])
    return np.tile(weights * cable_scale(params, n), n)


def input_bounds(params: TeacherParams, n: int) -> np.ndarray:
    """Largest magnitude of each input."""
    return np.tile([params.max_cable_jerk] * 3 + [params.max_tension_accel], n)


@dataclass
class Iterate:
    """The solver's primal-dual point: node states X (N+1, nx), inputs U (N, nu), multipliers
    of the path constraints z (N, m) and of the input bounds zu (N, 2 nu), at plan time t."""

    t: float
    X: np.ndarray
    U: np.ndarray
    z: np.ndarray | None
    zu: np.ndarray | None

    def is_finite(self) -> bool:
        return bool(
            np.isfinite(self.X).all()
            and np.isfinite(self.U).all()
            and (self.z is None or np.isfinite(self.z).all())
            and (self.zu is None or np.isfinite(self.zu).all())
        )


@dataclass
class StepInfo:
    """What one SQP iteration saw at its starting point and did."""

    ok: bool
    size: float  # largest normalized change of the full step
    alpha: float  # step length taken
    binding: float  # largest multiplier over its penalty weight (1: the penalty is binding)


class _Sparse:
    """Compressed-column pattern of one CasADi output, with its row-wise index."""

    def __init__(self, sparsity: ca.Sparsity):
        self.shape = sparsity.shape
        self.rows = np.asarray(sparsity.row(), dtype=np.int64)
        self.colptr = np.asarray(sparsity.colind(), dtype=np.int64)
        self.nnz = sparsity.nnz()
        cols = np.repeat(np.arange(self.shape[1]), np.diff(self.colptr))
        order = np.lexsort((cols, self.rows))
        self.row_ptr = np.concatenate([[0], np.cumsum(np.bincount(self.rows, minlength=self.shape[0]))])
        self.row_cols = cols[order].astype(np.int64)
        self.row_nz = order.astype(np.int64)


class TeacherOCP:
    """The optimal control problem of one plan and its SQP iteration.

    Cost: over the horizon, interval-weighted squared residuals: load position, attitude,
    velocity and angular rate against the reference; cable regularization; inputs. Path
    constraints at every node after the first (``path_constraints``) and input bounds, hard,
    in elastic form with penalty weight ``exact_penalty`` (per unit and second; it dominates
    the multipliers, so the solution is that of the hard constraints whenever one exists).
    Each iteration linearizes the RK4 dynamics, the residuals and the constraints (generated
    C, compiled once and cached) and takes one primal-dual Newton step (``riccati_ipm``),
    shortened to stay inside a trust region and to keep slacks and multipliers positive.
    """

    def __init__(self, system: SystemParams, params: TeacherParams, aero: AeroParams | None = None):
        self.system = system
        self.params = params
        self.aero = aero if aero is not None and aero.any_drag() else None
        self.model = LoadCableModel(system, self.aero)
        self.n = system.n_uavs
        self.nx = self.model.nx
        self.nu = self.model.nu
        self.m = constraint_count(self.n)
        self.N = N_NODES - 1
        self.dts = np.diff(node_offsets())
        self.hover = hover_geometry(system)
        self.node_weight = self.dts.copy()  # node j weighted by the interval before it
        self.node_weight[-1] *= params.terminal_scale
        self.R = self.dts[:, None] * input_weights(params, self.n)[None, :]
        self.u_max = input_bounds(params, self.n)
        self.constraint_bounds = constraint_bounds(system, params)
        self.rho = np.full((self.N, self.m), params.exact_penalty) * self.node_weight[:, None]
        self.mu = np.full((self.N, self.m), params.barrier) * self.node_weight[:, None]
        self.rho_u = params.exact_penalty * self.dts
        self.mu_u = params.barrier * self.dts
        self.x_scale, self.u_scale = self._step_scales()
        start = time.perf_counter()
        self._build()
        self.build_s = time.perf_counter() - start

    # -- generated code -----------------------------------------------------------------------

    def _build(self):
        nx, nu, N = self.nx, self.nu, self.N
        x = ca.SX.sym("x", nx)
        u = ca.SX.sym("u", nu)
        dt = ca.SX.sym("dt")
        ref = ca.SX.sym("ref", reference_size(self.n))
        xn = self.model.step_function(self.params.substeps)(x, u, dt)
        common = {"cse": True}  # one evaluation of each repeated subexpression
        dyn = ca.Function(
            "teacher_dyn", [x, u, dt], [ca.densify(xn), ca.jacobian(xn, x), ca.jacobian(xn, u)], common
        )
        sqrt_weight = ca.SX.sym("w", len(RESIDUAL_WEIGHTS))
        res = tracking_residuals(self.model, x, ref, sqrt_weight)
        J = ca.jacobian(res, x)
        offset = ca.SX.sym("offset")  # to the middle of the interval before the node (s)
        h, dh = constraints_and_jacobian(self.model, x, offset)
        node = ca.Function(
            "teacher_node",
            [x, ref, sqrt_weight, offset],
            [
                ca.mtimes(J.T, J),
                ca.densify(ca.mtimes(J.T, res)),
                ca.densify(0.5 * ca.sumsqr(res)),
                ca.densify(h),
                dh,
            ],
            common,
        )
        X = ca.MX.sym("X", nx, N + 1)
        U = ca.MX.sym("U", nu, N)
        REF = ca.MX.sym("ref", reference_size(self.n), N + 1)
        SW = ca.MX.sym("w", len(RESIDUAL_WEIGHTS))
        F, A, B = dyn.map(N)(X[:, :N], U, ca.DM(self.dts).T)
        W, g, cost, hc, H = node.map(N)(X[:, 1:], REF[:, 1:], SW, ca.DM(-0.5 * self.dts).T)
        linearize = ca.Function("teacher_linearize", [X, U, REF, SW], [F, A, B, W, g, cost, hc, H])
        outputs = self.model.outputs(x)
        flat = ca.Function("teacher_out", [x], [ca.vertcat(*[ca.vec(o.T) for o in outputs])])
        flat_map = flat.map(N_NODES)
        compiled = compile_functions(f"teacher_n{self.n}_{self._digest()}", [linearize, flat_map])
        self.patterns = {
            name: _Sparse(sp)
            for name, sp in (
                ("A", dyn.sparsity_out(1)),
                ("B", dyn.sparsity_out(2)),
                ("W", node.sparsity_out(0)),
                ("H", node.sparsity_out(4)),
            )
        }
        self._lin_args = [
            np.zeros((N + 1, nx)),
            np.zeros((N, nu)),
            np.zeros((N + 1, reference_size(self.n))),
            residual_weights(self.params, self.n),
        ]
        self._lin_out = [
            np.zeros((N, nx)),
            *(np.zeros((N, self.patterns[k].nnz)) for k in "ABW"),
            np.zeros((N, nx)),
            np.zeros(N),
            np.zeros((N, self.m)),
            np.zeros((N, self.patterns["H"].nnz)),
        ]
        for index, arr in enumerate(self._lin_out):  # the buffers hold exactly the nonzeros
            assert linearize.sparsity_out(index).nnz() == arr.size, index
        self._lin_buffer, self._lin_eval = compiled[linearize.name()].buffer()
        for i, arr in enumerate(self._lin_args):
            self._lin_buffer.set_arg(i, memoryview(arr))
        for i, arr in enumerate(self._lin_out):
            self._lin_buffer.set_res(i, memoryview(arr))
        self._out_arg = np.zeros((N_NODES, nx))
        self._out_res = np.zeros((N_NODES, 18 * self.n))
        self._out_buffer, self._out_eval = compiled[flat_map.name()].buffer()
        self._out_buffer.set_arg(0, memoryview(self._out_arg))
        self._out_buffer.set_res(0, memoryview(self._out_res))

    def _digest(self) -> str:
        """What the generated code depends on: the system, the drag and the RK4 steps (weights
        and bounds are arguments: changing them needs no new build)."""
        key = repr((self.system, self.params.substeps))
        if self.aero is not None:  # drag-free builds keep their key
            key += repr(self.aero)
        return hashlib.sha256(key.encode()).hexdigest()[:10]

    def linearize(self, X: np.ndarray, U: np.ndarray, ref: np.ndarray) -> list[np.ndarray]:
        """At (X (N+1, nx), U (N, nu)) for the reference ref (N+1, 13 + 4n), nodes 1..N: the
        predicted next states F (N, nx), the dynamics Jacobians A, B and the Gauss-Newton
        Hessians W (N, nonzeros of their patterns), the gradients g (N, nx), the costs (N,),
        the constraint functions (N, m) and their Jacobians H (N, nonzeros). Buffers,
        overwritten by the next call."""
        np.copyto(self._lin_args[0], X)
        np.copyto(self._lin_args[1], U)
        np.copyto(self._lin_args[2], ref)
        self._lin_eval()
        return self._lin_out

    def quad_outputs(self, X: np.ndarray) -> np.ndarray:
        """Per node and quadrotor (N+1, 6, n, 3): p, v, a, jerk, thrust, body rates."""
        np.copyto(self._out_arg, X)
        self._out_eval()
        return self._out_res.reshape(N_NODES, 6, self.n, 3).copy()

    def _step_scales(self) -> tuple[np.ndarray, np.ndarray]:
        """Largest change of each state and input one SQP step may make (trust region)."""
        x = np.empty(self.nx)
        x[X_POS : X_POS + 3] = 0.5
        x[X_VEL : X_VEL + 3] = 1.0
        x[X_QUAT : X_QUAT + 4] = 0.2
        x[X_RATE:X_LOAD] = 1.0
        for i in range(self.n):
            o = cable_offset(i)
            x[o + C_DIR : o + C_DIR + 3] = 0.2
            x[o + C_RATE : o + C_RATE + 3] = 1.0
            x[o + C_RATE + 3 : o + C_RATE + 6] = 5.0
            x[o + C_RATE + 6 : o + C_RATE + 9] = 25.0
            x[o + C_TENSION] = 3.0
            x[o + C_DTENSION] = 30.0
        return x, 0.5 * self.u_max

    # -- one iteration ------------------------------------------------------------------------

    def initial_multipliers(self, h: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Multipliers on the central path (z s = mu) for constraint values h (N, m)."""
        z = np.empty_like(h)
        for j in range(self.N):
            s = _elastic_slack(h[j], self.rho[j], self.mu[j])
            z[j] = np.clip(self.mu[j] / s, 1e-12 * self.rho[j], 0.5 * self.rho[j])
        c = np.concatenate([1.0 + U / self.u_max, 1.0 - U / self.u_max], axis=1)
        c = c.reshape(self.N, 2, self.nu).transpose(0, 2, 1).reshape(self.N, 2 * self.nu)
        s = _elastic_slack(c, self.rho_u[:, None], self.mu_u[:, None])
        zu = np.clip(self.mu_u[:, None] / s, 1e-12 * self.rho_u[:, None], 0.5 * self.rho_u[:, None])
        return z, zu

    def sqp_step(self, it: Iterate, ref: np.ndarray) -> StepInfo:
        """One SQP iteration on ``it`` in place (X[0] stays)."""
        F, A, B, W, g, _, raw, H = self.linearize(it.X, it.U, ref)
        h = raw + self.constraint_bounds
        if not (np.isfinite(F).all() and np.isfinite(h).all() and np.isfinite(H).all()):
            return StepInfo(False, np.inf, 0.0, 1.0)
        if it.z is None or it.zu is None:
            it.z, it.zu = self.initial_multipliers(h, it.U)
        w = self.node_weight[:, None]
        pa, pb, pw, ph = (self.patterns[k] for k in "ABWH")
        dX, dU, dz, dzu, alpha_p, alpha_d, ok = newton_step(
            F - it.X[1:],
            A,
            pa.rows,
            pa.colptr,
            B,
            pb.rows,
            pb.colptr,
            W * w,
            pw.rows,
            pw.colptr,
            g * w,
            self.R,
            self.R * it.U,
            h,
            H,
            ph.row_ptr,
            ph.row_cols,
            ph.row_nz,
            it.z,
            self.rho,
            self.mu,
            it.U,
            self.u_max,
            it.zu,
            self.rho_u,
            self.mu_u,
            REGULARIZATION,
            FRACTION_TO_BOUNDARY,
        )
        binding = float(max((it.z / self.rho).max(), (it.zu / self.rho_u[:, None]).max()))
        if not (
            ok
            and np.isfinite(dX).all()
            and np.isfinite(dU).all()
            and np.isfinite(dz).all()
            and np.isfinite(dzu).all()
        ):
            return StepInfo(False, np.inf, 0.0, binding)
        size = float(max(np.abs(dX / self.x_scale).max(), np.abs(dU / self.u_scale).max()))
        alpha = min(alpha_p, 1.0 / size if size > 1.0 else 1.0)
        it.X += alpha * dX
        it.U += alpha * dU
        it.z += alpha_d * dz
        it.zu += alpha_d * dzu
        return StepInfo(True, size, alpha, binding)


def _elastic_slack(c, rho, mu):
    """Slack s of the elastic reset (``riccati_ipm.elastic_slacks``), vectorized."""
    b = rho * c - 2.0 * mu
    root = np.sqrt(np.maximum(b * b + 4.0 * rho * mu * c, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.where(b > 0.0, 2.0 * mu * c / (b + root), (root - b) / (2.0 * rho))
    return np.maximum(c + np.maximum(sigma, 1e-300), 1e-300)
