"""The teacher's hard constraints, its checks before sending, and what it does when they fail:
separation and tension bounds held against what tracking wants, failures that do not cascade,
the reference slowed (down to a hold) when no plan keeps the constraints. Short closed loops on
the embedded simulator (three quadrotors; one compiled teacher, cached on disk)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from backends import make_backend
from backends.runner import EpisodeStatus, run_episode
from cableload_sim.trajectories import make_reference
from planners.teacher import TeacherPlanner
from planners.teacher_model import C_TENSION, cable_offset
from planners.teacher_ocp import StepInfo


def fly(config, planner, duration, trajectory="eight-medium", **kw):
    return run_episode(make_backend("embedded", config), planner, make_reference(trajectory), duration, **kw)


def with_teacher(config, **changes):
    return dataclasses.replace(config, teacher=dataclasses.replace(config.teacher, **changes))


def node_distances(trajectories):
    """Smallest distance between two quadrotors at each node of one plan's trajectories, and at
    its first node per pair."""
    p = np.stack([tr.p for tr in trajectories], axis=1)  # (nodes, n, 3)
    n = p.shape[1]
    pairs = [(i, j) for i in range(n) for j in range(i)]
    d = np.stack([np.linalg.norm(p[:, i] - p[:, j], axis=1) for i, j in pairs], axis=1)
    return d, d[0]


def test_separation_holds_against_the_formation_it_would_rather_keep(paper_config):
    """1.25 m between quadrotors, more than the 1.2 m of the hover formation that the cost
    pulls toward: no plan ever brings two quadrotors closer than 1.25 m, or than they start;
    within 2 s the formation has widened past 1.25 m and it stays there in flight."""
    config = with_teacher(paper_config, min_distance=1.25)
    teacher = TeacherPlanner.from_config(config)
    result = fly(config, teacher, 6.0, record_plans=True, keep_samples=True)
    assert result.status is EpisodeStatus.COMPLETED
    for record in result.plans:
        d, start = node_distances(record.trajectories)
        assert (d >= np.minimum(1.25, start) - 1e-3).all()
        if record.t >= 2.0:
            assert d.min() >= 1.25 - 1e-3
    samples = result.samples
    late = samples.t >= 2.0
    p = samples.uav_p[late]
    closest = min(np.linalg.norm(p[:, i] - p[:, j], axis=1).min() for i in range(3) for j in range(i))
    assert closest >= 1.23
    # the widening from rest may cost a plan or two that fail their check (the plan bounds, or
    # the separation while the prior still pulls toward 1.2 m: measured one), each flown as
    # the previous plan shifted: never sent
    report = teacher.report()
    assert report["solver_failures"] <= 2


def test_tension_bound_holds_against_the_static_share(paper_config):
    """The third cable carries 7.7 N at hover; with a 6.5 N bound every plan keeps every
    tension at most 6.5 N (the formation reshapes to share the load differently), and the
    load is still flown along the reference."""
    config = with_teacher(paper_config, tension_max=6.5)
    teacher = TeacherPlanner.from_config(config)
    tensions = []
    plan = teacher.plan

    def recording(state, reference):
        plans = plan(state, reference)
        if teacher.flown is not None and teacher.flown.t == state.t:
            tensions.append(teacher.flown.X[1:, [cable_offset(i) + C_TENSION for i in range(3)]])
        return plans

    teacher.plan = recording
    result = fly(config, teacher, 6.0, trajectory="eight-slow")
    assert result.status is EpisodeStatus.COMPLETED
    assert len(tensions) >= 55
    assert max(t.max() for t in tensions) <= 6.5 + 1e-3
    assert result.metrics["rmse_position_m"] < 0.1


def test_failed_solves_fall_back_without_a_cold_restart(paper_config, monkeypatch):
    """Three solves in a row fail outright (non-finite iterate): the checked previous plan is
    flown shifted three times, reported as one run of three; the solver restarts warm from the
    plan being flown, never with the cold start's iterations, and flies on."""
    teacher = TeacherPlanner.from_config(paper_config)
    step = teacher.ocp.sqp_step
    calls = {"plan": 0}
    plan = teacher.plan

    def counting(state, reference):
        calls["plan"] += 1
        return plan(state, reference)

    def sometimes_broken(it, ref):
        if 20 <= calls["plan"] < 23:
            it.X[:] = np.nan
            return StepInfo(False, np.inf, 0.0, 1.0)
        return step(it, ref)

    monkeypatch.setattr(teacher.ocp, "sqp_step", sometimes_broken)
    teacher.plan = counting
    result = fly(paper_config, teacher, 6.0, record_plans=True)
    report = teacher.report()
    assert result.status is EpisodeStatus.COMPLETED
    assert report["fallback_plans"] == 3 and report["longest_fallback_plans"] == 3
    assert report["longest_fallback_s"] == pytest.approx(0.3, abs=1e-9)
    assert report["fallback_holds"] == 0 and report["warm_restarts"] == 3
    cold = paper_config.teacher.max_iter
    later = teacher.iterations[1:]
    assert max(later) <= 1 + 2 * paper_config.teacher.recovery_iterations < cold
    assert result.metrics["rmse_position_m"] < 0.02
    # the fallback plans are the last good plan, shifted
    good = result.plans[18].trajectories
    for record in result.plans[19:22]:
        for old, new in zip(good, record.trajectories):
            assert np.allclose(
                new.p[0], [np.interp(record.t, old.t, old.p[:, r]) for r in range(3)], atol=1e-9
            )


def test_no_plan_slows_the_reference_down_to_a_hold_and_then_catches_up(paper_config):
    """While every plan fails its check, the load's progress along the reference is halved
    each period down to a hold, and the failures are flown as the previous plan; once plans
    pass again the pace returns and, above 1, makes up part of the delay."""
    teacher = TeacherPlanner.from_config(paper_config)
    checked = teacher._checked
    calls = {"check": 0, "plan": 0}
    paces, lags = [], []
    plan = teacher.plan

    def failing(times, it):
        plans, why = checked(times, it)
        return plans, ("separation" if 10 <= calls["plan"] < 16 else why)

    def counting(state, reference):
        calls["plan"] += 1
        plans = plan(state, reference)
        paces.append(teacher.pace)
        lags.append(state.t - teacher.clock)
        return plans

    teacher._checked = failing
    teacher.plan = counting
    result = fly(paper_config, teacher, 8.0)
    report = teacher.report()
    assert result.status is EpisodeStatus.COMPLETED
    # the six refused, and at most one more while catching up (a plan over the plan bounds)
    assert 6 <= report["fallback_plans"] <= 7 and report["min_pace"] == 0.0
    assert report["held_reference_plans"] >= 1
    # plans 10 to 15 (paces[9:15]) fail: 0.5, 0.25, 0.125, then a hold below 0.1
    assert paces[9:13] == [0.5, 0.25, 0.125, 0.0] and paces[13:15] == [0.0, 0.0]
    assert max(paces[15:]) > 1.0  # catching up: the delay peaks, then shrinks
    assert max(lags) > 0.5 and report["reference_lag_s"] < max(lags) - 0.4


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("pace_factor", 1.0, "expected below 1"),
        ("pace_catch_up", 1.5, "expected at most 1"),
        ("exact_penalty", 0.0, "expected a positive number"),
        ("recovery_iterations", 1.5, "expected an integer"),
        ("constraint_weight", 1e3, "unknown key"),
    ],
)
def test_teacher_table_refuses_bad_values(tmp_path, key, value, expected):
    from cableload_sim.params import ConfigError, load_config

    path = tmp_path / "teacher.toml"
    path.write_text(f"[teacher]\n{key} = {value}\n")
    with pytest.raises(ConfigError, match=expected):
        load_config(path)
