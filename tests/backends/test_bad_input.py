"""Non-finite references never reach the rotors; bad requests fail clearly."""

from __future__ import annotations

import numpy as np
import pytest

from backends import make_backend
from backends.base import Scenario
from backends.runner import run_episode
from cableload_sim.horizon import node_times
from cableload_sim.physics import layout
from cableload_sim.physics.simulator import Simulator
from cableload_sim.physics.world import UavTrajectory
from cableload_sim.trajectories import make_reference
from planners.base import PlanGuard, hover_plan


def nan_plan(t, p):
    plan = hover_plan(t, p)
    bad = plan.p.copy()
    bad[5, 1] = np.nan
    return UavTrajectory(plan.t, bad, plan.v, plan.a, plan.j, plan.body_rates)


def test_onboard_controller_rejects_non_finite_plan_and_holds_hover(paper_config):
    sim = Simulator(paper_config)
    start = sim.world_state()
    sim.advance(50)
    sim.send_plan(0, nan_plan(sim.time, start.uav_p[0] + [1.0, 0, 0]))
    inf_plan = hover_plan(sim.time, start.uav_p[1])
    sim.send_plan(
        1,
        UavTrajectory(
            inf_plan.t, inf_plan.p, inf_plan.v + np.inf, inf_plan.a, inf_plan.j, inf_plan.body_rates
        ),
    )
    for _ in range(20):
        sim.advance(100)
        assert np.isfinite(sim.x).all()
        rotors = sim.x[layout.quad_offset(0) + layout.QUAD_ROTOR : layout.quad_offset(0) + 17]
        assert np.all(rotors <= paper_config.system.quadrotors[0].rotor.speed_max + 1e-9)
    stats = sim.statistics()
    assert stats.rejected_plans[0] == 1 and stats.rejected_plans[1] == 1
    assert sim.controller_modes()[0] == layout.MODE_HOLD_REJECTED
    end = sim.world_state()
    # held hover where it was: the bad target 1 m away was never chased
    assert np.linalg.norm(end.uav_p[0] - start.uav_p[0]) < 0.05


def test_expired_plan_holds_hover(paper_config):
    sim = Simulator(paper_config)
    start = sim.world_state()
    sim.send_plan(2, hover_plan(0.0, start.uav_p[2]))
    sim.advance(3000)  # 3 s: the 1.9 s plan has run out
    assert sim.controller_modes()[2] == layout.MODE_HOLD_EXPIRED
    assert np.linalg.norm(sim.world_state().uav_p[2] - start.uav_p[2]) < 0.05


def test_plan_guard_replaces_bad_plans(paper_config):
    sim = Simulator(paper_config)
    state = sim.world_state()
    guard = PlanGuard()
    good = hover_plan(0.0, state.uav_p[0])
    assert guard.check(0, good, state) is good
    replaced = guard.check(0, nan_plan(0.0, state.uav_p[0]), state)
    assert replaced.is_finite() and guard.replaced == 1
    assert "non-finite" in guard.reasons[0]
    far = hover_plan(0.0, [1e3, 0.0, 1.0])
    assert guard.check(1, far, state).p[0] == pytest.approx(state.uav_p[1])
    assert "outside" in guard.reasons[1]


def test_runner_never_sends_nan(paper_config):
    sent = []

    class Broken:
        name = "broken"

        def reset(self):
            pass

        def report(self):
            return {}

        def plan(self, state, reference):
            return [nan_plan(state.t, p) for p in state.uav_p]

    backend = make_backend("embedded", paper_config)
    original_send = backend.send
    backend.send = lambda i, traj: (sent.append(traj), original_send(i, traj))
    result = run_episode(backend, Broken(), make_reference("hover"), 1.0)
    assert all(traj.is_finite() for traj in sent)
    assert result.metrics["replaced_plans"] == 30
    assert result.metrics["rejected_plans"] == 0


def test_bad_requests_fail_clearly(paper_config):
    sim = Simulator(paper_config)
    with pytest.raises(ValueError, match="expected 21 nodes"):
        t = node_times(0.0)[:5]
        z = np.zeros((5, 3))
        sim.send_plan(0, UavTrajectory(t, z, z, z, z, z))
    with pytest.raises(ValueError, match="wrench: expected shape"):
        sim.advance(10, wrench=np.zeros(6))
    with pytest.raises(ValueError, match="scenario.load_q: expected a unit quaternion"):
        Scenario(load_p=np.zeros(3), load_q=np.array([2.0, 0, 0, 0]))
    with pytest.raises(ValueError, match="duration"):
        run_episode(make_backend("embedded", paper_config), None, make_reference("hover"), -1.0)
    with pytest.raises(ValueError, match="unknown backend 'gazebo2'"):
        make_backend("gazebo2", paper_config)
    with pytest.raises(ValueError, match="p: expected shape"):
        UavTrajectory(np.arange(3.0), np.zeros((2, 3)), *(np.zeros((3, 3)),) * 4)
