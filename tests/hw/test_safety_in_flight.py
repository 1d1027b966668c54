"""The safety module in the loop on the embedded backend: it changes nothing where no rule
fires, and a rule that fires stops the run (``safety_stop``), holds the quadrotors and is in
the run log."""

from __future__ import annotations

import numpy as np

from backends.base import Scenario
from backends.embedded import EmbeddedBackend
from backends.runner import run_episode
from cableload_sim.io.runlog import RunLogWriter, read_run
from cableload_sim.params import load_config
from cableload_sim.trajectories import make_reference
from hw.safety import SafetyLimits, SafetyModule
from planners.formation import FormationPlanner


def fly(config, safety, duration=3.0, logger=None):
    return run_episode(
        EmbeddedBackend(config),
        FormationPlanner(config.system, tilt=True),
        make_reference("eight-medium"),
        duration,
        keep_samples=True,
        safety=safety,
        logger=logger,
    )


def test_where_no_rule_fires_the_flight_is_the_same_bit_for_bit(paper_config):
    on = fly(paper_config, SafetyModule())
    off = fly(paper_config, False)
    assert on.status.value == off.status.value == "completed"
    assert on.metrics["safety_events"] == []
    for name in ("load_p", "uav_p", "cable_tension"):
        np.testing.assert_array_equal(getattr(on.samples, name), getattr(off.samples, name))
    assert on.metrics["rmse_position_m"] == off.metrics["rmse_position_m"]


def test_a_plan_leaving_the_geofence_stops_the_run_and_holds_every_quadrotor(paper_config, tmp_path):
    # the quadrotors reach |y| = 2.4 m in the first lap: plans cross a fence at |y| = 2 m
    # within seconds, while every quadrotor is still inside the arena
    limits = SafetyLimits(arena_min=(-5.0, -2.5, -0.5), arena_max=(5.0, 2.5, 4.0), geofence_margin_m=0.5)
    path = tmp_path / "fence.bag"
    with RunLogWriter(path, paper_config) as log:
        result = fly(paper_config, SafetyModule(limits), duration=10.0, logger=log)
    assert result.status.value == "safety_stop", result.message
    events = result.metrics["safety_events"]
    assert events and events[0]["rule"] == "geofence" and events[0]["action"] == "hover"
    stop = events[0]["t"]
    assert result.samples.t[-1] < stop + 0.11  # one more period, then the end
    # after the stop the quadrotors hold where they were (brake, no further travel)
    after = result.samples.t > stop + 0.05
    travel = np.linalg.norm(result.samples.uav_p[after][-1] - result.samples.uav_p[after][0], axis=-1)
    assert travel.max() < 0.1
    run = read_run(path)
    assert run.status == "safety_stop"
    assert [e["rule"] for e in run.safety_events] == [e["rule"] for e in events]
    assert run.plans[-1].t < stop  # the refused plans were not sent, nor logged as sent


def test_the_separation_rule_stops_what_the_collision_check_would_call_too_close(paper_config):
    # a minimum distance above the formation's 1.16 m: the rule fires at the first decision
    result = fly(paper_config, SafetyModule(SafetyLimits(min_distance_m=1.5)), duration=1.0)
    assert result.status.value == "safety_stop"
    assert {e["rule"] for e in result.metrics["safety_events"]} >= {"separation"}
    assert {e["action"] for e in result.metrics["safety_events"] if e["rule"] == "separation"} == {"off"}


def test_a_low_battery_lands_the_team(paper_config):
    config = load_config(overrides=["battery.enabled=true"])
    volts = EmbeddedBackend(config)
    volts.reset(Scenario(np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0])))
    nominal = float(volts.safety_inputs()["voltage"].min())
    result = fly(config, SafetyModule(SafetyLimits(min_voltage_v=nominal + 0.5)), duration=1.0)
    assert result.status.value == "safety_stop"
    assert result.metrics["safety_events"][0]["rule"] == "low_battery"
    assert result.metrics["safety_events"][0]["action"] == "land"
