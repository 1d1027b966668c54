"""The formation baseline made to start at the quadrotor (the student's prior)."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.trajectories import make_reference
from planners.formation import FormationPlanner


def test_anchored_plan_starts_at_the_quadrotor_and_joins_its_slot(paper_config):
    planner = FormationPlanner(paper_config.system, tilt=True, converge_s=0.5)
    reference = make_reference("eight-medium")
    slot = planner.slot_plans(3.0, reference)[1]
    here = slot.p[0] + np.array([0.2, -0.1, 0.05])
    plan = planner.anchored(slot, here)
    np.testing.assert_allclose(plan.p[0], here, atol=1e-12)
    gap = np.linalg.norm(plan.p - slot.p, axis=1)
    assert gap[-1] < 0.03 * gap[0] and np.all(np.diff(gap) <= 1e-12)
    # the slot's velocity is the derivative of its position, and the added term's exact
    slot_f = planner.slot_plans(3.0 + 1e-4, reference)[1]
    slot_b = planner.slot_plans(3.0 - 1e-4, reference)[1]
    numeric = (slot_f.p - slot_b.p) / 2e-4
    np.testing.assert_allclose(numeric, slot.v, atol=1e-4)
    tau = plan.t - plan.t[0]
    expected_v = slot.v - (here - slot.p[0]) * np.exp(-tau / 0.5)[:, None] / 0.5
    np.testing.assert_allclose(plan.v, expected_v, atol=1e-12)


def test_anchored_formation_flies_like_the_formation(paper_config):
    from backends import make_backend
    from backends.runner import run_episode

    reference = make_reference("eight-medium")
    result = run_episode(make_backend("embedded", paper_config),
                         FormationPlanner(paper_config.system, tilt=True, converge_s=0.5),
                         reference, 10.0)
    assert result.status.value == "completed"
    assert result.metrics["rmse_position_m"] < 0.04


def test_converge_time_must_be_positive(paper_config):
    with pytest.raises(ValueError, match="converge_s"):
        FormationPlanner(paper_config.system, tilt=True, converge_s=0.0)
