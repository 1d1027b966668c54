"""Hover statics: the simulator's steady state equals the analytic equilibrium."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.params import load_config
from cableload_sim.physics import layout
from cableload_sim.physics.simulator import Simulator
from cableload_sim.physics.statics import hover_geometry, hover_state
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.trajectories import make_reference
from planners.formation import FormationPlanner


def analytic_tensions_paper():
    """Tensions of the paper's load by hand: with cables meeting below the centre of mass,
    only the force balance sum t_i u_i = m g e_z remains (3 equations, 3 tensions)."""
    config = load_config()
    geometry = hover_geometry(config.system)
    U = geometry.directions.T
    return np.linalg.solve(U, [0.0, 0.0, config.system.load.mass * config.system.gravity]), geometry


def test_hover_geometry_is_an_equilibrium_of_the_load(paper_config):
    tensions, geometry = analytic_tensions_paper()
    assert np.allclose(geometry.tensions, tensions)
    rho = paper_config.system.attachment_array()
    forces = tensions[:, None] * geometry.directions
    weight = paper_config.system.load.mass * paper_config.system.gravity
    assert np.allclose(forces.sum(axis=0), [0.0, 0.0, weight])
    assert np.allclose(np.cross(rho, forces).sum(axis=0), 0.0, atol=1e-12)
    # by symmetry of the paper's points, cables 1 and 2 share the load; cable 3 carries more
    assert tensions[0] == pytest.approx(tensions[1])
    assert tensions[2] > tensions[0]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_hover_tensions_balance_the_load(n):
    """The statics' tensions hold the load: their vertical parts sum to its weight, their
    horizontal parts and their moments about its centre of mass cancel. (With two cables, whose
    directions span only a vertical plane, the normal equations were singular and gave 1.77 N
    per cable for the 13.7 N load.)"""
    system = load_config(uavs=n).system
    geometry = hover_geometry(system)
    pulls = geometry.tensions[:, None] * geometry.directions
    weight = system.load.mass * system.gravity
    assert pulls[:, 2].sum() == pytest.approx(weight, rel=1e-12)
    np.testing.assert_allclose(pulls[:, :2].sum(axis=0), 0.0, atol=1e-12 * weight)
    moments = np.cross(system.attachment_array(), pulls).sum(axis=0)
    np.testing.assert_allclose(moments, 0.0, atol=1e-12 * weight)
    assert np.all(geometry.tensions > 0.0)


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_formation_keeps_spacing_and_positive_tensions(n):
    config = load_config(uavs=n)
    state = hover_state(config.system, [0, 0, 1], [1, 0, 0, 0])
    assert np.all(state.tensions > 0)
    d = np.linalg.norm(state.uav_p[:, None] - state.uav_p[None], axis=-1)
    d[np.diag_indices(n)] = np.inf
    assert d.min() >= config.system.formation.min_spacing_m - 1e-6


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_closed_loop_hover_tensions_and_thrusts_match_statics(n):
    """Started away from equilibrium (load 6 cm high and 1.4 cm aside, its cables slack, every
    quadrotor level and spinning for its own weight only), the formation under the onboard
    controllers settles in 8 s: the steady tensions carry the load's weight (by mechanics,
    whatever the statics say), equal the statics' tensions within 2 % where those are
    determined (two and three cables; with more, the split is statically indeterminate and
    follows millimetres of the quadrotors' positions: 5 N per mm of stretch), and each
    quadrotor's thrust equals the magnitude of its weight plus its cable's pull, along its
    thrust axis."""
    config = load_config(uavs=n)
    system = config.system
    geometry = hover_geometry(system)
    sim = Simulator(config)
    sim.reset([0.5, -0.3, 1.2], [1, 0, 0, 0])
    x = sim.x.copy()
    x[layout.LOAD_POS : layout.LOAD_POS + 3] += [0.01, -0.01, 0.06]
    for i, quad in enumerate(system.quadrotors):
        o = layout.quad_offset(i)
        x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] = [1.0, 0.0, 0.0, 0.0]
        x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4] = np.sqrt(
            quad.mass * system.gravity / (4.0 * quad.rotor.thrust_coeff)
        )
    sim.set_state(x)
    assert np.all(sim.world_state().cable_tension == 0.0)  # really not the equilibrium
    planner = FormationPlanner(system)
    reference = make_reference("hover", x=0.5, y=-0.3, z=1.2)
    samples, directions, load_p = [], [], []
    for _ in range(80):
        for i, plan in enumerate(planner.plan(sim.world_state(), reference)):
            sim.send_plan(i, plan)
        log = sim.advance(100)
        if sim.time > 4.0:
            samples.append(log.tension)
            directions.append(sim.world_state().cable_dir)
            load_p.append(log.x[:, layout.LOAD_POS : layout.LOAD_POS + 3])
    steady = np.concatenate(samples).mean(axis=0)
    lift = (steady * np.mean(directions, axis=0)[:, 2]).sum()
    assert lift == pytest.approx(system.load.mass * system.gravity, rel=0.01)
    if n <= 3:
        np.testing.assert_allclose(steady, geometry.tensions, rtol=0.02)
    state = sim.world_state()
    for i, quad in enumerate(system.quadrotors):
        thrust = quad.rotor.thrust_coeff * np.sum(state.rotor_speeds[i] ** 2)
        pull = state.cable_tension[i] * state.cable_dir[i]
        direction = quad.mass * system.gravity * np.array([0, 0, 1.0]) + pull
        assert thrust == pytest.approx(np.linalg.norm(direction), rel=0.02)
        z_axis = quat_to_matrix(state.uav_q[i])[:, 2]
        assert np.degrees(np.arccos(z_axis @ direction / np.linalg.norm(direction))) < 1.0
    # on average: formation plans do not see the load, and its swing decays slowly while
    # the quadrotors track them stiffly (damping ratio 0.000-0.04 for n = 3..5)
    assert np.linalg.norm(np.concatenate(load_p).mean(axis=0) - [0.5, -0.3, 1.2]) < 0.01
