"""Hover statics: the simulator's steady state equals the analytic equilibrium."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.params import load_config
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.simulator import Simulator
from cableload_sim.statics import hover_geometry, hover_state
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


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_formation_keeps_spacing_and_positive_tensions(n):
    config = load_config(uavs=n)
    state = hover_state(config.system, [0, 0, 1], [1, 0, 0, 0])
    assert np.all(state.tensions > 0)
    d = np.linalg.norm(state.uav_p[:, None] - state.uav_p[None], axis=-1)
    d[np.diag_indices(n)] = np.inf
    assert d.min() >= config.system.formation.min_spacing_m - 1e-6


def test_closed_loop_hover_tensions_and_thrusts_match_statics(paper_config):
    """Hovering in formation under the onboard controllers for 8 s, the steady cable tensions
    equal the analytic statics within 2 % and each quadrotor's thrust equals the magnitude of
    its weight plus its cable's pull."""
    tensions, geometry = analytic_tensions_paper()
    sim = Simulator(paper_config)
    sim.reset([0.5, -0.3, 1.2], [1, 0, 0, 0])
    planner = FormationPlanner(paper_config.system)
    reference = make_reference("hover", x=0.5, y=-0.3, z=1.2)
    samples = []
    for _ in range(80):
        for i, plan in enumerate(planner.plan(sim.world_state(), reference)):
            sim.send_plan(i, plan)
        log = sim.advance(100)
        if sim.time > 4.0:
            samples.append(log.tension)
    steady = np.concatenate(samples).mean(axis=0)
    assert np.allclose(steady, tensions, rtol=0.02)
    state = sim.world_state()
    system = paper_config.system
    for i, quad in enumerate(system.quadrotors):
        thrust = quad.rotor.thrust_coeff * np.sum(state.rotor_speeds[i] ** 2)
        pull = state.cable_tension[i] * state.cable_dir[i]
        expected = np.linalg.norm(quad.mass * system.gravity * np.array([0, 0, 1.0]) + pull)
        assert thrust == pytest.approx(expected, rel=0.02)
        # and the thrust axis points along that vector
        z_axis = quat_to_matrix(state.uav_q[i])[:, 2]
        direction = quad.mass * system.gravity * np.array([0, 0, 1.0]) + pull
        assert np.degrees(np.arccos(z_axis @ direction / np.linalg.norm(direction))) < 1.0
    assert np.linalg.norm(state.load_p - [0.5, -0.3, 1.2]) < 0.01
