"""A reference beyond what the system can fly is refused before the flight, naming the limit,
where it is exceeded and by how much; the estimate behind it balances forces exactly and matches
what a planner really asks of the rotors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backends.session import Flight, build_planner, fly
from cableload_sim.cli import main
from cableload_sim.errors import UsageError
from cableload_sim.params import load_config
from cableload_sim.physics.feasibility import (
    _quasi_static_forces,
    check_reference,
    require_flyable,
)
from cableload_sim.physics.statics import hover_state
from cableload_sim.rotations import quat_to_matrix
from cableload_sim.trajectories import make_reference

OLD_ZANDVOORT = {"track_size": 6.0, "speed": 1.5, "min_radius": 0.3}


def test_hover_needs_exactly_the_hover_thrust(paper_config):
    check = check_reference(make_reference("hover", z=1.0), paper_config)
    hover = hover_state(paper_config.system, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
    needed = np.linalg.norm(hover.thrusts, axis=1)
    assert check.thrust.value == pytest.approx(needed.max(), rel=1e-9)
    assert check.thrust.uav == int(np.argmax(needed))
    assert check.tension_max.value == pytest.approx(hover.tensions.max(), rel=1e-9)
    assert check.acceleration.value == 0.0 and check.flyable


@pytest.mark.parametrize("uavs", [3, 4, 6])
@pytest.mark.parametrize("orientation", ["constant", "zero-sideslip"])
def test_the_cable_forces_give_the_load_its_reference_wrench(uavs, orientation):
    """Newton and Euler for the load along a zero-sideslip eight (turning, accelerating):
    sum F = m (a + g) and sum r x F = R (J alpha + omega x J omega), for n = 3 exactly and in
    least squares (here exactly too) for more."""
    config = load_config(None, uavs=uavs)
    system = config.system
    s = make_reference("eight-medium", orientation=orientation).sample(np.linspace(0, 16, 161))
    forces, thrusts = _quasi_static_forces(system, s)
    g = np.array([0.0, 0.0, system.gravity])
    np.testing.assert_allclose(forces.sum(axis=1), system.load.mass * (s.a + g), atol=1e-9)
    R = quat_to_matrix(s.q)
    J = system.load.inertia_matrix()
    torque = np.einsum("kab,kb->ka", R, s.alpha @ J.T + np.cross(s.omega, s.omega @ J.T))
    arms = np.einsum("kab,nb->kna", R, system.attachment_array())
    np.testing.assert_allclose(np.cross(arms, forces).sum(axis=1), torque, atol=1e-9)
    # the whole system: rotors carry every mass along (constant orientation: no rotation)
    if orientation == "constant":
        masses = system.load.mass + sum(q.mass for q in system.quadrotors)
        np.testing.assert_allclose(thrusts.sum(axis=1), masses * (s.a + g), atol=1e-9)


def test_the_estimate_matches_the_thrust_a_planner_flies(paper_config):
    """Formation-tilt (the formation the estimate models) on eight-medium: the flown peak thrust
    within 5 % of the estimate."""
    reference = make_reference("eight-medium")
    check = check_reference(reference, paper_config, 20.0)
    flight = Flight(paper_config, reference, 20.0)
    flown = fly(flight, build_planner(flight, "formation-tilt"))
    estimate = check.thrust.value / paper_config.system.quadrotors[0].rotor.max_thrust()
    assert flown["status"] == "completed"
    assert flown["max_thrust_ratio"] == pytest.approx(estimate, rel=0.05)


def test_the_old_zandvoort_defaults_are_refused_naming_the_limit_and_where(paper_config):
    reference = make_reference("track:zandvoort", **OLD_ZANDVOORT)
    check = check_reference(reference, paper_config)
    assert not check.flyable
    with pytest.raises(
        UsageError,
        match=r"thrust 18\.5 N at quadrotor 2, t = 11\.9\d s, load at "
        r"\(2\.1\d, -0\.[23]\d, 1\.00\) m: 0\.5\d+ N above the limit "
        r"18 N \(103% of it; teacher\.thrust_margin 0\.9",
    ):
        require_flyable(reference, paper_config, 30.0)
    # the first 3 s (the smooth start) reach no hairpin: a 3 s flight is not refused
    assert require_flyable(reference, paper_config, 3.0).flyable


def test_the_catalog_defaults_are_flyable(paper_config):
    for name in (
        "eight-slow",
        "eight-medium",
        "circle",
        "square",
        "track:zandvoort",
        "pose-to-pose",
        "hover",
    ):
        for orientation in ("constant", "zero-sideslip"):
            if name in ("pose-to-pose", "hover") and orientation != "constant":
                continue
            check = check_reference(make_reference(name, orientation=orientation), paper_config)
            assert check.flyable, check.message()


def test_a_yawing_eight_too_fast_for_the_rotors_is_refused(paper_config):
    """eight-fast with zero sideslip turns the load at 4.7 rad/s: the outer quadrotors, carried
    1.2 m out, would need more than their maximum thrust and 67 deg of tilt."""
    check = check_reference(make_reference("eight-fast", orientation="zero-sideslip"), paper_config)
    assert [e.quantity for e in check.excesses] == ["thrust", "tilt"]
    assert check.thrust.value > paper_config.system.quadrotors[0].rotor.max_thrust()
    assert check.angular_rate.value == pytest.approx(4.74, abs=0.01)
    assert check_reference(make_reference("eight-fast"), paper_config).flyable


def test_the_command_line_refuses_or_forces(capsys):
    old = ["--trajectory", "track:zandvoort", "--track-size", "6", "--speed", "1.5"]
    assert main(["simulate", *old, "--duration", "13", "--planner", "formation"]) == 2
    err = capsys.readouterr().err
    assert "cannot be flown over 13 s: thrust 18.5 N at quadrotor 2" in err
    assert "--force" in err
    code = main(["simulate", *old, "--duration", "13", "--planner", "formation", "--force", "--json"])
    captured = capsys.readouterr()
    assert "warning: --force: track:zandvoort (constant) cannot be flown" in captured.err
    assert json.loads(captured.out)["sim_time_s"] > 0.0 and code in (0, 1)
    assert (
        main(
            ["evaluate", "--trajectories", "eight-fast", "--orientation", "zero-sideslip", "--duration", "10"]
        )
        == 2
    )
    assert "eight-fast (zero-sideslip) cannot be flown" in capsys.readouterr().err


def test_trajectories_check(capsys):
    assert main(["trajectories", "--check", "track:zandvoort", "--track-size", "6", "--speed", "1.5"]) == 1
    out = capsys.readouterr().out
    assert "thrust" in out and "cannot be flown" in out and "teacher.thrust_margin" in out
    assert main(["trajectories", "--check", "eight-medium", "--orientation", "zero-sideslip", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["flyable"] and report["excesses"] == []
    assert report["peaks"]["speed"]["value"] == pytest.approx(2.36, abs=0.01)
    assert report["peaks"]["angular_rate"]["value"] == pytest.approx(2.37, abs=0.01)
    assert main(["trajectories", "--check", "eight-slow", "--uavs", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["flyable"]


def test_training_on_an_unflyable_reference_is_refused_before_anything_is_written(tmp_path, capsys):
    config = tmp_path / "train.toml"
    config.write_text(
        '[dagger]\ntrajectories = ["eight-fast"]\norientation = "both"\n'
        "rounds = 1\nepisode_s = 5.0\neval_s = 0.0\n"
    )
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--out", str(out)]) == 2
    assert "eight-fast (zero-sideslip) cannot be flown" in capsys.readouterr().err
    assert not out.exists()
