"""Dynamics checks of the physics kernels against closed-form mechanics."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cableload_sim.params import CableParams, load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.simulator import Simulator
from cableload_sim.physics.statics import hover_state
from cableload_sim.rotations import quat_to_matrix

NO_CONTROLLER = 10**12  # decimation no step index reaches: the controllers never run


def run_physics(system, x, steps, h=1e-3, rotor_cmd=None, log_every=1):
    """Step only the physics (controllers off: rotors held at ``rotor_cmd``)."""
    n = system.n_uavs
    model = layout.pack_model(system)
    ctrl = np.zeros((n, layout.CS_SIZE))
    if rotor_cmd is not None:
        ctrl[:, layout.CS_ROTOR_CMD : layout.CS_ROTOR_CMD + 4] = rotor_cmd
    plans, status = layout.empty_plans(n)
    counters = np.zeros((n, layout.K_SIZE))
    stats = layout.new_stats(n)
    rows = steps // log_every
    log_x = np.empty((rows, x.size))
    log_t = np.empty((rows, n))
    gains = np.zeros(layout.G_SIZE)
    x = x.copy()
    fcache, fvalid = layout.empty_force_cache(n)
    sys = layout.SimModel(
        physics=model,
        nominal=model,
        gains=gains,
        n=n,
        h=h,
        decimation=NO_CONTROLLER,
        wind=layout.still_air(),
        wind_dt=1.0,
    )
    data = layout.SimData(
        x=x,
        ctrl=ctrl,
        plans=plans,
        plan_status=status,
        counters=counters,
        stats=stats,
        fcache=fcache,
        fvalid=fvalid,
    )
    kernels.advance(sys, data, 1, steps, np.zeros((1, 6)), layout.SimLog(log_every, log_x, log_t))
    return log_x, log_t, stats


def pendulum_system(length=1.0):
    """Two very heavy 'quadrotors' whose rotors exactly carry their weight, i.e. held fixed; a
    point-mass load hangs from the first; the second's cable is far too long to ever pull."""
    base = load_config(uavs=2).system
    mass = 1e7
    speed = 1000.0
    quad = dataclasses.replace(
        base.quadrotors[0],
        mass=mass,
        inertia=(1e7, 1e7, 1e7),
        attachment=(0.0, 0.0, 0.0),
        rotor=dataclasses.replace(
            base.quadrotors[0].rotor, thrust_coeff=mass * 9.81 / (4 * speed**2), speed_max=2 * speed
        ),
    )
    load = dataclasses.replace(
        base.load, mass=1.0, inertia=(1e-4, 1e-4, 1e-4), attachments=((0.0, 0.0, 0.0), (0.01, 0.0, 0.0))
    )
    cables = (
        CableParams(length=length, stiffness=5000.0, damping=0.0),
        CableParams(length=100.0, stiffness=5000.0, damping=0.0),
    )
    return dataclasses.replace(base, load=load, quadrotors=(quad, quad), cables=cables, gravity=9.81), speed


def test_pendulum_small_angle_period():
    """A load on one cable below a fixed point swings with period 2 pi sqrt(l / g) within 1 %,
    l being the cable's loaded length (rest length plus the static stretch m g / k)."""
    system, speed = pendulum_system()
    n = system.n_uavs
    x = np.zeros(layout.state_size(n))
    x[layout.LOAD_QUAT] = 1.0
    stretch = system.load.mass * system.gravity / system.cables[0].stiffness
    length = system.cables[0].length + stretch
    angle = 0.05
    x[layout.LOAD_POS : layout.LOAD_POS + 3] = [length * np.sin(angle), 0.0, 2.0 - length * np.cos(angle)]
    for i, anchor in enumerate([[0.0, 0.0, 2.0], [5.0, 0.0, 2.0]]):
        o = layout.quad_offset(i)
        x[o + layout.QUAD_POS : o + layout.QUAD_POS + 3] = anchor
        x[o + layout.QUAD_QUAT] = 1.0
        x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4] = speed
    log_x, _, _ = run_physics(system, x, 12000, rotor_cmd=speed)
    swing = log_x[:, layout.LOAD_POS]
    t = (np.arange(len(swing)) + 2) * 1e-3
    crossings = t[1:][(swing[:-1] > 0) & (swing[1:] <= 0)]
    measured = np.mean(np.diff(crossings))
    expected = 2 * np.pi * np.sqrt(length / system.gravity)
    assert len(crossings) >= 4
    assert measured == pytest.approx(expected, rel=0.01)
    # the anchors did not move
    o = layout.quad_offset(0)
    assert np.abs(log_x[:, o : o + 3] - [0.0, 0.0, 2.0]).max() < 1e-3


def spinning_free_system(rng, n=4, spin_rate=3.0, vel_noise=0.02, rate_noise=0.1, planar=True):
    """The system without gravity, thrust or damping, spinning about the vertical through its
    centre of mass, with random extra velocities and body rates.

    ``planar``: quadrotors level with the load's attachments, cables horizontal and radial, so
    the spin keeps every cable taut. Otherwise the quadrotors start in their hover cone and the
    cables' vertical pulls, no longer balanced by gravity, make them go slack and snap taut
    again and again.
    """
    config = load_config(uavs=n)
    system = dataclasses.replace(
        config.system,
        gravity=1e-12,
        cables=tuple(dataclasses.replace(c, damping=0.0) for c in config.system.cables),
    )
    hover = hover_state(config.system, [0, 0, 1.0], [1, 0, 0, 0])
    rho = system.attachment_array()
    x = np.zeros(layout.state_size(n))
    spin = np.array([0.0, 0.0, spin_rate])
    x[layout.LOAD_POS : layout.LOAD_POS + 3] = hover.load_p
    x[layout.LOAD_QUAT] = 1.0
    uav_p = hover.uav_p.copy()
    if planar:
        radial = rho[:, :2] / np.linalg.norm(rho[:, :2], axis=1, keepdims=True)
        reach = np.linalg.norm(rho[:, :2], axis=1) + system.cables[0].length + 1e-3
        uav_p[:, :2] = reach[:, None] * radial
        uav_p[:, 2] = hover.load_p[2] + rho[:, 2] - np.array([q.attachment[2] for q in system.quadrotors])
    com = (
        system.load.mass * hover.load_p + sum(q.mass * p for q, p in zip(system.quadrotors, uav_p))
    ) / system.total_mass()
    x[layout.LOAD_VEL : layout.LOAD_VEL + 3] = np.cross(spin, hover.load_p - com) + rng.normal(
        scale=vel_noise, size=3
    )
    x[layout.LOAD_RATE : layout.LOAD_RATE + 3] = spin + rng.normal(scale=rate_noise, size=3)
    for i in range(n):
        o = layout.quad_offset(i)
        x[o : o + 3] = uav_p[i]
        x[o + 3] = 1.0
        x[o + 7 : o + 10] = np.cross(spin, uav_p[i] - com) + rng.normal(scale=vel_noise, size=3)
        x[o + 10 : o + 13] = spin + rng.normal(scale=rate_noise, size=3)
    return system, x


def momenta_and_energy(system, x):
    n = system.n_uavs
    bodies = [(layout.LOAD_POS, system.load.mass, system.load.inertia_matrix())] + [
        (layout.quad_offset(i), q.mass, q.inertia_matrix()) for i, q in enumerate(system.quadrotors)
    ]
    linear = np.zeros(3)
    angular = np.zeros(3)
    energy = 0.0
    for o, m, J in bodies:
        p, q, v, w = x[o : o + 3], x[o + 3 : o + 7], x[o + 7 : o + 10], x[o + 10 : o + 13]
        R = quat_to_matrix(q)
        linear += m * v
        angular += np.cross(p, m * v) + R @ (J @ w)
        energy += 0.5 * m * v @ v + 0.5 * w @ J @ w
    tension = np.empty(n)
    direction = np.empty((n, 3))
    kernels.cable_tensions(x, layout.pack_model(system), n, tension, direction)
    for cable, t in zip(system.cables, tension):
        energy += 0.5 * t**2 / cable.stiffness  # spring energy of the stretch t / k
    return linear, angular, energy


@pytest.mark.parametrize("n", [3, 4])
def test_momentum_and_energy_conserved_without_gravity_thrust_and_damping(rng, n):
    """Spinning with taut, vibrating cables for 10 s at the default 1 ms step: momenta are
    conserved to rounding, energy drifts less than 0.1 % (Verlet keeps it bounded)."""
    system, x0 = spinning_free_system(rng, n=n)
    log_x, log_t, _ = run_physics(system, x0, 10000, log_every=50)
    lin0, ang0, e0 = momenta_and_energy(system, x0)
    history = np.array([momenta_and_energy(system, x)[2] for x in log_x])
    lin1, ang1, _ = momenta_and_energy(system, log_x[-1])
    assert np.linalg.norm(lin1 - lin0) < 1e-9 * max(1.0, np.linalg.norm(lin0))
    assert np.linalg.norm(ang1 - ang0) < 1e-9 * np.linalg.norm(ang0)
    assert abs(history[-1] - e0) / e0 < 1e-3
    assert np.abs(history - e0).max() / e0 < 1e-3
    # something happened: the cables carried tension and the system turned over 4 rad
    assert np.all(log_t > 0.0)
    assert (
        np.linalg.norm(
            log_x[-1, layout.quad_offset(0) : layout.quad_offset(0) + 2]
            - x0[layout.quad_offset(0) : layout.quad_offset(0) + 2]
        )
        > 1.0
    )


def test_momentum_and_energy_conserved_through_slack_events():
    """Cables going slack and snapping taut dozens of times (the hover cone without gravity):
    momenta are still conserved to rounding (central forces), and although each kink of the
    unilateral force costs a local error, the energy stays within 0.1 % over 5 s at 1 ms and
    0.5 ms (measured: a few 1e-5)."""
    for h in (1e-3, 5e-4):
        system, x0 = spinning_free_system(
            np.random.default_rng(7), n=3, spin_rate=2.5, vel_noise=0.05, rate_noise=0.2, planar=False
        )
        steps = int(round(5.0 / h))
        log_x, log_t, stats = run_physics(system, x0, steps, h=h, log_every=steps // 50)
        lin0, ang0, e0 = momenta_and_energy(system, x0)
        lin1, ang1, e1 = momenta_and_energy(system, log_x[-1])
        assert np.linalg.norm(ang1 - ang0) < 1e-9 * np.linalg.norm(ang0)
        assert np.linalg.norm(lin1 - lin0) < 1e-9
        assert np.mean(log_t <= 0.0) > 0.2  # really slack a good part of the time
        assert abs(e1 - e0) / e0 < 1e-3


def test_slack_cable_exerts_no_force(paper_config):
    sim = Simulator(paper_config)
    x = sim.x.copy()
    o = layout.quad_offset(0)
    x[o + 2] -= 0.5  # quadrotor 0 drops half a metre: its cable goes slack
    tension = np.empty(3)
    direction = np.empty((3, 3))
    kernels.cable_tensions(x, sim.model, 3, tension, direction)
    assert tension[0] == 0.0
    assert np.all(tension[1:] > 0.0)


def test_external_wrench_accelerates_the_load(paper_config):
    """With its cables slack (quadrotors 0.3 m lower, load falling freely), a world wrench of
    3 N along x and 0.5 N m about z on the level load gives, over 50 steps, exactly the
    accelerations of Newton and Euler: dv = t (F / m_L - g e_z) and, about the principal z axis,
    dw_z = t tau_z / J_z (no gyroscopic term for a rotation about one principal axis)."""
    system = paper_config.system
    sim = Simulator(paper_config)
    x = sim.x.copy()
    for i in range(system.n_uavs):
        x[layout.quad_offset(i) + 2] -= 0.3
    wrench = np.array([[3.0, 0.0, 0.0, 0.0, 0.0, 0.5]])
    steps, h = 50, 1e-3
    n = system.n_uavs
    model = layout.pack_model(system)
    ctrl = np.zeros((n, layout.CS_SIZE))
    plans, status = layout.empty_plans(n)
    log_x, log_t = np.empty((steps, x.size)), np.empty((steps, n))
    fcache, fvalid = layout.empty_force_cache(n)
    sys = layout.SimModel(
        physics=model,
        nominal=model,
        gains=np.zeros(layout.G_SIZE),
        n=n,
        h=h,
        decimation=NO_CONTROLLER,
        wind=layout.still_air(),
        wind_dt=1.0,
    )
    data = layout.SimData(
        x=x,
        ctrl=ctrl,
        plans=plans,
        plan_status=status,
        counters=np.zeros((n, layout.K_SIZE)),
        stats=layout.new_stats(n),
        fcache=fcache,
        fvalid=fvalid,
    )
    kernels.advance(sys, data, 1, steps, wrench, layout.SimLog(1, log_x, log_t))
    assert np.all(log_t == 0.0)  # the cables never pulled
    t = steps * h
    load = system.load
    dv = x[layout.LOAD_VEL : layout.LOAD_VEL + 3] - sim.x[layout.LOAD_VEL : layout.LOAD_VEL + 3]
    np.testing.assert_allclose(
        dv, t * np.array([3.0 / load.mass, 0.0, -system.gravity]), rtol=1e-12, atol=1e-14
    )
    dw = x[layout.LOAD_RATE : layout.LOAD_RATE + 3]
    np.testing.assert_allclose(dw, [0.0, 0.0, t * 0.5 / load.inertia_matrix()[2, 2]], rtol=1e-12, atol=1e-14)


def test_external_torque_enters_the_load_in_its_body_frame(paper_config):
    """A world torque about z on a load yawed by 90 deg is a body torque about z; a world
    torque about x becomes a body torque about -y."""
    sim = Simulator(paper_config)
    sim.reset([0, 0, 1], [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)])
    n = 3
    R = np.empty((n + 1, 9))
    force = np.empty((n + 1, 3))
    base = np.empty((n + 1, 3))
    torque = np.empty((n + 1, 3))
    tension = np.empty(n)
    kernels.compute_forces(sim.x, sim.model, n, np.zeros(6), R, force, base, tension)
    kernels.compute_forces(sim.x, sim.model, n, np.array([0, 0, 0, 0.2, 0, 0.5]), R, force, torque, tension)
    assert np.allclose(torque[0] - base[0], [0.0, -0.2, 0.5], atol=1e-12)
