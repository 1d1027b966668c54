"""The teacher: centralized kinodynamic NMPC on the load-cable model of Sun et al. (2025).

Every planner period it solves, warm-started from its previous solution, an optimal control
problem over the paper's 21-node horizon: track the load reference (position, attitude,
velocity, angular rate) with the cable states of ``teacher_model``, with tension bounds (taut
cables), each quadrotor's thrust bounds, a minimum distance between quadrotors and input bounds
enforced as stiff penalties on their violation. The solution becomes one ``UavTrajectory`` per
quadrotor (p, v, a, jerk, body rates, exact).

Initial state: load pose and twist and the cable directions from the privileged ``WorldState``;
cable rates, tensions and their derivatives from the previous plan at the current time (the
first plan starts from the measured cable rates and the measured tensions), so consecutive plans
are continuous. On solver failure the previous plan is flown shifted in time (a hover hold when
there is none) and the failure is counted; a quadrotor never receives a non-finite value.
"""

from __future__ import annotations

import time

import casadi as ca
import numpy as np

from cableload_sim.horizon import N_NODES, node_offsets
from cableload_sim.params import Config, SystemParams, TeacherParams
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.statics import hover_geometry
from cableload_sim.world import UavTrajectory, WorldState
from planners.base import PlanBounds, hover_plan
from planners.codegen import compile_functions
from planners.teacher_model import (
    C_DIR,
    C_DTENSION,
    C_RATE,
    C_SIZE,
    C_TENSION,
    X_LOAD,
    X_POS,
    X_QUAT,
    X_RATE,
    X_VEL,
    LoadCableModel,
    cable_offset,
)

REF_SIZE = 13  # per node: p (3), q (4), v (3), omega (3)
REGULARIZATION = 1e-6  # Levenberg-Marquardt term of the Gauss-Newton Hessian


def _quat_error(q, q_ref):
    """Vector part of conj(q_ref) (x) q: half the rotation vector for small errors."""
    w1, x1, y1, z1 = q_ref[0], -q_ref[1], -q_ref[2], -q_ref[3]
    w2, x2, y2, z2 = q[0], q[1], q[2], q[3]
    return ca.vertcat(
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    )


def state_residuals(model: LoadCableModel, params: TeacherParams, hover_tension, x, ref):
    """Weighted residuals of one node's state: load tracking, cable regularization, and the
    constraints as penalties on their violation (zero while satisfied)."""
    P = params
    n = model.n
    e_q = _quat_error(x[X_QUAT : X_QUAT + 4], ref[3:7])
    parts = [
        np.sqrt(P.weight_position) * (x[X_POS : X_POS + 3] - ref[0:3]),
        np.sqrt(4.0 * P.weight_attitude) * e_q,
        np.sqrt(P.weight_velocity) * (x[X_VEL : X_VEL + 3] - ref[7:10]),
        np.sqrt(P.weight_rate) * (x[X_RATE:X_LOAD] - ref[10:13]),
    ]
    for i in range(n):
        o = cable_offset(i)
        parts.append(np.sqrt(P.weight_cable_rate) * x[o + C_RATE : o + C_RATE + 9])
        parts.append(np.sqrt(P.weight_tension) * (x[o + C_TENSION] - hover_tension[i]))
        parts.append(np.sqrt(P.weight_tension_rate) * x[o + C_DTENSION])
    parts.append(constraint_violations(model, params, x) * np.sqrt(P.constraint_weight))
    return ca.vertcat(*parts)


def constraint_violations(model: LoadCableModel, params: TeacherParams, x):
    """Per quadrotor: tension below its minimum and above its maximum (N), thrust above its
    maximum and below its minimum (N); per pair: distance short of the minimum (m). All zero
    when the constraints hold."""
    P = params
    p, thrust = model.positions_thrusts(x)
    thrust_max = min(q.rotor.max_thrust() for q in model.system.quadrotors) * P.thrust_margin
    parts = []
    for i in range(model.n):
        t = x[cable_offset(i) + C_TENSION]
        magnitude = ca.sqrt(ca.sumsqr(thrust[i, :]))
        parts += [ca.fmax(0.0, P.tension_min - t), ca.fmax(0.0, t - P.tension_max),
                  ca.fmax(0.0, magnitude - thrust_max), ca.fmax(0.0, P.thrust_min - magnitude)]
    for i in range(model.n):
        for j in range(i):
            distance = ca.sqrt(ca.sumsqr(p[i, :] - p[j, :]))
            parts.append(ca.fmax(0.0, P.min_distance - distance))
    return ca.vertcat(*parts)


def input_residuals(params: TeacherParams, n: int, u):
    """Weighted input residuals: regularization and the input bounds as penalties."""
    P = params
    penalty = np.sqrt(P.constraint_weight)
    parts = []
    for i in range(n):
        d3r = u[4 * i : 4 * i + 3]
        d2t = u[4 * i + 3]
        parts += [np.sqrt(P.weight_cable_jerk) * d3r, np.sqrt(P.weight_tension_accel) * d2t,
                  penalty * ca.fmax(0.0, ca.fabs(d3r) - P.max_cable_jerk) / P.max_cable_jerk,
                  penalty * ca.fmax(0.0, ca.fabs(d2t) - P.max_tension_accel)
                  / P.max_tension_accel]
    return ca.vertcat(*parts)


class TeacherOCP:
    """The optimal control problem of one plan, solved by Gauss-Newton SQP with a Riccati
    recursion, compiled to C in one piece.

    Cost: over the horizon, interval-weighted squared residuals: load position, attitude,
    velocity and angular rate against the reference; cable angular accelerations; inputs; and
    the constraints as exact-penalty-like quadratic terms on their violation (tension bounds,
    thrust bounds, distance between quadrotors, input bounds), with weights large enough that
    violations stay at the centimetre and tenth-of-a-newton level. With only the dynamics as
    equality constraints, the Gauss-Newton QP of each SQP iteration is solved exactly by one
    backward Riccati sweep and one forward rollout (the constant x_0 removes its block), using
    the sparsity of the linearized dynamics; everything, linearization included, is generated
    as C and compiled once (cached). Warm-started from the previous plan, one iteration per
    plan suffices (real-time iteration); the first plan iterates until the step is small.
    """

    def __init__(self, system: SystemParams, params: TeacherParams):
        self.system = system
        self.params = params
        self.model = LoadCableModel(system)
        self.n = system.n_uavs
        self.nx = self.model.nx
        self.nu = self.model.nu
        self.N = N_NODES - 1
        self.dts = np.diff(node_offsets())
        self.hover_tension = hover_geometry(system).tensions
        self.x_scale, self.u_scale = self._step_scales()
        self._build()

    def _build(self):
        nx, nu = self.nx, self.nu
        x = ca.SX.sym("x", nx)
        u = ca.SX.sym("u", nu)
        dt = ca.SX.sym("dt")
        ref = ca.SX.sym("ref", REF_SIZE)
        xn = self.model.step_function(self.params.substeps)(x, u, dt)
        dyn = ca.Function("teacher_dyn", [x, u, dt], [xn, ca.jacobian(xn, x), ca.jacobian(xn, u)])
        res = state_residuals(self.model, self.params, self.hover_tension, x, ref)
        cost = ca.Function("teacher_cost", [x, ref], [res, ca.jacobian(res, x)])
        ures = input_residuals(self.params, self.n, u)
        ucost = ca.Function("teacher_ucost", [u], [ures, ca.jacobian(ures, u)])
        outputs = self.model.outputs(x)
        flat = ca.Function("teacher_out", [x], [ca.vertcat(*[ca.vec(o.T) for o in outputs])])
        step = self._sqp_step_function(dyn, cost, ucost)
        compiled = compile_functions(f"teacher_n{self.n}_{self._digest()}",
                                     [step, flat.map(N_NODES)])
        self.step_fn = compiled[step.name()]
        self.outputs = compiled[flat.map(N_NODES).name()]

    def _digest(self) -> str:
        import hashlib

        return hashlib.sha256(repr((self.system, self.params)).encode()).hexdigest()[:10]

    def _sqp_step_function(self, dyn, cost, ucost) -> ca.Function:
        """(X (nx, N+1), U (nu, N), ref (13, N+1)) -> (X+, U+, largest change, cost): one
        Gauss-Newton step; x_0 = X[:, 0] stays."""
        nx, nu, N = self.nx, self.nu, self.N
        X = ca.MX.sym("X", nx, N + 1)
        U = ca.MX.sym("U", nu, N)
        ref = ca.MX.sym("ref", REF_SIZE, N + 1)
        F, A, B = dyn.map(N)(X[:, :N], U, ca.DM(self.dts).T)
        scale = np.sqrt(self.dts)
        scale_x = scale.copy()
        scale_x[-1] *= np.sqrt(self.params.terminal_scale)
        R, J = cost.map(N)(X[:, 1:], ref[:, 1:])
        Ru, Ju = ucost.map(N)(U)
        total = 0
        # Riccati backward sweep; stage quantities for x_1..x_N, inputs u_0..u_{N-1}
        Pk = None
        pk = None
        gains = [None] * N
        for k in range(N - 1, -1, -1):
            Jk = J[:, k * nx : (k + 1) * nx] * scale_x[k]
            rk = R[:, k] * scale_x[k]
            total += 0.5 * ca.sumsqr(rk)
            Q = ca.mtimes(Jk.T, Jk) + REGULARIZATION * ca.MX.eye(nx)
            q = ca.mtimes(Jk.T, rk)
            if Pk is None:  # terminal node x_N
                Pk, pk = Q, q
            else:
                Pk, pk = Pk + Q, pk + q
            Ak = A[:, k * nx : (k + 1) * nx]
            Bk = B[:, k * nu : (k + 1) * nu]
            dk = F[:, k] - X[:, k + 1]
            Juk = Ju[:, k * nu : (k + 1) * nu] * scale[k]
            ruk = Ru[:, k] * scale[k]
            total += 0.5 * ca.sumsqr(ruk)
            PB = ca.mtimes(Pk, Bk)
            Huu = ca.mtimes(Juk.T, Juk) + ca.mtimes(Bk.T, PB) + REGULARIZATION * ca.MX.eye(nu)
            Hux = ca.mtimes(PB.T, Ak)
            hu = ca.mtimes(Juk.T, ruk) + ca.mtimes(Bk.T, ca.mtimes(Pk, dk) + pk)
            sol = ca.solve(Huu, ca.horzcat(Hux, hu), "ldl")
            K = -sol[:, :nx]
            kff = -sol[:, nx]
            gains[k] = (K, kff)
            PA = ca.mtimes(Pk, Ak)
            P_new = ca.mtimes(Ak.T, PA) + ca.mtimes(Hux.T, K)
            p_new = ca.mtimes(Ak.T, ca.mtimes(Pk, dk) + pk) + ca.mtimes(Hux.T, kff)
            Pk = 0.5 * (P_new + P_new.T)
            pk = p_new
        # forward rollout of the linearized dynamics
        dx = ca.MX.zeros(nx)
        xs = [X[:, 0]]
        us = []
        change = ca.MX(0)
        for k in range(N):
            K, kff = gains[k]
            du = ca.mtimes(K, dx) + kff
            Ak = A[:, k * nx : (k + 1) * nx]
            Bk = B[:, k * nu : (k + 1) * nu]
            dx = ca.mtimes(Ak, dx) + ca.mtimes(Bk, du) + F[:, k] - X[:, k + 1]
            us.append(U[:, k] + du)
            xs.append(X[:, k + 1] + dx)
            change = ca.fmax(change, ca.fmax(ca.mmax(ca.fabs(du)), ca.mmax(ca.fabs(dx))))
        return ca.Function("teacher_sqp_step", [X, U, ref],
                           [ca.horzcat(*xs), ca.horzcat(*us), change, total])

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
        u = np.tile([self.params.max_cable_jerk] * 3 + [self.params.max_tension_accel], self.n)
        return x, 0.5 * u

    def sqp_step(self, X: np.ndarray, U: np.ndarray, ref: np.ndarray):
        """One Gauss-Newton SQP step from (X (N+1, nx), U (N, nu)), X[0] fixed, shortened when
        it would change some variable by more than its trust-region radius. Returns the new
        (X, U), the normalized size of the full step and whether the step is usable."""
        X_new, U_new, _, _ = self.step_fn(X.T, U.T, ref)
        dX = X_new.full().T - X
        dU = U_new.full().T - U
        if not (np.isfinite(dX).all() and np.isfinite(dU).all()):
            return X, U, np.inf, False
        size = max(np.abs(dX / self.x_scale).max(), np.abs(dU / self.u_scale).max())
        alpha = min(1.0, 1.0 / size) if size > 0 else 1.0
        return X + alpha * dX, U + alpha * dU, float(size), True


class TeacherPlanner:
    """Centralized NMPC teacher as a ``Planner``."""

    name = "teacher"

    def __init__(self, system: SystemParams, params: TeacherParams | None = None):
        self.system = system
        self.params = params or TeacherParams()
        self.ocp = TeacherOCP(system, self.params)
        self.model = self.ocp.model
        self.offsets = node_offsets()
        self.bounds = PlanBounds()
        self.reset()

    @classmethod
    def from_config(cls, config: Config, **kwargs):
        return cls(config.system, config.teacher, **kwargs)

    def reset(self) -> None:
        self.prev_t = None
        self.prev_X = None
        self.prev_U = None
        self.prev_plans = None
        self.solve_times: list[float] = []
        self.failures = 0
        self.iterations: list[int] = []

    def report(self) -> dict:
        times = np.array(self.solve_times) * 1e3
        return {
            "solve_ms_median": float(np.median(times)) if times.size else float("nan"),
            "solve_ms_p99": float(np.percentile(times, 99)) if times.size else float("nan"),
            "solver_failures": self.failures,
            "plans": len(self.solve_times),
            "sqp_iterations_mean": float(np.mean(self.iterations)) if self.iterations else 0.0,
        }

    # -- initial state and warm start --------------------------------------------------------

    def initial_state(self, state: WorldState) -> np.ndarray:
        """The OCP's x_0: measured load and cable directions; cable rates, tensions and their
        derivatives from the previous plan at this time (measured ones for the first plan)."""
        x = np.zeros(self.model.nx)
        x[X_POS : X_POS + 3] = state.load_p
        x[X_VEL : X_VEL + 3] = state.load_v
        x[X_QUAT : X_QUAT + 4] = state.load_q
        x[X_RATE:X_LOAD] = state.load_omega
        previous = self._previous_at(state.t)
        measured_rates = self._measured_cable_rates(state) if previous is None else None
        for i in range(self.system.n_uavs):
            o = cable_offset(i)
            x[o + C_DIR : o + C_DIR + 3] = -state.cable_dir[i]
            if previous is not None:
                x[o + C_RATE : o + C_SIZE] = previous[o + C_RATE : o + C_SIZE]
            else:
                x[o + C_RATE : o + C_RATE + 3] = measured_rates[i]
                x[o + C_TENSION] = np.clip(state.cable_tension[i], self.params.tension_min,
                                           self.params.tension_max)
        return x

    def _measured_cable_rates(self, state: WorldState) -> np.ndarray:
        """Cable angular velocities r = s x ds/dt from the attachment points' velocities."""
        R_L = quat_to_matrix(state.load_q)
        rates = np.zeros((state.n_uavs, 3))
        for i in range(state.n_uavs):
            rho = np.asarray(self.system.load.attachments[i])
            r_att = np.asarray(self.system.quadrotors[i].attachment)
            R_i = quat_to_matrix(state.uav_q[i])
            v_load_end = state.load_v + R_L @ np.cross(state.load_omega, rho)
            v_uav_end = state.uav_v[i] + R_i @ np.cross(state.uav_omega[i], r_att)
            d = state.load_p + R_L @ rho - state.uav_p[i] - R_i @ r_att
            length = np.linalg.norm(d)
            s = d / length
            relative = v_load_end - v_uav_end
            s_dot = (relative - s * (s @ relative)) / length
            rates[i] = np.cross(s, s_dot)
        return rates

    def _previous_at(self, t: float) -> np.ndarray | None:
        """The previous plan's state interpolated at time t (None without one)."""
        if self.prev_X is None:
            return None
        times = self.prev_t + self.offsets
        if t > times[-1]:
            return None
        return np.array([np.interp(t, times, self.prev_X[:, k]) for k in range(self.model.nx)])

    def _warm_start(self, t: float, x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        N = self.ocp.N
        if self.prev_X is None:
            X = np.repeat(x0[None, :], N + 1, axis=0)
            U = np.zeros((N, self.model.nu))
        else:
            old = self.prev_t + self.offsets
            new = t + self.offsets
            X = np.empty((N + 1, self.model.nx))
            for k in range(self.model.nx):
                X[:, k] = np.interp(new, old, self.prev_X[:, k])
            U = np.empty((N, self.model.nu))
            for k in range(self.model.nu):
                U[:, k] = np.interp(new[:-1], old[:-1], self.prev_U[:, k])
        X[0] = x0
        return X, U

    # -- planning -----------------------------------------------------------------------------

    def plan(self, state: WorldState, reference) -> list[UavTrajectory]:
        start = time.perf_counter()
        times = state.t + self.offsets
        ref = reference.sample(times)
        ref_matrix = np.hstack([ref.p, _continuous(ref.q, state.load_q), ref.v, ref.omega]).T
        x0 = self.initial_state(state)
        X, U = self._warm_start(state.t, x0)
        first = self.prev_X is None
        iterations = self.params.max_iter if first else self.params.rti_iterations
        ok = True
        done = 0
        for done in range(1, iterations + 1):  # noqa: B007
            X, U, size, ok = self.ocp.sqp_step(X, U, ref_matrix)
            if not ok or size < 1e-3:
                break
        self.iterations.append(done)
        plans = self._trajectories(times, X) if ok and np.isfinite(X).all() else None
        if plans is not None and all(self.bounds.violation(p) is None for p in plans):
            self.prev_t, self.prev_X, self.prev_U = state.t, X, U
            self.prev_plans = plans
        else:
            # fly the last good plan; solve the next one from scratch
            self.failures += 1
            plans = self._fallback(state)
            self.prev_X = None
        self.solve_times.append(time.perf_counter() - start)
        return plans

    def _trajectories(self, times: np.ndarray, X: np.ndarray) -> list[UavTrajectory]:
        n = self.system.n_uavs
        flat = self.ocp.outputs(X.T).full()  # (6 * 3n, nodes)
        blocks = flat.reshape(6, 3 * n, N_NODES)
        plans = []
        for i in range(n):
            sl = slice(3 * i, 3 * i + 3)
            p, v, a, j, _, rates = (blocks[k, sl, :].T for k in range(6))
            plans.append(UavTrajectory(times, p, v, a, j, rates))
        return plans

    def _fallback(self, state: WorldState) -> list[UavTrajectory]:
        if self.prev_plans is not None:
            return [plan.shifted_to(state.t) for plan in self.prev_plans]
        return [hover_plan(state.t, p) for p in state.uav_p]


def _continuous(q_ref: np.ndarray, q_now: np.ndarray) -> np.ndarray:
    """Reference quaternions with the sign nearest the current attitude (q and -q are equal)."""
    sign = np.sign(q_ref @ q_now)
    sign[sign == 0] = 1.0
    return q_ref * sign[:, None]
