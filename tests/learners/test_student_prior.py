"""``student-prior``: the student with its network's output zeroed flies exactly its bare prior
(the same encoding, prior and time constant as the policy), so that what the network adds can be
measured; a policy without a prior is refused naming it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cableload_sim.cli.main import main
from cableload_sim.errors import UsageError
from cableload_sim.physics.simulator import Simulator
from cableload_sim.trajectories import make_reference
from learners.export import GENERALIST_POLICIES, export_policy, student_planner
from learners.network import NetworkConfig, StudentNet
from planners import make_planner


def _state_and_reference(config):
    sim = Simulator(config)
    sim.advance(100)
    state = sim.world_state()
    return state, make_reference("eight-medium")


def test_it_flies_what_an_untrained_student_of_the_same_policy_flies(tmp_path, paper_config):
    """A zero-initialized network plans its prior exactly: ``student-prior`` of the shipped
    generalist plans the same as an untrained student with the generalist's network config,
    and not what the trained generalist plans."""
    policy = GENERALIST_POLICIES[3]
    bare = make_planner("student-prior", paper_config, policy=policy)
    trained = make_planner("student", paper_config, policy=policy)
    assert bare.name == "student-prior" and trained.name == "student"
    assert bare.prior.converge_s == trained.prior.converge_s == 0.3
    net = StudentNet(
        NetworkConfig(frame="load-yaw", prior="formation-follow", zero_init=True, prior_converge_s=0.3)
    )
    export_policy(net, tmp_path / "untrained", info={"hover_calibration": False}, system=paper_config.system)
    untrained = student_planner(paper_config, tmp_path / "untrained", "torch")
    state, reference = _state_and_reference(paper_config)
    for a, b, c in zip(
        bare.plan(state, reference), untrained.plan(state, reference), trained.plan(state, reference)
    ):
        assert np.all(np.isfinite(a.p))
        np.testing.assert_allclose(a.p, b.p, atol=2e-5)  # float32 network against float64
        np.testing.assert_allclose(a.v, b.v, atol=2e-4)
        assert np.max(np.abs(a.p - c.p)) > 1e-4  # the trained network does add something


def test_a_policy_without_a_prior_is_refused_naming_it(tmp_path, paper_config):
    net = StudentNet(NetworkConfig(residual=False))
    export_policy(net, tmp_path / "scratch", info={})
    with pytest.raises(UsageError, match=r"student-prior: policy .*scratch.*residual = false"):
        make_planner("student-prior", paper_config, policy=tmp_path / "scratch")


def test_the_command_line_flies_it(capsys):
    assert main(["simulate", "--planner", "student-prior", "--duration", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["planner"] == "student-prior"
    assert result["status"] == "completed"
