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


@pytest.mark.parametrize("tilt", [False, True])
@pytest.mark.parametrize("trajectory,orientation", [("eight-medium", "zero-sideslip"),
                                                    ("square", "constant"),
                                                    ("circle", "oscillating")])
def test_formation_kernels_compute_their_numpy_definitions(paper_config, tilt, trajectory,
                                                           orientation):
    """The compiled formation and slot derivatives against the NumPy expressions they replace;
    and the reference at the nodes, taken from the derivatives' stencil, is the reference."""
    from cableload_sim.horizon import node_times
    from planners.formation import _FD_STEP, _STENCIL, _slot_derivatives_numpy

    planner = FormationPlanner(paper_config.system, tilt=tilt)
    reference = make_reference(trajectory, orientation=orientation)
    times = np.linspace(0.0, 15.0, 301)
    for got, want in zip(planner._formation(reference, times),
                         planner._formation_numpy(reference, times), strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    t = 4.13
    stencil = (node_times(t)[:, None] + _FD_STEP * _STENCIL[None, :]).ravel()
    p, pull = planner._formation_numpy(reference, stencil)
    want = _slot_derivatives_numpy(p, pull, planner.masses, planner.gravity, _FD_STEP)
    slots, nodes = planner.slots_and_sample(t, reference)
    for m, name in enumerate(("p", "v", "a", "j", "body_rates")):
        got = np.stack([getattr(slot, name) for slot in slots], axis=1)
        # finite differences amplify rounding: 1e-16 m over h^3 = 8e-9 s^3
        np.testing.assert_allclose(got, want[m], rtol=0, atol=1e-6 * max(1.0, np.abs(want[m]).max()))
    exact = reference.sample(node_times(t))
    for name in ("t", "p", "v", "a", "j", "q", "omega", "alpha"):
        np.testing.assert_array_equal(getattr(nodes, name), getattr(exact, name))
