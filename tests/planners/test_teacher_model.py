"""The teacher's load-cable model: dynamics against the simulator, exact kinematics and
flatness, constraint functions on hand-computed cases. Symbolic only: nothing is compiled."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

from backends import make_backend
from backends.base import Scenario
from cableload_sim import kernels
from cableload_sim.disturbances import WrenchDisturbance
from cableload_sim.params import TeacherParams, load_config
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.statics import hover_geometry
from planners.teacher import constraint_violations
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


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_load_dynamics_match_the_simulator_when_taut(n):
    """Same state, same tensions: the teacher's load accelerations equal the simulator's."""
    config = load_config(uavs=n)
    backend = make_backend("embedded", config)
    backend.reset(Scenario(load_p=np.array([0.0, 0.0, 1.0]), load_q=np.array([1.0, 0, 0, 0]),
                           seed=n, disturbance=WrenchDisturbance(4.0, 0.4)))
    model = LoadCableModel(config.system)
    sim = backend.sim
    checked = 0
    for _ in range(20):  # disturbed hover: the load swings and turns
        backend.advance()
        state = backend.observe()
        if np.any(state.cable_tension <= 0.0):
            continue
        acc, alpha = model.load_accelerations(ocp_state(state, n))
        R = np.empty((n + 1, 9))
        force = np.empty((n + 1, 3))
        torque = np.empty((n + 1, 3))
        tension = np.empty(n)
        kernels.compute_forces(sim.x, sim.model, n, np.zeros(6), R, force, torque, tension)
        J = config.system.load.inertia_matrix()
        w = state.load_omega
        sim_alpha = np.linalg.solve(J, torque[0] - np.cross(w, J @ w))
        np.testing.assert_allclose(np.array(acc).ravel(), force[0] / config.system.load.mass,
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(np.array(alpha).ravel(), sim_alpha, rtol=1e-9, atol=1e-9)
        assert np.linalg.norm(w) > 1e-3  # the comparison is not trivial
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


@pytest.mark.parametrize("n", [2, 3, 5])
def test_kinematics_and_flatness_match_finite_differences(n):
    """Along the model's own motion, the quadrotor velocity, acceleration and jerk are the
    time derivatives of position, velocity and acceleration, and the body rates turn the thrust
    axis as dz/dt = R (w x e_z)."""
    rng = np.random.default_rng(n)
    model = LoadCableModel(load_config(uavs=n).system)
    step = model.step_function(1)
    h = 1e-4
    for _ in range(3):
        x = random_ocp_state(rng, model)
        u = rng.normal(size=model.nu)
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
        for i in range(n):
            y_axis = np.cross(z[1, i], [1.0, 0.0, 0.0])
            y_axis /= np.linalg.norm(y_axis)
            x_axis = np.cross(y_axis, z[1, i])
            R = np.column_stack([x_axis, y_axis, z[1, i]])
            predicted = R @ np.cross(rates[1, i], [0.0, 0.0, 1.0])
            np.testing.assert_allclose(predicted, z_dot[i], atol=1e-6 * (1 + np.abs(z_dot).max()))
            assert rates[1, i, 2] == 0.0  # zero yaw rate by construction


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
    end sits at p + rho_i + l u_i, and each thrust is m_i g e_z + t_i u_i (pulled down the
    cable), by hand."""
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
        expected_end = np.array([1.0, 2.0, 1.5]) + np.array(system.load.attachments[i]) + u
        np.testing.assert_allclose(p[i], expected_end, atol=1e-12)
        expected_thrust = 0.6 * 9.81 * np.array([0, 0, 1.0]) + geometry.tensions[i] * u
        np.testing.assert_allclose(thrust[i], expected_thrust, atol=1e-12)


def test_constraint_violations_by_hand():
    """Two quadrotors on vertical cables each carrying half the load (so it does not
    accelerate), with bounds set so each constraint is violated by a hand-computed amount:
    tension 6.867 N against [7.0, 15] and [0.5, 6.8]; thrust m g + t = 12.753 N against a 10 N
    maximum; cable ends as far apart as the attachment points (about 0.64 m) against 1 m."""
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
        (TeacherParams(tension_min=7.0, tension_max=15.0, thrust_margin=0.5),
         [7.0 - half, 0.0, thrust - 10.0, 0.0]),
        (TeacherParams(tension_min=0.5, tension_max=6.8, thrust_margin=0.9),
         [0.0, half - 6.8, 0.0, 0.0]),
        (TeacherParams(thrust_min=13.0, thrust_margin=0.9), [0.0, 0.0, 0.0, 13.0 - thrust]),
    ]:
        v = np.array(constraint_violations(model, params, x)).ravel()
        np.testing.assert_allclose(v[0:4], expected, atol=1e-9)
        np.testing.assert_allclose(v[4:8], expected, atol=1e-9)
        assert v[8] == pytest.approx(params.min_distance - distance)
    relaxed = TeacherParams(min_distance=0.5)
    assert np.array(constraint_violations(model, relaxed, x)).ravel()[8] == 0.0


def test_quaternion_rotation_helper_matches_rotations_module():
    from planners.teacher_model import _quat_to_rot

    q = np.array([0.9, 0.1, -0.3, 0.2])
    q /= np.linalg.norm(q)
    np.testing.assert_allclose(np.array(ca.DM(_quat_to_rot(ca.DM(q)))), quat_to_matrix(q),
                               atol=1e-15)
