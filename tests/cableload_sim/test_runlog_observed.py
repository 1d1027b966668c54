"""Run logs keep what the planners observed beside the true state."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("rosbags")

from cableload_sim.io.runlog import RunLogWriter, read_run  # noqa: E402
from cableload_sim.params import SensingParams  # noqa: E402


def fly_logged(config, path):
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    observed = []

    def on_period(state, _plans):
        observed.append(state)

    result = run_episode(
        make_backend("embedded", config),
        make_planner("formation", config),
        make_reference("eight-slow"),
        2.0,
        keep_samples=True,
        on_period=on_period,
        logger=RunLogWriter(path, config),
    )
    return result, observed


def test_observed_states_are_logged_beside_the_true_ones(tmp_path, paper_config):
    config = dataclasses.replace(paper_config, sensing=SensingParams(enabled=True))
    result, observed = fly_logged(config, tmp_path / "sensed.bag")
    run = read_run(tmp_path / "sensed.bag")
    assert run.observed is not None and len(run.observed) == len(observed) == 20
    np.testing.assert_allclose(run.observed.t, [s.t for s in observed], atol=1e-9)
    np.testing.assert_allclose(run.observed.load_p, [s.load_p for s in observed], atol=1e-12)
    np.testing.assert_allclose(run.observed.uav_v, [s.uav_v for s in observed], atol=1e-12)
    np.testing.assert_allclose(run.observed.load_omega, [s.load_omega for s in observed], atol=1e-12)
    # the samples stay the true state: at the plan times they differ from the observed one
    # by the sensors' error, millimetres
    k = np.searchsorted(run.samples.t, run.observed.t[1:] - 1e-9)
    error = np.linalg.norm(run.samples.load_p[k] - run.observed.load_p[1:], axis=-1)
    assert np.all(error > 0.0) and np.all(error < 0.01)
    np.testing.assert_allclose(run.samples.load_p, result.samples.load_p, atol=1e-12)


def test_without_sensors_the_observed_state_is_the_true_one(tmp_path, paper_config):
    result, observed = fly_logged(paper_config, tmp_path / "plain.bag")
    run = read_run(tmp_path / "plain.bag")
    k = np.searchsorted(run.samples.t, run.observed.t[1:] - 1e-9)
    np.testing.assert_allclose(run.observed.load_p[1:], run.samples.load_p[k], atol=1e-12)
    np.testing.assert_allclose(run.observed.uav_q[1:], run.samples.uav_q[k], atol=1e-12)
