"""Cross-check of the physics against a rigid-cable multibody model built with pinocchio.

How the comparison is made fair for stiff but not rigid cables: pinocchio models each cable as
a rigid massless rod (universal joint at the load, spherical joint at the quadrotor), so each
cable's tension there is a constraint force, whatever keeps the rod's length constant. The
simulator's cables are springs whose tension depends on their stretch. For a given taut state
(all bodies placed and moving exactly as the rigid model allows, so every cable length is
constant to first order: zero stretch rate, and no damping force), the test gives each spring
the rest length whose stretch produces the tension that makes that cable's length stop
accelerating (d2L/dt2 = 0, found by solving the simulator's own affine tension-to-acceleration
map). A stiff cable whose length is not accelerating transmits exactly the rigid constraint
force, so the two models must then agree on every acceleration: any difference comes from the
rest of the dynamics (rigid bodies, attachment points, moment arms, gravity, thrust and rotor
torques), which is what is under test.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cableload_sim.params import load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.rotations import quat_to_matrix

pin = pytest.importorskip("pinocchio")


def build_rigid_model(system):
    """Load free-flyer; per cable RX-RY universal joint at rho_i, rod along +z of length l_i,
    spherical joint at its end carrying the quadrotor (centre of gravity at -r_i)."""
    model = pin.Model()
    model.gravity = pin.Motion(np.array([0.0, 0.0, -system.gravity, 0.0, 0.0, 0.0]))
    load = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "load")
    model.appendBodyToJoint(
        load, pin.Inertia(system.load.mass, np.zeros(3), system.load.inertia_matrix()), pin.SE3.Identity()
    )
    quads = []
    for i, (quad, cable, rho) in enumerate(zip(system.quadrotors, system.cables, system.load.attachments)):
        ux = model.addJoint(load, pin.JointModelRX(), pin.SE3(np.eye(3), np.array(rho)), f"ux{i}")
        uy = model.addJoint(ux, pin.JointModelRY(), pin.SE3.Identity(), f"uy{i}")
        sph = model.addJoint(
            uy, pin.JointModelSpherical(), pin.SE3(np.eye(3), np.array([0.0, 0.0, cable.length])), f"quad{i}"
        )
        model.appendBodyToJoint(
            sph, pin.Inertia(quad.mass, -np.array(quad.attachment), quad.inertia_matrix()), pin.SE3.Identity()
        )
        quads.append(sph)
    return model, load, quads


def random_configuration(rng, n):
    """Load pose, cable angles up to about 35 deg, quadrotor tilts up to about 30 deg."""
    q = [rng.uniform(-1, 1, 3) + [0, 0, 1]]
    axis = rng.normal(size=3)
    half = 0.5 * rng.uniform(0, 0.5)
    load_quat = np.concatenate([np.sin(half) * axis / np.linalg.norm(axis), [np.cos(half)]])
    q.append(load_quat)  # pinocchio order x, y, z, w
    for _ in range(n):
        q.append(rng.uniform(-0.6, 0.6, 2))
        axis = rng.normal(size=3)
        half = 0.5 * rng.uniform(0, 0.5)
        q.append(np.concatenate([np.sin(half) * axis / np.linalg.norm(axis), [np.cos(half)]]))
    return np.concatenate(q)


def simulator_state(model, data, q, v, load_id, quad_ids, system, rotor_speeds):
    """The simulator's flat state of the same configuration and motion."""
    pin.forwardKinematics(model, data, q, v)
    x = np.zeros(layout.state_size(system.n_uavs))

    def body(offset, jid, com_local):
        placement = data.oMi[jid]
        R = placement.rotation
        vel = data.v[jid]  # local frame of the joint
        w_local = vel.angular
        v_com_local = vel.linear + np.cross(w_local, com_local)
        x[offset : offset + 3] = placement.translation + R @ com_local
        quat = pin.Quaternion(R)
        x[offset + 3 : offset + 7] = [quat.w, quat.x, quat.y, quat.z]
        x[offset + 7 : offset + 10] = R @ v_com_local
        x[offset + 10 : offset + 13] = w_local

    body(layout.LOAD_POS, load_id, np.zeros(3))
    for i, (jid, quad) in enumerate(zip(quad_ids, system.quadrotors)):
        o = layout.quad_offset(i)
        body(o, jid, -np.array(quad.attachment))
        x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4] = rotor_speeds[i]
    return x


def newton_euler(system, x, force, torque):
    """Linear (world) and angular (body) accelerations of every body from forces and torques."""
    bodies = [(layout.LOAD_POS, system.load.mass, system.load.inertia_matrix())] + [
        (layout.quad_offset(i), q.mass, q.inertia_matrix()) for i, q in enumerate(system.quadrotors)
    ]
    lin, ang = [], []
    for b, (o, m, J) in enumerate(bodies):
        w = x[o + 10 : o + 13]
        lin.append(force[b] / m)
        ang.append(np.linalg.solve(J, torque[b] - np.cross(w, J @ w)))
    return np.array(lin), np.array(ang)


def simulator_accelerations(system, x, tensions):
    """Accelerations with each cable's rest length set so that its stretch gives ``tensions``."""
    n = system.n_uavs
    lengths = cable_lengths(system, x)
    cables = tuple(
        dataclasses.replace(c, length=float(L - t / c.stiffness), damping=c.damping)
        for c, L, t in zip(system.cables, lengths, tensions)
    )
    model = layout.pack_model(dataclasses.replace(system, cables=cables))
    R = np.empty((n + 1, 9))
    force = np.empty((n + 1, 3))
    torque = np.empty((n + 1, 3))
    tension = np.empty(n)
    kernels.compute_forces(x, model, n, np.zeros(6), R, force, torque, tension)
    assert np.allclose(tension, tensions, rtol=1e-9, atol=1e-9)
    return newton_euler(system, x, force, torque)


def attachment_kinematics(system, x, lin_acc=None, ang_acc=None):
    """Per cable: vector d (quad end - load end), its rate and, given accelerations, its
    second derivative."""
    out = []
    ends = []
    for b, (o, _) in enumerate(
        [(layout.LOAD_POS, None)]
        + [(layout.quad_offset(i), q.attachment) for i, q in enumerate(system.quadrotors)]
    ):
        R = quat_to_matrix(x[o + 3 : o + 7])
        w = x[o + 10 : o + 13]
        ends.append((o, R, w, b))
    for i in range(system.n_uavs):
        vals = []
        for (o, R, w, b), arm in (
            (ends[0], np.array(system.load.attachments[i])),
            (ends[i + 1], np.array(system.quadrotors[i].attachment)),
        ):
            arm_w = R @ arm
            pos = x[o : o + 3] + arm_w
            vel = x[o + 7 : o + 10] + R @ np.cross(w, arm)
            acc = None
            if lin_acc is not None:
                acc = lin_acc[b] + R @ (np.cross(ang_acc[b], arm) + np.cross(w, np.cross(w, arm)))
            vals.append((pos, vel, acc))
        (pl, vl, al), (pq, vq, aq) = vals
        d, dd = pq - pl, vq - vl
        ddd = None if al is None else aq - al
        out.append((d, dd, ddd))
    return out


def cable_lengths(system, x):
    return np.array([np.linalg.norm(d) for d, _, _ in attachment_kinematics(system, x)])


def length_accelerations(system, x, tensions):
    lin, ang = simulator_accelerations(system, x, tensions)
    out = []
    for d, dd, ddd in attachment_kinematics(system, x, lin, ang):
        L = np.linalg.norm(d)
        u = d / L
        out.append(u @ ddd + (dd @ dd - (u @ dd) ** 2) / L)
    return np.array(out), lin, ang


@pytest.mark.parametrize("n", [2, 3, 4])
def test_load_acceleration_matches_rigid_multibody(n):
    rng = np.random.default_rng(100 + n)
    config = load_config(uavs=n)
    system = config.system
    model, load_id, quad_ids = build_rigid_model(system)
    data = model.createData()
    checked = 0
    for _ in range(20):
        q = random_configuration(rng, n)
        v = rng.normal(scale=0.4, size=model.nv)
        speeds = rng.uniform(900.0, 1700.0, size=(n, 4))
        x = simulator_state(model, data, q, v, load_id, quad_ids, system, speeds)
        # rigid rods: no stretch rate
        for d, dd, _ in attachment_kinematics(system, x):
            assert abs(d @ dd) / np.linalg.norm(d) < 1e-12
        # tension -> cable length acceleration is affine: solve for zero length acceleration
        base, _, _ = length_accelerations(system, x, np.zeros(n))
        A = np.column_stack([length_accelerations(system, x, np.eye(n)[j])[0] - base for j in range(n)])
        tensions = np.linalg.solve(A, -base)
        if np.any(tensions <= 0.05):
            continue  # a rigid rod would push here; a cable cannot: not a taut state
        residual, lin, ang = length_accelerations(system, x, tensions)
        assert np.abs(residual).max() < 1e-8
        # pinocchio with the rotor thrust and torque as external forces on each quadrotor
        fext = [pin.Force.Zero() for _ in range(model.njoints)]
        for i, (jid, quad) in enumerate(zip(quad_ids, system.quadrotors)):
            f = quad.rotor.thrust_coeff * speeds[i] ** 2
            wrench = quad.rotor.allocation_matrix() @ f
            com = -np.array(quad.attachment)
            thrust = np.array([0.0, 0.0, wrench[0]])
            fext[jid] = pin.Force(thrust, np.cross(com, thrust) + wrench[1:])
        ddq = pin.aba(model, data, q, v, np.zeros(model.nv), fext)
        R_load = data.oMi[load_id].rotation
        v_local = v[:3]
        w_local = v[3:6]
        load_acc = R_load @ (ddq[:3] + np.cross(w_local, v_local))
        load_alpha = ddq[3:6]
        assert np.linalg.norm(lin[0] - load_acc) <= 0.02 * np.linalg.norm(load_acc)
        assert np.linalg.norm(ang[0] - load_alpha) <= 0.02 * max(np.linalg.norm(load_alpha), 0.1)
        # in fact they agree to rounding error
        assert np.allclose(lin[0], load_acc, atol=1e-7)
        checked += 1
    assert checked >= 8
