"""Long runs: memory does not grow with the duration; what cannot be flown is refused."""

from __future__ import annotations

import re
import weakref

import numpy as np
import pytest

from backends import make_backend
from backends.runner import EpisodeStatus, run_episode
from cableload_sim.errors import ResourceError, UsageError
from cableload_sim.physics.world import UavTrajectory
from cableload_sim.trajectories import make_reference
from planners import make_planner
from planners.base import hover_plan


class CountingBackend:
    """The embedded backend, counting how many of the sample chunks it returned are alive."""

    def __init__(self, backend):
        self.backend = backend
        self.returned: list[weakref.ref] = []
        self.most_alive = 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    @property
    def alive(self) -> int:
        return sum(ref() is not None for ref in self.returned)

    def advance(self):
        samples = self.backend.advance()
        self.returned.append(weakref.ref(samples))
        self.most_alive = max(self.most_alive, self.alive)
        return samples


def fly(config, keep_samples: bool, duration: float = 3.0):
    backend = CountingBackend(make_backend("embedded", config))
    result = run_episode(
        backend,
        make_planner("formation", config),
        make_reference("eight-slow"),
        duration,
        keep_samples=keep_samples,
    )
    return backend, result


def test_the_runner_holds_a_bounded_number_of_samples(paper_config):
    streamed_backend, streamed = fly(paper_config, keep_samples=False)
    kept_backend, kept = fly(paper_config, keep_samples=True)
    assert streamed.samples is None and streamed.ref_p is None
    assert streamed_backend.most_alive <= 2  # the period being checked, whatever the duration
    assert kept_backend.most_alive == 30 and len(kept.samples) == 300
    # the metrics do not depend on keeping the samples
    for key in (
        "rmse_position_m",
        "rmse_orientation_deg",
        "min_uav_distance_m",
        "max_thrust_ratio",
        "slack_fraction",
        "sim_time_s",
    ):
        assert streamed.metrics[key] == kept.metrics[key], key


def test_keeping_samples_that_would_not_fit_is_refused(paper_config, monkeypatch):
    monkeypatch.setattr("backends.runner.available_memory", lambda: 1e6)
    with pytest.raises(
        ResourceError,
        match=r"keeping the samples of a 60 s episode needs about "
        r"[\d.]+ GB of memory, 0\.001 GB are available",
    ):
        fly(paper_config, keep_samples=True, duration=60.0)
    _, result = fly(paper_config, keep_samples=False, duration=1.0)  # streaming needs none
    assert result.status is EpisodeStatus.COMPLETED


def test_a_duration_shorter_than_a_planner_period_is_refused(paper_config):
    with pytest.raises(UsageError, match=r"at least one planner period \(0\.1 s\), got 0\.05"):
        fly(paper_config, keep_samples=False, duration=0.05)


def test_a_reference_outside_the_plan_bounds_is_refused_before_flight(paper_config):
    backend = make_backend("embedded", paper_config)
    deep = make_reference("eight-slow", z=-100.0)
    with pytest.raises(
        UsageError,
        match=r"eight-slow: at t = 0\.00 s quadrotor 0 would be at "
        r"\[.*-99\.\d+\] m, outside the allowed box",
    ):
        run_episode(backend, make_planner("formation", paper_config), deep, 10.0)
    fast = make_reference("circle", radius=10.0, w=2.0)  # 20 m/s
    with pytest.raises(UsageError, match=r"the load's speed reaches 20 m/s"):
        run_episode(backend, make_planner("formation", paper_config), fast, 10.0)


class AlwaysBroken:
    """Every plan it makes is non-finite: the guard replaces them all."""

    name = "broken"

    def reset(self):
        pass

    def report(self):
        return {}

    def plan(self, state, reference):
        plans = []
        for p in state.uav_p:
            plan = hover_plan(state.t, p)
            plans.append(UavTrajectory(plan.t, plan.p * np.nan, plan.v, plan.a, plan.j, plan.body_rates))
        return plans


def test_a_planner_whose_every_plan_is_replaced_has_failed(paper_config):
    result = run_episode(
        make_backend("embedded", paper_config), AlwaysBroken(), make_reference("hover"), 10.0
    )
    assert result.status is EpisodeStatus.PLANNER_FAILED
    assert result.metrics["status"] == "planner_failed"
    # stopped once the last plan had run out (the 1.91 s horizon), not after 10 s
    assert 1.9 < result.metrics["sim_time_s"] <= 2.2
    assert re.match(
        r"every plan replaced for 2\.\d s \(first: t=0\.00 s uav 0: non-finite", result.message
    ), result.message
