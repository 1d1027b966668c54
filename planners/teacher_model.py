"""The load-cable model of the teacher NMPC (Sun et al., Science Robotics 2025), in CasADi.

State (13 + 14 n), in this order:
    load position p (3, world), velocity v (3, world), attitude q (4, w x y z, body to world),
    body angular velocity omega (3);
    per cable i: unit direction s_i (3, from the quadrotor to the load), cable angular velocity
    r_i (3) and its derivatives dr_i, ddr_i (3 + 3), tension t_i and its rate dt_i (1 + 1).
Input (4 n): per cable the third derivative of r_i (3) and the second derivative of t_i (1).

Dynamics (cables rigid and taut, massless):
    m dv/dt = -sum_i t_i s_i + m g
    J domega/dt = -omega x J omega + sum_i t_i (R^T s_i) x rho_i
    ds_i/dt = r_i x s_i;   chains of integrators for r_i and t_i.

Quadrotor kinematics follow: the cable's end on quadrotor i is p + R rho_i - (l_i + t_i / k_i) s_i
(the cable stretched by its tension, k_i its stiffness); it is differentiated exactly up to jerk
(the jerk needs the load's second derivatives, hence the derivative of the load's equations of
motion, also exact), but for the tension's second derivative (an input) in the stretch's
acceleration (1e-4 of it). The thrust vector is ``F_i = m_i (a_i - g) - t_i s_i``; its axis
``z_i = F_i / |F_i|`` turns at ``z_i x dF_i/dt / |F_i|`` (world). The centre of gravity sits
above the cable's end by the attachment offset turned with the quadrotor's attitude (thrust axis
z_i, heading +x): p and v exact, a and jerk without the terms of the attitude's angular
acceleration (0.03 m times a few rad/s^2). The body rates fed forward follow by differential
flatness with zero yaw rate, without the load's angular jerk in dF_i/dt (``quad_outputs``).

Drag (``[aero]``, nominal coefficients; still air: the teacher knows no wind): the load's box
takes the simulator's per-face drag ``-c_k |u_k| u_k`` along each load axis (c_k = 1/2 rho C_d
A_k, u the velocity of the box's centre in the load frame), with |u_k| smoothed to
``sqrt(u_k^2 + eps^2)`` (``DRAG_SPEED_EPS``: at most c_k eps^2 / 2, 8e-6 N, off the simulator's);
it enters the load's accelerations and, differentiated exactly, its jerks. Each quadrotor's thrust
also balances the drag D_i on it, ``F_i = m_i (a_i - g) - t_i s_i - D_i``: frame drag per body
axis (same smoothed form) plus rotor drag linearized at the hover rotor speed, ``-4 k_d w_hover
v_perp`` (v_perp the velocity in the rotor plane). D_i is taken at the cable end's velocity (the
centre of gravity's, less the 3 cm arm's turning) in the body axes of the thrust without drag
(heading +x; drag of a few 0.01 N tilts them by a fraction of a degree); dF_i/dt includes its
exact derivative. Zero coefficients build exactly the drag-free model.
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from cableload_sim.params import AeroParams, SystemParams
from cableload_sim.physics.statics import rotor_drag_at_hover

# state layout
X_POS = 0
X_VEL = 3
X_QUAT = 6
X_RATE = 10
X_LOAD = 13
C_DIR = 0
C_RATE = 3
C_DRATE = 6
C_DDRATE = 9
C_TENSION = 12
C_DTENSION = 13
C_SIZE = 14
U_SIZE = 4  # per cable: d3r (3), d2t (1)
DRAG_SPEED_EPS = 0.01
"""Airspeed (m/s) below which the drag's |u| is smoothed, ``sqrt(u^2 + eps^2)``: keeps its
derivative continuous at u = 0 for the Newton steps."""


def state_size(n: int) -> int:
    return X_LOAD + C_SIZE * n


def cable_offset(i: int) -> int:
    return X_LOAD + C_SIZE * i


def _quat_to_rot(q):
    w, x, y, z = q[0], q[1], q[2], q[3]
    return ca.vertcat(
        ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        ca.horzcat(2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        ca.horzcat(2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )


def _quat_rate(q, w):
    """dq/dt = 0.5 q (x) (0, w), w in the body frame."""
    return 0.5 * ca.vertcat(
        -q[1] * w[0] - q[2] * w[1] - q[3] * w[2],
        q[0] * w[0] + q[2] * w[2] - q[3] * w[1],
        q[0] * w[1] - q[1] * w[2] + q[3] * w[0],
        q[0] * w[2] + q[1] * w[1] - q[2] * w[0],
    )


def _face_drag(coeff, u):
    """Quadratic drag ``-c_k |u_k| u_k`` per component of u (coeff c, 3), |u_k| smoothed."""
    return -ca.DM(coeff) * ca.sqrt(u * u + DRAG_SPEED_EPS**2) * u


def _heading_axes(z):
    """Body x and y axes of an attitude with thrust axis z heading +x (the controllers hold
    their heading)."""
    y_axis = ca.cross(z, ca.DM([1.0, 0.0, 0.0]))
    y_axis = y_axis / ca.sqrt(ca.sumsqr(y_axis))
    return ca.cross(y_axis, z), y_axis


@dataclass
class CableState:
    s: ca.SX
    r: ca.SX
    dr: ca.SX
    ddr: ca.SX
    t: ca.SX
    dt: ca.SX


class LoadCableModel:
    """Symbolic model of one multi-lift system as the teacher sees it (nominal parameters;
    ``aero`` the drag it knows, none when None)."""

    def __init__(self, system: SystemParams, aero: AeroParams | None = None):
        self.system = system
        self.aero = aero
        self.n = system.n_uavs
        self.nx = state_size(self.n)
        self.nu = U_SIZE * self.n
        self.mass = system.load.mass
        self.inertia = system.load.inertia_matrix()
        self.rho = system.attachment_array()
        self.lengths = np.array([c.length for c in system.cables])
        self.compliance = np.array([1.0 / c.stiffness for c in system.cables])  # m/N
        self.uav_mass = np.array([q.mass for q in system.quadrotors])
        self.uav_attach = np.array([q.attachment for q in system.quadrotors])
        self.g = np.array([0.0, 0.0, -system.gravity])
        self._load_drag = self._load_drag_functions(aero)
        self._quad_drag = self._quad_drag_functions(aero)
        x = ca.SX.sym("x", self.nx)
        u = ca.SX.sym("u", self.nu)
        self.x_sym, self.u_sym = x, u
        self.f = ca.Function("f", [x, u], [self._dynamics(x, u)], ["x", "u"], ["xdot"])
        outputs = self.quad_outputs(x)
        self.outputs = ca.Function(
            "outputs", [x], list(outputs), ["x"], ["p", "v", "a", "j", "thrust", "rates"]
        )
        self.positions_thrusts = ca.Function(
            "positions_thrusts", [x], list(self.positions_thrusts_of(x)), ["x"], ["p", "thrust"]
        )

    # -- drag -----------------------------------------------------------------------------------

    def _load_drag_functions(self, aero: AeroParams | None):
        """None without load drag; else (drag, rate): drag(v, q, w) the drag's force (world)
        and torque (body) on the load, rate(v, q, w, a, alpha) their exact time derivatives."""
        if aero is None or aero.load_drag_coeff == 0.0:
            return None
        v, w, a, alpha = (ca.SX.sym(name, 3) for name in ("v", "w", "a", "alpha"))
        q = ca.SX.sym("q", 4)
        R = _quat_to_rot(q)
        centre = np.asarray(self.system.load.box_centre, dtype=float)
        u = ca.mtimes(R.T, v)
        if np.any(centre):  # the box's centre off the centre of mass
            u = u + ca.cross(w, ca.DM(centre))
        faces = _face_drag(aero.load_drag(self.system.load), u)
        force = ca.mtimes(R, faces)
        torque = ca.cross(ca.DM(centre), faces) if np.any(centre) else ca.DM.zeros(3)
        wrench = ca.vertcat(force, torque)
        rate = (
            ca.mtimes(ca.jacobian(wrench, v), a)
            + ca.mtimes(ca.jacobian(wrench, q), _quat_rate(q, w))
            + ca.mtimes(ca.jacobian(wrench, w), alpha)
        )
        drag = ca.Function("load_drag", [v, q, w], [force, torque])
        drag_rate = ca.Function("load_drag_rate", [v, q, w, a, alpha], [rate[:3], rate[3:]])
        return drag, drag_rate

    def _quad_drag_functions(self, aero: AeroParams | None):
        """None without quadrotor drag; else (drag, rate, rotor): drag(v, F, k) the drag
        (world) on a quadrotor moving at v whose thrust is F (its attitude: thrust axis along F,
        heading +x), k its linearized rotor drag (kg/s); rate(v, F, k, a, dF) its exact time
        derivative; rotor (n,) each quadrotor's k, 4 k_d w_hover (w_hover its rotor speed at
        the system's hover)."""
        if aero is None or not (any(aero.quadrotor_drag) or aero.rotor_drag_coeff > 0.0):
            return None
        v, F, a, dF = (ca.SX.sym(name, 3) for name in ("v", "F", "a", "dF"))
        k = ca.SX.sym("k")
        z = F / ca.sqrt(ca.sumsqr(F))
        x_axis, y_axis = _heading_axes(z)
        axes = ca.horzcat(x_axis, y_axis, z)  # body to world
        u = ca.mtimes(axes.T, v)
        frame = _face_drag(aero.quadrotor_drag, u)
        drag = ca.mtimes(axes, frame) - k * (x_axis * u[0] + y_axis * u[1])
        rate = ca.mtimes(ca.jacobian(drag, v), a) + ca.mtimes(ca.jacobian(drag, F), dF)
        return (
            ca.Function("quad_drag", [v, F, k], [drag]),
            ca.Function("quad_drag_rate", [v, F, k, a, dF], [rate]),
            rotor_drag_at_hover(self.system, aero),
        )

    # -- pieces -------------------------------------------------------------------------------

    def cables(self, x) -> list[CableState]:
        out = []
        for i in range(self.n):
            o = cable_offset(i)
            out.append(
                CableState(
                    s=x[o + C_DIR : o + C_DIR + 3],
                    r=x[o + C_RATE : o + C_RATE + 3],
                    dr=x[o + C_DRATE : o + C_DRATE + 3],
                    ddr=x[o + C_DDRATE : o + C_DDRATE + 3],
                    t=x[o + C_TENSION],
                    dt=x[o + C_DTENSION],
                )
            )
        return out

    def load_accelerations(self, x):
        """Load acceleration (world) and angular acceleration (body) at state x."""
        q = x[X_QUAT : X_QUAT + 4]
        w = x[X_RATE : X_RATE + 3]
        R = _quat_to_rot(q)
        J = ca.DM(self.inertia)
        force = ca.DM(self.mass * self.g)
        torque = -ca.cross(w, ca.mtimes(J, w))
        for i, c in enumerate(self.cables(x)):
            force = force - c.t * c.s
            torque = torque + c.t * ca.cross(ca.mtimes(R.T, c.s), ca.DM(self.rho[i]))
        if self._load_drag is not None:
            drag_force, drag_torque = self._load_drag[0](x[X_VEL : X_VEL + 3], q, w)
            force = force + drag_force
            torque = torque + drag_torque
        return force / self.mass, ca.solve(J, torque)

    def load_jerks(self, x, accelerations=None):
        """Time derivatives of the load acceleration (world) and angular acceleration (body)
        (``accelerations``: those of ``load_accelerations``, computed when None)."""
        q = x[X_QUAT : X_QUAT + 4]
        w = x[X_RATE : X_RATE + 3]
        R = _quat_to_rot(q)
        J = ca.DM(self.inertia)
        acc, alpha = self.load_accelerations(x) if accelerations is None else accelerations
        dforce = ca.DM.zeros(3)
        dtorque = -ca.cross(alpha, ca.mtimes(J, w)) - ca.cross(w, ca.mtimes(J, alpha))
        if self._load_drag is not None:
            drag_dforce, drag_dtorque = self._load_drag[1](x[X_VEL : X_VEL + 3], q, w, acc, alpha)
            dforce = dforce + drag_dforce
            dtorque = dtorque + drag_dtorque
        for i, c in enumerate(self.cables(x)):
            s_dot = ca.cross(c.r, c.s)
            dforce = dforce - c.dt * c.s - c.t * s_dot
            s_body = ca.mtimes(R.T, c.s)
            s_body_dot = -ca.cross(w, s_body) + ca.mtimes(R.T, s_dot)
            rho = ca.DM(self.rho[i])
            dtorque = dtorque + c.dt * ca.cross(s_body, rho) + c.t * ca.cross(s_body_dot, rho)
        return dforce / self.mass, ca.solve(J, dtorque)

    def _dynamics(self, x, u):
        v = x[X_VEL : X_VEL + 3]
        q = x[X_QUAT : X_QUAT + 4]
        w = x[X_RATE : X_RATE + 3]
        acc, alpha = self.load_accelerations(x)
        parts = [v, acc, _quat_rate(q, w), alpha]
        for i, c in enumerate(self.cables(x)):
            d3r = u[U_SIZE * i : U_SIZE * i + 3]
            d2t = u[U_SIZE * i + 3]
            parts += [ca.cross(c.r, c.s), c.dr, c.ddr, d3r, c.dt, d2t]
        return ca.vertcat(*parts)

    def load_kinematics(self, x):
        """The load's acceleration, angular acceleration and their derivatives at state x, one
        12-vector (the argument ``kinematics`` of ``quad_outputs`` and ``positions_thrusts_of``
        takes it): what couples every quadrotor's outputs to every cable."""
        accelerations = self.load_accelerations(x)
        return ca.vertcat(*accelerations, *self.load_jerks(x, accelerations))

    def _load_motion(self, x, kinematics=None):
        """The load's position, velocity, body rates, rotation matrix, acceleration and angular
        acceleration in state ``x`` (the last two from ``kinematics`` when given)."""
        p = x[X_POS : X_POS + 3]
        v = x[X_VEL : X_VEL + 3]
        w = x[X_RATE : X_RATE + 3]
        R = _quat_to_rot(x[X_QUAT : X_QUAT + 4])
        if kinematics is None:
            acc, alpha = self.load_accelerations(x)
        else:
            acc, alpha = kinematics[0:3], kinematics[3:6]
        return p, v, w, R, acc, alpha

    def positions_thrusts_of(self, x, kinematics=None):
        """Centres of gravity of the quadrotors (n x 3) and their thrust vectors (n x 3): what
        the path constraints need, as ``outputs`` has them, without its jerk-level terms
        (``kinematics``: the load's, as ``load_kinematics`` gives them; computed when None)."""
        p, v, w, R, acc, alpha = self._load_motion(x, kinematics)
        ends, thrusts = [], []
        for i, c in enumerate(self.cables(x)):
            rho = ca.DM(self.rho[i])
            s1 = ca.cross(c.r, c.s)
            s2 = ca.cross(c.dr, c.s) + ca.cross(c.r, s1)
            arm_a = ca.mtimes(R, ca.cross(alpha, rho) + ca.cross(w, ca.cross(w, rho)))
            length = float(self.lengths[i]) + float(self.compliance[i]) * c.t
            end_a = acc + arm_a - length * s2 - 2.0 * float(self.compliance[i]) * c.dt * s1
            thrust = self.uav_mass[i] * (end_a - ca.DM(self.g)) - c.t * c.s
            if self._quad_drag is not None:
                end_v = (
                    v + ca.mtimes(R, ca.cross(w, rho)) - length * s1 - float(self.compliance[i]) * c.dt * c.s
                )
                thrust = thrust - self._quad_drag[0](end_v, thrust, self._quad_drag[2][i])
            end_p = p + ca.mtimes(R, rho) - length * c.s
            ends.append((end_p - self._attachment_arm(i, thrust)).T)
            thrusts.append(thrust.T)
        return ca.vertcat(*ends), ca.vertcat(*thrusts)

    def quad_outputs(self, x, kinematics=None):
        """Per quadrotor (stacked as n x 3 each): centre-of-gravity position, velocity,
        acceleration, jerk (world); thrust vector (world); body rates (body, zero yaw rate)
        (``kinematics``: the load's, as ``load_kinematics`` gives them; computed when None)."""
        p, v, w, R, acc, alpha = self._load_motion(x, kinematics)
        if kinematics is None:
            jerk, dalpha = self.load_jerks(x, (acc, alpha))
        else:
            jerk, dalpha = kinematics[6:9], kinematics[9:12]
        rows = {k: [] for k in ("p", "v", "a", "j", "thrust", "rates")}
        for i, c in enumerate(self.cables(x)):
            rho = ca.DM(self.rho[i])
            # the cable stretched by its tension (the simulator's cables are springs): its
            # length and rate; the tension's second derivative (an input) is left out of a
            stretch_rate = float(self.compliance[i]) * c.dt
            length = float(self.lengths[i]) + float(self.compliance[i]) * c.t
            # rotating arm R rho and its derivatives (body-frame angular quantities)
            w_r = ca.cross(w, rho)
            arm_v = ca.mtimes(R, w_r)
            arm_a_body = ca.cross(alpha, rho) + ca.cross(w, w_r)
            arm_a = ca.mtimes(R, arm_a_body)
            arm_j = ca.mtimes(
                R,
                ca.cross(w, arm_a_body)
                + ca.cross(dalpha, rho)
                + ca.cross(alpha, w_r)
                + ca.cross(w, ca.cross(alpha, rho)),
            )
            # cable direction and its derivatives
            s1 = ca.cross(c.r, c.s)
            s2 = ca.cross(c.dr, c.s) + ca.cross(c.r, s1)
            s3 = ca.cross(c.ddr, c.s) + 2 * ca.cross(c.dr, s1) + ca.cross(c.r, s2)
            end_p = p + ca.mtimes(R, rho) - length * c.s
            end_v = v + arm_v - length * s1 - stretch_rate * c.s
            end_a = acc + arm_a - length * s2 - 2.0 * stretch_rate * s1
            end_j = jerk + arm_j - length * s3 - 3.0 * stretch_rate * s2
            thrust = self.uav_mass[i] * (end_a - ca.DM(self.g)) - c.t * c.s
            dthrust = self.uav_mass[i] * end_j - c.dt * c.s - c.t * s1
            if self._quad_drag is not None:  # the thrust also balances the drag
                drag, drag_rate, rotor = self._quad_drag
                dthrust = dthrust - drag_rate(end_v, thrust, rotor[i], end_a, dthrust)
                thrust = thrust - drag(end_v, thrust, rotor[i])
            norm = ca.sqrt(ca.sumsqr(thrust))
            z = thrust / norm
            w_world = ca.cross(z, dthrust) / norm  # the thrust axis turns at this rate
            # body rates fed forward: the same without the load's angular jerk, the model's
            # most fragile prediction (it rests on tension rates that position-controlled
            # quadrotors do not realize); fed forward to the attitude loops, it drives the load's
            # weakly restored rotations about the cables' apex unstable with more than three
            # cables (measured with six: a yaw oscillation growing 2.7 times each second)
            w_feed = ca.cross(z, dthrust - self.uav_mass[i] * ca.mtimes(R, ca.cross(dalpha, rho)))
            w_feed = w_feed / norm
            x_axis, y_axis = _heading_axes(z)
            rates = ca.vertcat(ca.dot(x_axis, w_feed), ca.dot(y_axis, w_feed), 0.0)
            # centre of gravity: the attachment offset turned with the quadrotor's attitude
            # (tilts of 30 degrees and more in wide formations move it by 1.5 cm); p and v
            # exact for an attachment on the thrust axis, the angular acceleration's terms left
            # out of a (0.03 m times a few rad/s^2) and of the jerk
            arm = self._attachment_arm(i, thrust)
            turn = ca.cross(w_world, arm)
            rows["p"].append((end_p - arm).T)
            rows["v"].append((end_v - turn).T)
            rows["a"].append((end_a - ca.cross(w_world, turn)).T)
            rows["j"].append(end_j.T)
            rows["thrust"].append(thrust.T)
            rows["rates"].append(rates.T)
        return tuple(ca.vertcat(*rows[k]) for k in ("p", "v", "a", "j", "thrust", "rates"))

    def _attachment_arm(self, i: int, thrust):
        """The cable's attachment point on quadrotor i relative to its centre of gravity
        (world), for an attitude with thrust axis along ``thrust`` heading +x."""
        z = thrust / ca.sqrt(ca.sumsqr(thrust))
        x_axis, y_axis = _heading_axes(z)
        r = self.uav_attach[i]
        return x_axis * float(r[0]) + y_axis * float(r[1]) + z * float(r[2])

    # -- integration --------------------------------------------------------------------------

    def step_function(self, substeps: int = 1) -> ca.Function:
        """x_next = step(x, u, dt): RK4 with ``substeps`` steps, then q and every s_i
        renormalized (keeps |s_i| = 1 and |q| = 1 exactly)."""
        x = ca.SX.sym("x", self.nx)
        u = ca.SX.sym("u", self.nu)
        dt = ca.SX.sym("dt")
        h = dt / substeps
        xk = x
        for _ in range(substeps):
            k1 = self.f(xk, u)
            k2 = self.f(xk + 0.5 * h * k1, u)
            k3 = self.f(xk + 0.5 * h * k2, u)
            k4 = self.f(xk + h * k3, u)
            xk = xk + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        parts = [xk[X_POS:X_QUAT]]
        qk = xk[X_QUAT : X_QUAT + 4]
        parts += [qk / ca.sqrt(ca.sumsqr(qk)), xk[X_RATE:X_LOAD]]
        for i in range(self.n):
            o = cable_offset(i)
            s = xk[o + C_DIR : o + C_DIR + 3]
            parts += [s / ca.sqrt(ca.sumsqr(s)), xk[o + C_RATE : o + C_SIZE]]
        return ca.Function("step", [x, u, dt], [ca.vertcat(*parts)], ["x", "u", "dt"], ["xn"])
