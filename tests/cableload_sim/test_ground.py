"""Ground contact, the cables' inelastic snap and a flight from the ground (``[ground]``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cableload_sim.params import ConfigError, config_from_dict, load_config
from cableload_sim.physics import layout
from cableload_sim.physics.kernels.contact import cable_snaps
from cableload_sim.physics.kernels.forces import compute_forces
from cableload_sim.physics.kernels.integrator import body_constants
from cableload_sim.physics.simulator import Simulator
from cableload_sim.rotations import quat_from_euler, quat_to_matrix
from tests.cableload_sim import numpy_twins_contact as twin

REST = np.array([2.5, 0.0, 1.0])
LEVEL = np.array([1.0, 0.0, 0.0, 0.0])


def _kernel_forces(x, model, n):
    R, force, torque = np.empty((n + 1, 9)), np.empty((n + 1, 3)), np.empty((n + 1, 3))
    compute_forces(x, model, n, np.zeros(6), R, force, torque, np.empty(n))
    return force, torque


def _ground_only(x, model, n):
    """The kernel's ground contribution: forces with the ground less forces without."""
    without = model.copy()
    without[layout.M_GROUND] = 0.0
    f1, t1 = _kernel_forces(x, model, n)
    f0, t0 = _kernel_forces(x, without, n)
    return f1 - f0, t1 - t0


@pytest.fixture
def sim():
    return Simulator(load_config())


def test_ground_forces_match_twin(sim):
    """Tilted, sinking and sliding bodies: every corner's push and friction, as the twin."""
    sim.reset_on_ground(REST, LEVEL)
    x = sim.x.copy()
    rng = np.random.default_rng(3)
    x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4] = quat_from_euler(0.1, -0.05, 0.3)
    x[layout.LOAD_POS + 2] = 0.05
    x[layout.LOAD_VEL : layout.LOAD_VEL + 3] = [0.3, -0.004, -0.2]
    x[layout.LOAD_RATE : layout.LOAD_RATE + 3] = rng.normal(0.0, 0.5, 3)
    for i in range(sim.n):
        o = layout.quad_offset(i)
        x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] = quat_from_euler(*rng.normal(0, 0.1, 3))
        x[o + layout.QUAD_POS + 2] = 0.045
        x[o + layout.QUAD_VEL : o + layout.QUAD_VEL + 3] = rng.normal(0.0, 0.05, 3)
        x[o + layout.QUAD_RATE : o + layout.QUAD_RATE + 3] = rng.normal(0.0, 0.5, 3)
    force, torque = _ground_only(x, sim.model, sim.n)
    f_twin, t_twin = twin.ground_forces(x, sim.model, sim.n)
    assert np.all(force[:, 2] > 0.0)  # every body touches
    np.testing.assert_allclose(force, f_twin, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(torque, t_twin, rtol=1e-9, atol=1e-9)


def test_the_ground_does_nothing_in_the_air(sim):
    """Hovering at 1 m: bit for bit the forces without the ground."""
    force, torque = _ground_only(sim.x, sim.model, sim.n)
    assert not force.any() and not torque.any()


def test_resting_on_the_ground_stays_at_rest_and_idles(sim):
    """Weight carried by the ground, nothing sinks, slides, winds up or flips in 3 s: the
    controllers idle their rotors without a plan asking them to climb."""
    sim.reset_on_ground(REST, LEVEL)
    x0 = sim.x.copy()
    log = sim.advance(3000)
    assert np.abs(sim.x - x0).max() < 1e-6
    assert not log.tension.any()  # cables slack
    assert np.all(sim.ctrl[:, layout.CS_LANDED] == 1.0)
    for i in range(sim.n):
        o = layout.quad_offset(i) + layout.QUAD_ROTOR
        np.testing.assert_array_equal(sim.x[o : o + 4], sim.config.system.quadrotors[i].rotor.speed_min)


def test_a_dropped_load_settles_with_its_weight_on_the_ground(sim):
    sim.reset_on_ground(REST, LEVEL)
    x = sim.x.copy()
    x[layout.LOAD_POS + 2] += 0.1
    x[layout.LOAD_VEL : layout.LOAD_VEL + 3] = [0.5, 0.0, 0.0]  # slides, friction stops it
    sim.set_state(x)
    sim.advance(2000)
    load = sim.config.system.load
    sink = load.mass * 9.81 / (4 * sim.config.ground.stiffness)
    assert sim.x[layout.LOAD_POS + 2] == pytest.approx(load.size[2] / 2 - sink, abs=1e-5)
    assert np.abs(sim.x[layout.LOAD_VEL : layout.LOAD_VEL + 6]).max() < 1e-4
    # it flew 0.5 m/s for its fall, then slid at most v^2 / (2 mu g) before stopping
    flight = 0.5 * np.sqrt(2 * 0.1 / 9.81)
    assert flight < sim.x[layout.LOAD_POS] - REST[0] <= flight + 0.5**2 / (2 * 0.6 * 9.81) + 2e-3


def _snap_state(sim):
    """Every cable 0.2 mm past its length (less than one step's travel), the load moving away."""
    state = sim.world_state()
    stretch = state.cable_tension / sim.config.system.cables[0].stiffness
    x = sim.x.copy()
    x[layout.LOAD_POS + 2] += np.mean((stretch - 2e-4) / state.cable_dir[:, 2])
    x[layout.LOAD_VEL : layout.LOAD_VEL + 3] = [0.1, 0.0, -1.0]
    x[layout.LOAD_RATE : layout.LOAD_RATE + 3] = [0.3, -0.2, 0.1]
    return x


def _momenta(x, model, n, inertia):
    linear, angular = np.zeros(3), np.zeros(3)
    for b in range(n + 1):
        o = layout.body_offset(b)
        mass = (
            model[layout.M_LOAD_MASS] if b == 0 else model[layout.quad_model_offset(b - 1) + layout.QM_MASS]
        )
        p, v = x[o : o + 3], x[o + layout.BODY_VEL : o + layout.BODY_VEL + 3]
        R = quat_to_matrix(x[o + layout.BODY_QUAT : o + layout.BODY_QUAT + 4])
        w = x[o + layout.BODY_RATE : o + layout.BODY_RATE + 3]
        linear += mass * v
        angular += np.cross(p, mass * v) + R @ (inertia[b] * w)
    return linear, angular


def test_inelastic_snap_matches_twin_and_conserves_momentum(sim):
    n, h = sim.n, 1e-3
    x = _snap_state(sim)
    body = body_constants(sim.model, n)
    inertia = body[:, layout.BC_INERTIA : layout.BC_INERTIA + 3]
    mom = (
        x[[layout.body_offset(b) + layout.BODY_RATE + k for b in range(n + 1) for k in range(3)]].reshape(
            n + 1, 3
        )
        * inertia
    )
    after = x.copy()
    total = cable_snaps(after, sim.model, n, h, np.empty((n + 1, 9)), mom, body)
    expected, total_twin = twin.cable_snaps(x, sim.model, n, h, inertia)
    assert total > 0.5  # every cable fired
    np.testing.assert_allclose(after, expected, rtol=1e-10, atol=1e-12)
    assert total == pytest.approx(total_twin, rel=1e-10)
    for before_m, after_m in zip(
        _momenta(x, sim.model, n, inertia), _momenta(after, sim.model, n, inertia), strict=True
    ):
        np.testing.assert_allclose(after_m, before_m, atol=1e-12)
    # and the cables' ends no longer separate; a second call fires nothing
    assert cable_snaps(after.copy(), sim.model, n, h, np.empty((n + 1, 9)), mom.copy(), body) == 0.0


def test_bad_ground_is_refused():
    with pytest.raises(ConfigError, match="ground.cable_snap.*'rigid'"):
        config_from_dict({"load": {"uavs": 3}, "ground": {"cable_snap": "rigid"}})
    with pytest.raises(ConfigError, match="ground.stiffness: 1000000.0 N/m"):
        config_from_dict({"load": {"uavs": 3}, "ground": {"stiffness": 1e6}})
    with pytest.raises(ConfigError, match="ground.friction: expected a non-negative"):
        config_from_dict({"load": {"uavs": 3}, "ground": {"friction": -0.1}})


def test_starting_on_the_ground_needs_the_ground():
    config = load_config()
    config = dataclasses.replace(config, ground=dataclasses.replace(config.ground, enabled=False))
    with pytest.raises(ValueError, match="ground.enabled"):
        Simulator(config).reset_on_ground(REST, LEVEL)
