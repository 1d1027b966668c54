"""Student inference: one plan for one quadrotor on one thread (the paper: 97 ms on a Raspberry
Pi 5 CPU, 27 ms on a laptop GPU).

``policy`` times the network alone (traced torch, onnxruntime or the pass compiled with numba,
``learners.numba_policy``, the default; batch of one quadrotor);
``planner`` times everything the quadrotors do per decision in one process (encoding each
observation history, the formation prior computed once for all, the network on the batch, the
bounds check): divide by the number of quadrotors. ``decision`` times one quadrotor deciding
alone, as a planner node does (its own prior, a batch of one): the issue's figure, for the
specialist and the generalist of three. Uses the shipped policy when present, else an
untrained network of the shipped configuration (the time does not depend on weights).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from cableload_sim.params import load_config
from cableload_sim.physics.simulator import Simulator
from cableload_sim.trajectories import make_reference
from learners.export import GENERALIST_POLICIES, SHIPPED_POLICY, export_policy, load_policy
from learners.network import NetworkConfig, StudentNet
from planners.student import StudentPlanner


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    if (SHIPPED_POLICY / "student.pt").is_file():
        return SHIPPED_POLICY
    path = tmp_path_factory.mktemp("policy")
    torch.manual_seed(0)
    export_policy(StudentNet(NetworkConfig()), path)
    return path


def _planner_at_hover(policy_dir, runtime):
    """(policy, planner, world state near hover, reference) on one torch thread."""
    torch.set_num_threads(1)
    policy, history, _ = load_policy(policy_dir, runtime)
    config = load_config(None)
    planner = StudentPlanner.from_config(config, policy, history)
    sim = Simulator(config)
    sim.advance(100)
    return policy, planner, sim.world_state(), make_reference("eight-medium")


@pytest.mark.parametrize("runtime", ["torch", "onnx", "numba"])
def test_student_policy_time(benchmark, policy_dir, runtime):
    policy, planner, state, reference = _planner_at_hover(policy_dir, runtime)
    encoded = planner.observe(state, reference)[0]
    inputs = tuple(x[None] for x in (encoded.ego, encoded.load, encoded.ref, encoded.prior))
    for _ in range(20):
        policy(*inputs)
    benchmark.pedantic(lambda: policy(*inputs), rounds=500, iterations=1)
    out = policy(*inputs)
    assert all(np.isfinite(out[k]).all() for k in ("p", "v", "a", "j", "w"))


@pytest.mark.parametrize("runtime", ["torch", "onnx", "numba"])
def test_student_planner_time_per_quadrotor(benchmark, policy_dir, runtime):
    _, planner, state, reference = _planner_at_hover(policy_dir, runtime)
    for _ in range(20):
        planner.plan(state, reference)
    benchmark.pedantic(lambda: planner.plan(state, reference), rounds=200, iterations=1)
    benchmark.extra_info["quadrotors"] = planner.system.n_uavs
    benchmark.extra_info["note"] = "time is for all quadrotors; divide by 'quadrotors'"


@pytest.mark.parametrize("which", ["specialist", "generalist"])
@pytest.mark.parametrize("runtime", ["onnx", "numba"])
def test_student_decision_of_one_quadrotor(benchmark, which, runtime, policy_dir):
    """Encoding, prior, network (onnxruntime on one thread, or compiled) and bounds for
    quadrotor 0 alone."""
    from learners.export import student_planner

    directory = policy_dir if which == "specialist" else GENERALIST_POLICIES[3]
    if not (directory / "student.onnx").is_file():
        pytest.skip(f"no exported policy in {directory}")
    torch.set_num_threads(1)
    config = load_config(None)
    planner = student_planner(config, directory, runtime)
    sim = Simulator(config)
    sim.advance(100)
    state, reference = sim.world_state(), make_reference("eight-medium")
    # at a time of the flight past the reference's start ramp, where nearly all decisions are
    obs = dataclasses.replace(state.local(0, planner.rho[0], planner.attach[0]), t=12.3)

    def decide():
        encoded = planner.observe_local(0, obs, reference)
        return planner.act([encoded], obs.uav_p[None], [0])[0]

    for _ in range(20):
        decide()
    benchmark.pedantic(decide, rounds=500, iterations=1)
    benchmark.extra_info["frame"] = planner.frame
    assert planner.bad_outputs == 0 and np.isfinite(decide().p).all()


@pytest.fixture
def busy_core():
    """Another CPU-bound process for the duration of a benchmark (the second core busy)."""
    import subprocess
    import sys

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield spinner
    spinner.kill()
    spinner.wait()


@pytest.mark.parametrize("runtime", ["torch", "onnx", "numba"])
def test_student_decision_with_the_other_core_busy(benchmark, policy_dir, runtime, busy_core):
    """One quadrotor's whole decision, as the command line runs it (torch left at its default
    thread count: the policy pins its own), while another process keeps a core busy."""
    from learners.export import student_planner

    torch.set_num_threads(max(2, torch.get_num_threads()))  # what a fresh process has here
    config = load_config(None)
    planner = student_planner(config, GENERALIST_POLICIES[3], runtime)
    sim = Simulator(config)
    sim.advance(100)
    state, reference = sim.world_state(), make_reference("eight-medium")
    obs = dataclasses.replace(state.local(0, planner.rho[0], planner.attach[0]), t=12.3)

    def decide():
        encoded = planner.observe_local(0, obs, reference)
        return planner.act([encoded], obs.uav_p[None], [0])[0]

    for _ in range(20):
        decide()
    benchmark.pedantic(decide, rounds=500, iterations=1)
    times = np.array(benchmark.stats.stats.data) * 1e3
    benchmark.extra_info.update(
        decision_ms_median=float(np.median(times)), decision_ms_p99=float(np.percentile(times, 99))
    )
    assert busy_core.poll() is None and np.isfinite(decide().p).all()
