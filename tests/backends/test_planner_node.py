"""What a planner node computes from what it receives: the load reference rebuilt from the
horizon message, and the student's plan from its own observation alone."""

from __future__ import annotations

import numpy as np
import pytest
from requirements import require

from backends import ros1
from cableload_sim.horizon import node_times
from cableload_sim.physics.simulator import Simulator
from cableload_sim.trajectories import make_reference

ok, why = ros1.ros_available()
require(ok, why)

from backends.planner_node import SampledReference  # noqa: E402  (needs ROS messages)


def sampled(reference, t0: float, offset: float = 0.0, origin: int = 0) -> SampledReference:
    times = t0 + np.arange(-0.2, 2.5 + 1e-9, 0.02)
    msg = ros1.load_setpoints_message(t0, times, reference.sample(times), offset)
    return SampledReference(ros1.load_setpoints_arrays(msg, origin))


@pytest.mark.parametrize("orientation", ["constant", "zero-sideslip"])
def test_reference_from_the_horizon_message_matches_the_reference(orientation):
    reference = make_reference("eight-medium", orientation=orientation)
    rebuilt = sampled(reference, 7.0, offset=100.0)
    times = 7.0 + np.linspace(0.0, 2.4, 997)  # between and on the 20 ms samples
    exact, approx = reference.sample(times), rebuilt.sample(times + 100.0)
    np.testing.assert_allclose(approx.p, exact.p, atol=1e-8)
    np.testing.assert_allclose(approx.v, exact.v, atol=1e-6)
    np.testing.assert_allclose(approx.a, exact.a, atol=1e-4)
    np.testing.assert_allclose(np.abs(np.sum(approx.q * exact.q, axis=1)), 1.0, atol=1e-9)
    np.testing.assert_allclose(approx.omega, exact.omega, atol=1e-5)
    assert rebuilt.covers(106.8, 109.4) and not rebuilt.covers(106.7, 108.0)


@pytest.mark.parametrize("t0", [6.93, 7.4, 12.0])
def test_a_student_nodes_prior_on_the_wall_clock_is_the_references(t0):
    """A flight's reference horizon is stamped in wall-clock seconds (about 1.8e9 s), where a
    float64 time resolves 0.24 us. The prior a student node computes from it (the follow
    formation's slots, whose jerk is the third derivative of a function of the reference's
    acceleration) matches the one from the reference itself at every node: from the lift off
    the ground into the eight, where the load starts to accelerate sideways."""
    from cableload_sim.params import load_config
    from cableload_sim.trajectories.lift import from_ground
    from planners.formation import FormationPlanner

    reference = from_ground(make_reference("eight-medium"))
    config = load_config()
    prior = FormationPlanner(config.system, tilt=True, wrench=True, aero=config.aero, follow=True)
    wall = 1_796_599_437  # a flight's wall clock, whole seconds
    rebuilt = sampled(reference, t0, offset=wall + 0.318, origin=wall)
    exact = prior.slot_arrays_and_sample(t0, reference)[1]
    approx = prior.slot_arrays_and_sample(t0 + 0.318, rebuilt)[1]
    for m, (name, atol) in enumerate(
        [("position", 1e-6), ("velocity", 1e-4), ("acceleration", 5e-3), ("jerk", 0.1), ("body rate", 0.02)]
    ):
        np.testing.assert_allclose(approx[m], exact[m], atol=atol, err_msg=name)


def test_student_node_plans_what_the_embedded_student_plans(paper_config):
    """A node's plan for quadrotor 0 from its own observation and the reference stream equals
    the in-process student's (same policy, same history), to the interpolation's accuracy."""
    from learners.export import load_policy
    from planners.student import StudentPlanner

    policy, history, _ = load_policy(None, "onnx")
    reference = make_reference("eight-medium")
    sim = Simulator(paper_config)
    sim.reset(*reference.start_pose())
    embedded = StudentPlanner.from_config(paper_config, policy, history)
    node = StudentPlanner.from_config(paper_config, policy, history)
    for _ in range(8):
        state = sim.world_state()
        plans = embedded.plan(state, reference)
        obs = state.local(0, node.rho[0], node.attach[0])
        mine = node.act([node.observe_local(0, obs, sampled(reference, state.t))], obs.uav_p[None], [0])[0]
        np.testing.assert_allclose(mine.t, node_times(state.t))
        np.testing.assert_allclose(mine.p, plans[0].p, atol=1e-4)
        np.testing.assert_allclose(mine.v, plans[0].v, atol=1e-3)
        assert node.bad_outputs == 0 and node.bad_observations == 0
        for i, plan in enumerate(plans):
            sim.send_plan(i, plan)
        sim.advance(100, log=False)
