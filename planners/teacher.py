"""The teacher: centralized kinodynamic NMPC on the load-cable model (DESIGN.md section 6).

Every planner period it solves, warm-started from its previous solution, an optimal control
problem over the paper's 21-node horizon: track the load reference (position, attitude,
velocity, angular rate) with the cable states of ``teacher_model``, subject to tension bounds
(taut cables), each quadrotor's thrust bounds and a minimum distance between quadrotors. The
solution becomes one ``UavTrajectory`` per quadrotor (p, v, a, jerk, body rates, exact).

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
from cableload_sim.world import UavTrajectory, WorldState
from planners.base import hover_plan
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


class TeacherOCP:
    """The optimal control problem of one plan, solved by Gauss-Newton SQP with HPIPM.

    Variables, stage-wise as HPIPM wants them: ``[x_0, u_0, x_1, u_1, ..., x_N]``. Cost: sum over
    nodes of the interval-weighted squared residuals (load position, attitude, velocity, angular
    rate against the reference; cable angular accelerations; inputs), so the Gauss-Newton
    Hessian ``J^T J`` is exact for the cost and positive semi-definite. Each SQP iteration
    linearizes the RK4 dynamics and the path constraints (compiled C, evaluated for all nodes in
    one call), solves the structured QP with HPIPM's Riccati-based interior point method, and
    takes the full step. Warm-started from the previous plan, one or two iterations suffice
    (real-time iteration); the first plan iterates until the step is small.
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
        self._compile()
        self._bounds()
        self._structure()

    # -- compiled pieces ----------------------------------------------------------------------

    def _residual_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Square roots of the state and input residual weights."""
        P = self.params
        state = [P.weight_position] * 3 + [4.0 * P.weight_attitude] * 3 \
            + [P.weight_velocity] * 3 + [P.weight_rate] * 3 + [P.weight_cable_rate] * 6 * self.n
        inputs = ([P.weight_cable_jerk] * 3 + [P.weight_tension_accel]) * self.n
        return np.sqrt(state), np.sqrt(inputs)

    def _compile(self):
        nx, nu, N, n = self.nx, self.nu, self.N, self.n
        x = ca.SX.sym("x", nx)
        u = ca.SX.sym("u", nu)
        dt = ca.SX.sym("dt")
        step = self.model.step_function(self.params.substeps)
        xn = step(x, u, dt)
        dyn = ca.Function("teacher_dyn", [x, u, dt],
                          [xn, ca.jacobian(xn, x), ca.jacobian(xn, u)])
        p, thrust = self.model.positions_thrusts(x)
        terms = [ca.sumsqr(thrust[i, :]) for i in range(n)]
        for i in range(n):
            for j in range(i):
                terms.append(ca.sumsqr(p[i, :] - p[j, :]))
        h = ca.vertcat(*terms)
        path = ca.Function("teacher_path", [x], [h, ca.jacobian(h, x)])
        ref = ca.SX.sym("ref", REF_SIZE)
        weight = ca.SX.sym("w", 12 + 6 * n)
        cable_rates = [x[cable_offset(i) + C_RATE + 3 : cable_offset(i) + C_RATE + 9]
                       for i in range(n)]
        residual = weight * ca.vertcat(
            x[X_POS : X_POS + 3] - ref[0:3],
            _quat_error(x[X_QUAT : X_QUAT + 4], ref[3:7]),
            x[X_VEL : X_VEL + 3] - ref[7:10],
            x[X_RATE:X_LOAD] - ref[10:13],
            *cable_rates,
        )
        cost = ca.Function("teacher_cost", [x, ref, weight],
                           [residual, ca.jacobian(residual, x)])
        outputs = self.model.outputs(x)
        flat = ca.Function("teacher_out", [x], [ca.vertcat(*[ca.vec(o.T) for o in outputs])])
        compiled = compile_functions(
            f"teacher_n{n}",
            [dyn.map(N), path.map(N), cost.map(N), flat.map(N_NODES)],
        )
        self.dyn = compiled[dyn.map(N).name()]
        self.path = compiled[path.map(N).name()]
        self.cost = compiled[cost.map(N).name()]
        self.outputs = compiled[flat.map(N_NODES).name()]
        self.A_sp = ca.jacobian(xn, x).sparsity()
        self.B_sp = ca.jacobian(xn, u).sparsity()
        self.C_sp = ca.jacobian(h, x).sparsity()
        self.n_path = h.size1()
        self.n_res = residual.size1()

    # -- the SQP step as one CasADi function --------------------------------------------------

    def _structure(self):
        """Build ``self.step_fn(X, U, ref, lbw, ubw) -> (X+, U+, qp cost)``: linearize (compiled
        C, all nodes in one call), assemble the Gauss-Newton QP in HPIPM's stage-wise layout,
        solve it with HPIPM and take the full step, without a round trip through Python."""
        nx, nu, N, npath = self.nx, self.nu, self.N, self.n_path
        stride = nx + nu
        self.nz = N * stride + nx
        X = ca.MX.sym("X", nx, N + 1)
        U = ca.MX.sym("U", nu, N)
        ref = ca.MX.sym("ref", REF_SIZE, N + 1)
        lbw = ca.MX.sym("lbw", self.nz)
        ubw = ca.MX.sym("ubw", self.nz)
        F, A, B = self.dyn(X[:, :N], U, ca.DM(self.dts).T)
        h, C = self.path(X[:, 1:])
        res, J = self.cost(X[:, 1:], ref[:, 1:], ca.DM(self.state_weights))
        input_h = ca.DM(self.input_weights)
        # Hessian blocks (x_0 fixed: an empty block), gradient
        blocks = [ca.MX.eye(nx)]  # x_0 is fixed by its bounds; any positive block will do
        grad = [ca.MX(nx, 1)]
        for k in range(N):
            blocks.append(ca.diag(input_h[:, k]))
            grad.append(input_h[:, k] * U[:, k])
            Jk = J[:, k * nx : (k + 1) * nx]
            # a small Levenberg-Marquardt term keeps every state's curvature positive
            blocks.append(ca.mtimes(Jk.T, Jk) + REGULARIZATION * ca.MX.eye(nx))
            grad.append(ca.mtimes(Jk.T, res[:, k]))
        H = ca.diagcat(*blocks)
        g = ca.vertcat(*grad)
        # constraints, HPIPM's order: [gap_0, gap_1, path_1, gap_2, path_2, ..., path_N]
        rows, lba, uba = [], [], []
        lo = ca.DM(self.path_lo)
        hi = ca.DM(self.path_hi)
        for k in range(N):
            left = ca.MX(nx, k * stride)
            right = ca.MX(nx, self.nz - (k + 1) * stride - nx)
            rows.append(ca.horzcat(left, A[:, k * nx : (k + 1) * nx], B[:, k * nu : (k + 1) * nu],
                                   -ca.MX.eye(nx), right))
            defect = F[:, k] - X[:, k + 1]
            lba.append(-defect)
            uba.append(-defect)
            if k > 0:
                rows.append(ca.horzcat(ca.MX(npath, k * stride), C[:, (k - 1) * nx : k * nx],
                                       ca.MX(npath, self.nz - k * stride - nx)))
                lba.append(lo - h[:, k - 1])
                uba.append(hi - h[:, k - 1])
        rows.append(ca.horzcat(ca.MX(npath, N * stride), C[:, (N - 1) * nx :]))
        lba.append(lo - h[:, N - 1])
        uba.append(hi - h[:, N - 1])
        Aqp = ca.vertcat(*rows)
        w = ca.vertcat(*[ca.vertcat(X[:, k], U[:, k]) for k in range(N)], X[:, N])
        self.qp = ca.conic("teacher_qp", "hpipm", {"h": H.sparsity(), "a": Aqp.sparsity()}, {
            "N": N,
            "nx": [nx] * (N + 1),
            "nu": [nu] * N + [0],
            "ng": [0] + [npath] * N,
            "error_on_fail": False,
            "hpipm": {"iter_max": 50, "res_g_max": 1e-6, "res_b_max": 1e-8, "res_d_max": 1e-8,
                      "res_m_max": 1e-6, "warm_start": 0, "mode": "balance"},
        })
        self.qp_data = ca.Function("qp_data", [X, U, ref, lbw, ubw],
                                   [H, g, Aqp, ca.vertcat(*lba), ca.vertcat(*uba), lbw - w,
                                    ubw - w])
        sol = self.qp(h=H, g=g, a=Aqp, lba=ca.vertcat(*lba), uba=ca.vertcat(*uba),
                      lbx=lbw - w, ubx=ubw - w)
        w_new = w + sol["x"]
        X_new = ca.horzcat(*[w_new[k * stride : k * stride + nx] for k in range(N + 1)])
        U_new = ca.horzcat(*[w_new[k * stride + nx : (k + 1) * stride] for k in range(N)])
        self.step_fn = ca.Function("teacher_sqp_step", [X, U, ref, lbw, ubw],
                                   [X_new, U_new, ca.mmax(ca.fabs(sol["x"])), sol["cost"]])

    def _bounds(self):
        P = self.params
        nx, nu, N, n = self.nx, self.nu, self.N, self.n
        stride = nx + nu
        lbx = np.full(N * stride + nx, -np.inf)
        ubx = np.full(N * stride + nx, np.inf)
        for k in range(N + 1):
            base = k * stride
            if k > 0:
                for i in range(n):
                    o = base + cable_offset(i) + C_TENSION
                    lbx[o] = P.tension_min
                    ubx[o] = P.tension_max
            if k < N:
                for i in range(n):
                    o = base + nx + 4 * i
                    lbx[o : o + 3] = -P.max_cable_jerk
                    ubx[o : o + 3] = P.max_cable_jerk
                    lbx[o + 3] = -P.max_tension_accel
                    ubx[o + 3] = P.max_tension_accel
        self.lbw = lbx
        self.ubw = ubx
        thrust_max = min(q.rotor.max_thrust() for q in self.system.quadrotors) * P.thrust_margin
        self.path_lo = np.array([P.thrust_min**2] * n + [P.min_distance**2] * (self.n_path - n))
        self.path_hi = np.array([thrust_max**2] * n + [1e8] * (self.n_path - n))
        sw_state, sw_input = self._residual_weights()
        scale = np.ones(N)
        scale[-1] = np.sqrt(P.terminal_scale)
        # residual weights for x_1..x_N: sqrt(weight * interval), the terminal node scaled
        self.state_weights = sw_state[:, None] * (np.sqrt(self.dts) * scale)[None, :]
        self.input_weights = (sw_input[:, None] ** 2) * self.dts[None, :]  # diagonal Hessian

    # -- solve --------------------------------------------------------------------------------

    def sqp_step(self, X: np.ndarray, U: np.ndarray, ref: np.ndarray):
        """One Gauss-Newton SQP step from (X (N+1, nx), U (N, nu)), X[0] fixed. Returns the
        new (X, U), the largest change of a variable and whether the step is usable."""
        lbw = self.lbw.copy()
        ubw = self.ubw.copy()
        lbw[: self.nx] = ubw[: self.nx] = X[0]
        X_new, U_new, change, _ = self.step_fn(X.T, U.T, ref, lbw, ubw)
        X_new = X_new.full().T
        U_new = U_new.full().T
        change = float(change)
        ok = np.isfinite(change) and np.isfinite(X_new).all() and np.isfinite(U_new).all()
        return X_new, U_new, change, bool(ok)


class TeacherPlanner:
    """Centralized NMPC teacher as a ``Planner``."""

    name = "teacher"

    def __init__(self, system: SystemParams, params: TeacherParams | None = None):
        self.system = system
        self.params = params or TeacherParams()
        self.ocp = TeacherOCP(system, self.params)
        self.model = self.ocp.model
        self.offsets = node_offsets()
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
            X, U, change, ok = self.ocp.sqp_step(X, U, ref_matrix)
            if not ok or change < 1e-4:
                break
        self.iterations.append(done)
        plans = self._trajectories(times, X) if ok and np.isfinite(X).all() else None
        if plans is not None and all(p.is_finite() for p in plans):
            self.prev_t, self.prev_X, self.prev_U = state.t, X, U
            self.prev_plans = plans
        else:
            self.failures += 1
            plans = self._fallback(state)
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
