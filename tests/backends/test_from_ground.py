"""A flight from the ground (``--from-ground``): take-off, lift, eight-slow, set-down, landing."""

from __future__ import annotations

import numpy as np
import pytest

from backends.embedded import EmbeddedBackend
from backends.runner import run_episode
from cableload_sim.params import load_config
from cableload_sim.physics import layout
from cableload_sim.physics.ground import cable_lift, lift_off_index
from cableload_sim.trajectories import make_reference
from cableload_sim.trajectories.lift import from_ground
from planners.formation import FormationPlanner


@pytest.mark.parametrize("tilt", [False, True])
def test_formation_lifts_flies_and_sets_down_the_load(tilt):
    config = load_config()
    system = config.system
    reference = from_ground(make_reference("eight-slow"))
    backend = EmbeddedBackend(config)
    result = run_episode(
        backend, FormationPlanner(system, tilt=tilt), reference, reference.period_s + 1.0, keep_samples=True
    )
    assert result.status.value == "completed", result.message
    s = result.samples
    rest_z = s.load_p[0, 2]
    weight = system.load.mass * system.gravity
    # the load leaves the ground only once the cables carry its weight
    off = lift_off_index(s.load_p[:, 2])
    assert s.t[off] > reference.t_lift
    lift = cable_lift(s, system)
    assert lift[off] == pytest.approx(weight, rel=0.1)
    assert np.all(lift[: off - 10] < weight)
    assert np.all(s.cable_tension[s.t < reference.climb_s - 0.5] == 0.0)  # slack on the ground
    # in the air it tracks the reference (the metric is over the airborne samples only)
    assert result.metrics["rmse_position_m"] < (0.03 if tilt else 0.05)
    air = reference.airborne(s.t)
    assert np.linalg.norm(s.load_p[air] - result.ref_p[air], axis=1).max() < 0.1
    assert s.load_p[air, 2].max() > 0.95
    # it ends resting on the ground, the quadrotors idling where they took off
    assert s.load_p[-1, 2] == pytest.approx(rest_z, abs=1e-4)
    assert np.abs(s.load_v[-1]).max() < 1e-3
    np.testing.assert_allclose(s.uav_p[-1], s.uav_p[0], atol=0.05)
    assert np.all(backend.sim.ctrl[:, layout.CS_LANDED] == 1.0)
    assert result.metrics["min_uav_distance_m"] >= config.simulation.collision_distance_m


@pytest.mark.parametrize("name", ["teacher", "student"])
def test_the_teacher_and_the_student_fly_from_the_ground_through_the_hand_over(name, paper_config):
    """The lift planner takes off and lifts; the planner flies the path once the load hangs
    free; the lift planner sets it down and lands."""
    from backends.session import Flight, build_planner

    config = paper_config
    reference = from_ground(make_reference("eight-medium"))
    planner = build_planner(Flight(config, reference, reference.period_s), name)
    assert planner.name == name and type(planner).__name__ == "HandOver"
    backend = EmbeddedBackend(config)
    result = run_episode(backend, planner, reference, reference.period_s + 0.5, keep_samples=True)
    assert result.status.value == "completed", result.message
    report = result.planner_report
    assert reference.t_path <= report["handover_at_s"] < reference.t_path + 0.5
    assert report["handback_at_s"] == pytest.approx(reference.t_descent, abs=0.11)
    s = result.samples
    air = reference.airborne(s.t)
    assert s.load_p[air, 2].max() > 0.95
    # the path flown by the chosen planner as well as in the air from hover
    assert result.metrics["rmse_position_m"] < 0.02
    # set down and landed where they took off
    assert np.abs(s.load_v[-1]).max() < 1e-3
    np.testing.assert_allclose(s.uav_p[-1], s.uav_p[0], atol=0.05)
    assert np.all(backend.sim.ctrl[:, layout.CS_LANDED] == 1.0)
