"""The time constant of the student's prior (``network.prior_converge_s``): part of the policy,
used wherever the policy flies, 0.5 s for policies trained before it was an option, and a bad
value refused naming it."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.physics.simulator import Simulator
from cableload_sim.trajectories import make_reference
from learners.config import train_config_from_dict
from learners.export import (
    GENERALIST_POLICIES,
    SHIPPED_POLICY,
    export_policy,
    student_planner,
)
from learners.network import NetworkConfig, StudentNet
from planners.student import PRIOR_CONVERGE_S


@pytest.mark.parametrize("value", [0.0, -0.3, float("nan"), float("inf"), "0.3", True])
def test_a_bad_time_constant_is_refused_naming_it(value):
    with pytest.raises(ValueError, match=r"prior_converge_s: expected a positive time \(s\)"):
        NetworkConfig(prior_converge_s=value)


def test_the_training_config_takes_it():
    config = train_config_from_dict({"network": {"prior_converge_s": 0.3}})
    assert config.network.prior_converge_s == 0.3
    with pytest.raises(ValueError, match="prior_converge_s"):
        train_config_from_dict({"network": {"prior_converge_s": -1.0}})


def test_a_policy_flies_with_its_own_time_constant(tmp_path, paper_config):
    """An untrained student (decoder at zero) plans its prior exactly: from a quadrotor 10 cm
    off its slot, the plan closes the gap as exp(-t / prior_converge_s)."""
    policies = {}
    for tau in (0.3, 0.5):
        net = StudentNet(
            NetworkConfig(frame="load-yaw", prior="formation-follow", zero_init=True, prior_converge_s=tau)
        )
        export_policy(net, tmp_path / str(tau), info={"hover_calibration": False})
        policies[tau] = student_planner(paper_config, tmp_path / str(tau), "torch")
        assert policies[tau].prior.converge_s == tau
    # shipped before the option (the eight-medium specialist): the constant it was trained with
    assert student_planner(paper_config, SHIPPED_POLICY, "onnx").prior.converge_s == PRIOR_CONVERGE_S == 0.5
    assert student_planner(paper_config, GENERALIST_POLICIES[3], "onnx").prior.converge_s == 0.3
    sim = Simulator(paper_config)
    sim.advance(100)
    state = sim.world_state()
    reference = make_reference("hover", z=float(state.load_p[2]))
    for tau, planner in policies.items():
        slot = planner.prior.slot_plans(state.t, reference)[0]
        moved = state.uav_p.copy()
        moved[0] = slot.p[0] + np.array([0.1, 0.0, 0.0])
        plan = planner.plan(type(state)(**{**vars(state), "uav_p": moved}), reference)[0]
        gap = plan.p[:, 0] - slot.p[:, 0]
        k = np.searchsorted(plan.t - plan.t[0], tau)  # the node nearest one time constant
        expected = 0.1 * np.exp(-(plan.t[k] - plan.t[0]) / tau)
        assert gap[0] == pytest.approx(0.1, abs=1e-9)
        assert gap[k] == pytest.approx(expected, abs=2e-3)
