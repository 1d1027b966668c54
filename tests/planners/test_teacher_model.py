"""The teacher's load-cable model: dynamics against the simulator, exact kinematics and
flatness, the centre of gravity of a tilted quadrotor, constraint functions on hand-computed
cases, the formation prior. Symbolic only: nothing is compiled."""

from __future__ import annotations

import dataclasses

import casadi as ca
import numpy as np
import pytest

from backends import make_backend
from backends.base import Scenario
from cableload_sim.params import AeroParams, TeacherParams, load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.disturbances import WrenchDisturbance
from cableload_sim.physics.statics import hover_geometry
from cableload_sim.rotations import quat_to_matrix
from planners.teacher_model import (
    C_DIR,
    C_DTENSION,
    C_RATE,
    C_TENSION,
    DRAG_SPEED_EPS,
    X_LOAD,
    X_POS,
    X_QUAT,
    X_RATE,
    X_VEL,
    LoadCableModel,
    cable_offset,
)
from planners.teacher_ocp import (
    chained_constraint_jacobian,
    constraint_functions,
    constraints_and_jacobian,
    formation_prior,
    path_constraints,
)


def ocp_state(state, n):
    x = np.zeros(13 + 14 * n)
    x[X_POS : X_POS + 3] = state.load_p
    x[X_VEL : X_VEL + 3] = state.load_v
    x[X_QUAT : X_QUAT + 4] = state.load_q
    x[X_RATE:X_LOAD] = state.load_omega
    for i in range(n):
        o = cable_offset(i)
        x[o + C_DIR : o + C_DIR + 3] = -state.cable_dir[i]
        x[o + C_TENSION] = state.cable_tension[i]
    return x


PAPER_DRAG = AeroParams(load_drag_coeff=1.05, quadrotor_drag=(0.005, 0.005, 0.01), rotor_drag_coeff=5.0e-5)
"""The drag paper.toml sets (stated here so the tests do not follow a config edit)."""


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_load_dynamics_match_the_simulator_when_taut(n):
    """Same state, same tensions: the teacher's load accelerations equal the simulator's, the
    load's drag included (still air; the whole system moving at 1.5 m/s more, which leaves the
    cables' damping alone, so the drag matters). The teacher smooths |u| in the drag, which puts
    each face's at most c_k eps^2 / 2 off the simulator's (|c| eps^2 / 2 together)."""
    config = dataclasses.replace(load_config(uavs=n), aero=PAPER_DRAG)
    backend = make_backend("embedded", config)
    backend.reset(
        Scenario(
            load_p=np.array([0.0, 0.0, 1.0]),
            load_q=np.array([1.0, 0, 0, 0]),
            seed=n,
            disturbance=WrenchDisturbance(4.0, 0.4),
        )
    )
    model = LoadCableModel(config.system, config.aero)
    bare = LoadCableModel(config.system)
    sim = backend.sim
    gust = np.array([1.2, -0.8, 0.4])
    smoothing = np.linalg.norm(PAPER_DRAG.load_drag(config.system.load)) * DRAG_SPEED_EPS**2 / 2
    tolerance = 1e-9 + smoothing / config.system.load.mass
    checked = 0
    for _ in range(20):  # disturbed hover: the load swings and turns
        backend.advance()
        state = backend.observe()
        if np.any(state.cable_tension <= 0.0):
            continue
        x = sim.x.copy()
        x[layout.LOAD_VEL : layout.LOAD_VEL + 3] += gust
        for i in range(n):
            o = layout.quad_offset(i) + layout.QUAD_VEL
            x[o : o + 3] += gust
        xo = ocp_state(state, n)
        xo[X_VEL : X_VEL + 3] = x[layout.LOAD_VEL : layout.LOAD_VEL + 3]
        acc, alpha = model.load_accelerations(xo)
        R = np.empty((n + 1, 9))
        force = np.empty((n + 1, 3))
        torque = np.empty((n + 1, 3))
        tension = np.empty(n)
        kernels.compute_forces(x, sim.model, n, np.zeros(6), R, force, torque, tension)
        np.testing.assert_allclose(tension, state.cable_tension, rtol=1e-12)
        J = config.system.load.inertia_matrix()
        w = state.load_omega
        sim_alpha = np.linalg.solve(J, torque[0] - np.cross(w, J @ w))
        sim_acc = force[0] / config.system.load.mass
        np.testing.assert_allclose(np.array(acc).ravel(), sim_acc, rtol=0, atol=tolerance)
        np.testing.assert_allclose(np.array(alpha).ravel(), sim_alpha, rtol=1e-9, atol=1e-9)
        assert np.linalg.norm(w) > 1e-3  # the comparison is not trivial
        drag = np.array(acc).ravel() - np.array(bare.load_accelerations(xo)[0]).ravel()
        assert np.linalg.norm(drag) > 1e3 * tolerance  # nor is the drag's part of it
        checked += 1
    assert checked >= 10


def random_ocp_state(rng, model):
    x = np.zeros(model.nx)
    x[X_POS : X_POS + 3] = [0.0, 0.0, 1.0]
    x[X_VEL : X_VEL + 3] = rng.normal(scale=0.5, size=3)
    q = np.concatenate([[1.0], rng.normal(scale=0.1, size=3)])
    x[X_QUAT : X_QUAT + 4] = q / np.linalg.norm(q)
    x[X_RATE:X_LOAD] = rng.normal(scale=0.3, size=3)
    for i in range(model.n):
        o = cable_offset(i)
        s = np.array([*rng.normal(scale=0.3, size=2), -1.0])
        x[o + C_DIR : o + C_DIR + 3] = s / np.linalg.norm(s)
        x[o + C_RATE : o + C_TENSION] = rng.normal(scale=0.3, size=9)
        x[o + C_TENSION] = 5.0 + rng.normal()
        x[o + C_DTENSION] = rng.normal()
    return x


def without_attachment_offset(system):
    """The system with each cable tied at its quadrotor's centre of gravity."""
    quads = tuple(dataclasses.replace(q, attachment=(0.0, 0.0, 0.0)) for q in system.quadrotors)
    return dataclasses.replace(system, quadrotors=quads)


@pytest.mark.parametrize("n, aero", [(2, None), (3, None), (5, None), (3, PAPER_DRAG)])
def test_kinematics_and_flatness_match_finite_differences(n, aero):
    """Along the model's own motion (tension held at constant rate: its second derivative, an
    input, is the one term the stretch's acceleration leaves out), the cable's end on each
    quadrotor has velocity, acceleration and jerk the time derivatives of its position,
    velocity and acceleration, stretch included; the thrust axis turns as the rate of the thrust
    says, and the body rates fed forward turn it so without the load's angular jerk. With drag:
    the load's jerk and the thrust's rate include the drag's exact derivatives."""
    rng = np.random.default_rng(n)
    model = LoadCableModel(without_attachment_offset(load_config(uavs=n).system), aero)
    step = model.step_function(1)
    jerks = ca.Function("jerks", [model.x_sym], list(model.load_jerks(model.x_sym)))
    h = 1e-4
    for _ in range(3):
        x = random_ocp_state(rng, model)
        u = rng.normal(size=model.nu)
        u[3::4] = 0.0  # d2t
        xs = [x]
        for _ in range(2):
            xs.append(np.array(step(xs[-1], u, h)).ravel())
        outs = [[np.array(o) for o in model.outputs(xx)] for xx in xs]
        p, v, a, j, thrust, rates = (np.array([o[k] for o in outs]) for k in range(6))
        scale = 1.0 + np.abs(j[1]).max()
        np.testing.assert_allclose((p[2] - p[0]) / (2 * h), v[1], atol=1e-6 * scale)
        np.testing.assert_allclose((v[2] - v[0]) / (2 * h), a[1], atol=1e-5 * scale)
        np.testing.assert_allclose((a[2] - a[0]) / (2 * h), j[1], atol=1e-4 * scale)
        z = thrust / np.linalg.norm(thrust, axis=-1, keepdims=True)
        z_dot = (z[2] - z[0]) / (2 * h)
        R_load = quat_to_matrix(xs[1][X_QUAT : X_QUAT + 4])
        dalpha = np.array(jerks(xs[1])[1]).ravel()
        for i in range(n):
            y_axis = np.cross(z[1, i], [1.0, 0.0, 0.0])
            y_axis /= np.linalg.norm(y_axis)
            x_axis = np.cross(y_axis, z[1, i])
            R = np.column_stack([x_axis, y_axis, z[1, i]])
            left_out = model.uav_mass[i] * R_load @ np.cross(dalpha, model.rho[i])
            left_out = (left_out - z[1, i] * (z[1, i] @ left_out)) / np.linalg.norm(thrust[1, i])
            predicted = R @ np.cross(rates[1, i], [0.0, 0.0, 1.0])
            np.testing.assert_allclose(predicted, z_dot[i] - left_out, atol=1e-6 * (1 + np.abs(z_dot).max()))
            assert rates[1, i, 2] == 0.0  # zero yaw rate by construction


def test_centre_of_gravity_sits_above_the_attachment_along_the_thrust_axis():
    """A tilted quadrotor's centre of gravity is its attachment point moved 3 cm along its
    thrust axis (not straight up); its velocity is that point's rate of change."""
    rng = np.random.default_rng(7)
    system = load_config().system
    model = LoadCableModel(system)
    bare = LoadCableModel(without_attachment_offset(system))
    step = model.step_function(1)
    h = 1e-5
    x = random_ocp_state(rng, model)
    u = rng.normal(size=model.nu)
    u[3::4] = 0.0
    p, v, _, _, thrust, _ = (np.array(o) for o in model.outputs(x))
    end = np.array(bare.outputs(x)[0])
    z = thrust / np.linalg.norm(thrust, axis=1, keepdims=True)
    offset = -np.array(system.quadrotors[0].attachment)[2]  # 0.03 m below
    np.testing.assert_allclose(p, end + offset * z, atol=1e-12)
    assert np.degrees(np.arccos(z[:, 2])).max() > 5.0  # the test state is tilted
    p_next = np.array(model.outputs(np.array(step(x, u, h)).ravel())[0])
    p_prev = np.array(model.outputs(np.array(step(x, u, -h)).ravel())[0])
    np.testing.assert_allclose((p_next - p_prev) / (2 * h), v, atol=1e-5 * (1 + np.abs(v).max()))


def test_step_keeps_unit_directions_and_quaternion():
    model = LoadCableModel(load_config().system)
    x = random_ocp_state(np.random.default_rng(0), model)
    xn = np.array(model.step_function(1)(x, np.ones(model.nu), 0.18)).ravel()
    assert np.linalg.norm(xn[X_QUAT : X_QUAT + 4]) == pytest.approx(1.0, abs=1e-12)
    for i in range(model.n):
        o = cable_offset(i)
        assert np.linalg.norm(xn[o : o + 3]) == pytest.approx(1.0, abs=1e-12)


def test_positions_and_thrusts_at_hover_by_hand():
    """Level load at rest, cables along the hover cone with the static tensions: each cable's
    end sits at p + rho_i + (l + t_i / k) u_i (stretched), each thrust is m_i g e_z + t_i u_i
    (pulled down the cable) and each centre of gravity sits 3 cm from the cable's end along the
    thrust, by hand."""
    config = load_config()
    system = config.system
    model = LoadCableModel(system)
    geometry = hover_geometry(system)
    x = np.zeros(model.nx)
    x[X_POS : X_POS + 3] = [1.0, 2.0, 1.5]
    x[X_QUAT] = 1.0
    for i in range(3):
        o = cable_offset(i)
        x[o : o + 3] = -geometry.directions[i]  # from the quadrotor to the load
        x[o + C_TENSION] = geometry.tensions[i]
    p, thrust = (np.array(v) for v in model.positions_thrusts(x))
    acc, alpha = model.load_accelerations(x)
    np.testing.assert_allclose(np.array(acc).ravel(), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.array(alpha).ravel(), 0.0, atol=1e-12)
    for i in range(3):
        u = geometry.directions[i]
        t = geometry.tensions[i]
        expected_end = (
            np.array([1.0, 2.0, 1.5]) + np.array(system.load.attachments[i]) + (1.0 + t / 5000.0) * u
        )
        expected_thrust = 0.6 * 9.81 * np.array([0, 0, 1.0]) + t * u
        np.testing.assert_allclose(thrust[i], expected_thrust, atol=1e-12)
        axis = expected_thrust / np.linalg.norm(expected_thrust)
        np.testing.assert_allclose(p[i], expected_end + 0.03 * axis, atol=1e-12)


def test_drag_in_the_accelerations_and_thrusts_by_hand():
    """The hover state of the paper's system moving bodily at 1.5 m/s along x in still air:
    the load decelerates by its faces' drag over its mass; each quadrotor's thrust is the
    drag-free one (m_i g e_z + t_i u_i plus m_i times the load's deceleration) less the drag on
    it: frame drag along the body axes of that thrust (heading +x) and rotor drag 4 k_d w_hover
    times the velocity in the rotor plane, w_hover from the hover thrust, by hand."""
    system = load_config().system
    model = LoadCableModel(system, PAPER_DRAG)
    geometry = hover_geometry(system)
    speed = np.array([1.5, 0.0, 0.0])
    x = np.zeros(model.nx)
    x[X_VEL : X_VEL + 3] = speed
    x[X_QUAT] = 1.0
    for i in range(3):
        o = cable_offset(i)
        x[o : o + 3] = -geometry.directions[i]
        x[o + C_TENSION] = geometry.tensions[i]
    eps = DRAG_SPEED_EPS
    faces = 0.5 * 1.225 * 1.05 * np.array([0.45 * 0.15, 0.54 * 0.15, 0.54 * 0.45])
    load_drag = -faces * np.sqrt(speed**2 + eps**2) * speed
    acc, alpha = (np.array(v).ravel() for v in model.load_accelerations(x))
    np.testing.assert_allclose(acc, load_drag / 1.4, atol=1e-12)
    np.testing.assert_allclose(alpha, 0.0, atol=1e-12)
    _, thrust = (np.array(v) for v in model.positions_thrusts(x))
    for i in range(3):
        u, t = geometry.directions[i], geometry.tensions[i]
        free = 0.6 * (load_drag / 1.4 + [0.0, 0.0, 9.81]) + t * u
        z = free / np.linalg.norm(free)
        y_axis = np.cross(z, [1.0, 0.0, 0.0])
        y_axis /= np.linalg.norm(y_axis)
        axes = np.column_stack([np.cross(y_axis, z), y_axis, z])
        body = axes.T @ speed
        frame = axes @ (-np.array([0.005, 0.005, 0.01]) * np.sqrt(body**2 + eps**2) * body)
        w_hover = np.sqrt(np.linalg.norm(0.6 * 9.81 * np.array([0, 0, 1.0]) + t * u) / (4 * 8.0e-7))
        rotor = -4 * 5.0e-5 * w_hover * (speed - z * (z @ speed))
        np.testing.assert_allclose(thrust[i], free - frame - rotor, atol=1e-12)
        assert np.linalg.norm(rotor) > 0.4  # 0.35 kg/s times 1.5 m/s: not negligible
    np.testing.assert_allclose(np.array(model.outputs(x)[4]), thrust, atol=1e-12)


def test_constraints_by_hand():
    """Two quadrotors on vertical cables each carrying half the load (so it does not
    accelerate), with bounds set so each constraint is violated by a hand-computed amount:
    tension 6.867 N against [7.0, 15] and [0.5, 6.8]; thrust m g + t = 12.753 N against a 10 N
    maximum and a 13 N minimum; centres of gravity as far apart as the attachment points (about
    0.64 m) against the default separation (0.8 m) and its 2 cm margin, in 0.1 m units. Each
    value is the constraint's margin: negative by exactly the violation."""
    system = load_config(uavs=2).system
    model = LoadCableModel(system)
    x = np.zeros(model.nx)
    x[X_QUAT] = 1.0
    half = 1.4 * 9.81 / 2
    for i in range(2):
        o = cable_offset(i)
        x[o : o + 3] = [0.0, 0.0, -1.0]
        x[o + C_TENSION] = half
    acc, alpha = model.load_accelerations(x)
    np.testing.assert_allclose(np.array(acc).ravel(), 0.0, atol=1e-12)
    rho = system.attachment_array()
    distance = np.linalg.norm(rho[0] - rho[1])
    thrust = 0.6 * 9.81 + half
    for params, expected in [
        (
            TeacherParams(tension_min=7.0, tension_max=15.0, thrust_margin=0.5),
            [half - 7.0, 15.0 - half, 10.0 - thrust, thrust - 1.0],
        ),
        (
            TeacherParams(tension_min=0.5, tension_max=6.8, thrust_margin=0.9),
            [half - 0.5, 6.8 - half, 18.0 - thrust, thrust - 1.0],
        ),
        (
            TeacherParams(thrust_min=13.0, thrust_margin=0.9),
            [half - 0.5, 15.0 - half, 18.0 - thrust, thrust - 13.0],
        ),
    ]:
        h = np.array(path_constraints(model, params, x)).ravel()
        np.testing.assert_allclose(h[0:4], expected, atol=1e-9)
        np.testing.assert_allclose(h[4:8], expected, atol=1e-9)
        assert h[8] == pytest.approx((distance - params.min_distance - params.separation_margin) / 0.1)
        assert h[8] < 0.0
    relaxed = TeacherParams(min_distance=0.5, separation_margin=0.0)
    assert np.array(path_constraints(model, relaxed, x)).ravel()[8] == pytest.approx((distance - 0.5) / 0.1)


@pytest.mark.parametrize("n", [3, 6])
def test_formation_prior_balances_the_load_and_keeps_the_cone(n):
    """The prior's tensions and directions supply exactly the force the load's acceleration
    needs, m (a - g), with the hover cone's shape (angles between cables) kept."""
    system = load_config(uavs=n).system
    geometry = hover_geometry(system)
    q = np.array([[1.0, 0.0, 0.0, 0.0], [np.cos(0.3), 0.0, 0.0, np.sin(0.3)]])
    acceleration = np.array([[2.0, -1.0, 0.5], [-3.0, 0.0, -1.0]])
    directions, tensions = formation_prior(system, geometry, q, acceleration)
    force = np.einsum("kn,kna->ka", tensions, directions)
    np.testing.assert_allclose(force, 1.4 * (acceleration + [0.0, 0.0, 9.81]), atol=1e-9)
    for k in range(2):
        np.testing.assert_allclose(
            directions[k] @ directions[k].T, geometry.directions @ geometry.directions.T, atol=1e-12
        )


def test_quaternion_rotation_helper_matches_rotations_module():
    from planners.teacher_model import _quat_to_rot

    q = np.array([0.9, 0.1, -0.3, 0.2])
    q /= np.linalg.norm(q)
    np.testing.assert_allclose(np.array(ca.DM(_quat_to_rot(ca.DM(q)))), quat_to_matrix(q), atol=1e-15)


@pytest.mark.parametrize("n", [3, 4, 6])
def test_the_cables_weigh_as_much_against_the_load_for_any_number(n):
    """``cable_weights_for``: each per-cable weight scaled by 3/n, so the cables' sum of
    regularization (directions, rates, tensions, inputs) is what three cables have; the load's
    tracking weights do not change; 0 counts them per cable."""
    from planners.teacher_ocp import input_weights, residual_weights

    params = TeacherParams()
    three, many = residual_weights(params, 3) ** 2, residual_weights(params, n) ** 2
    np.testing.assert_allclose(many[:4], three[:4])
    np.testing.assert_allclose(n * many[4:], 3 * three[4:])
    np.testing.assert_allclose(input_weights(params, n).sum(), input_weights(params, 3).sum())
    per_cable = dataclasses.replace(params, cable_weights_for=0)
    np.testing.assert_allclose(residual_weights(per_cable, n) ** 2, three)
    np.testing.assert_allclose(input_weights(per_cable, n)[:4], input_weights(params, 3)[:4])


@pytest.mark.parametrize("n, drag", [(3, False), (4, True), (6, True)])
def test_constraint_jacobian_by_the_chain_rule_equals_the_direct_one(n, drag):
    """The chain rule through the quadrotors' points and the load's kinematics gives the
    same constraints and the same Jacobian as differentiating them whole (at random states
    near hover, between nodes: both sets of separations); of the two graphs the one with
    fewer operations is taken, and for six quadrotors with drag the chain rule's has less than
    half of the other's."""
    model = LoadCableModel(load_config(uavs=n).system, PAPER_DRAG if drag else None)
    x = ca.SX.sym("x", model.nx)
    h = constraint_functions(model, x, -0.05)
    direct = ca.Function("direct", [x], [h, ca.jacobian(h, x)])
    chained = ca.Function("chained", [x], list(chained_constraint_jacobian(model, x, -0.05)))
    chosen = ca.Function("chosen", [x], list(constraints_and_jacobian(model, x, -0.05)))
    rng = np.random.default_rng(n)
    hover = hover_geometry(model.system)
    for _ in range(3):
        value = np.zeros(model.nx)
        value[X_POS : X_POS + 3] = rng.normal(size=3)
        value[X_VEL : X_VEL + 3] = rng.normal(size=3)
        q0 = np.array([1.0, *(0.05 * rng.normal(size=3))])
        value[X_QUAT : X_QUAT + 4] = q0 / np.linalg.norm(q0)
        value[X_RATE:X_LOAD] = 0.3 * rng.normal(size=3)
        for i in range(n):
            o = cable_offset(i)
            s = hover.directions[i] + 0.05 * rng.normal(size=3)
            value[o + C_DIR : o + C_DIR + 3] = s / np.linalg.norm(s)
            value[o + C_RATE : o + C_RATE + 9] = 0.5 * rng.normal(size=9)
            value[o + C_TENSION] = hover.tensions[i] * (1.0 + 0.2 * rng.normal())
            value[o + C_DTENSION] = rng.normal()
        h_direct, dh_direct = (np.array(v) for v in direct(value))
        h_chained, dh_chained = (np.array(v) for v in chained(value))
        np.testing.assert_allclose(h_chained, h_direct, rtol=1e-12, atol=1e-12)
        scale = np.abs(dh_direct).max()
        np.testing.assert_allclose(dh_chained, dh_direct, rtol=1e-9, atol=1e-11 * scale)
    cheaper = min(direct.n_instructions(), chained.n_instructions())
    assert chosen.n_instructions() == cheaper
    if n == 6:
        assert chained.n_instructions() < direct.n_instructions() / 2
