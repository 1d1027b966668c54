"""The shipped student policy: it loads, flies its training trajectory near the teacher, and the
command line reports it (``simulate --planner student``, ``evaluate``)."""

from __future__ import annotations

import json

import pytest

from cableload_sim.cli import SIM_KEYS, main
from learners.export import SHIPPED_POLICY, load_policy


def run_json(capsys, argv):
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_shipped_policy_is_there_and_loads():
    info = json.loads((SHIPPED_POLICY / "policy.json").read_text())
    assert info["trained_on"] == ["eight-medium"] and info["rounds"] == 20
    for runtime in ("torch", "onnx"):
        policy, history, _ = load_policy(None, runtime)
        assert history == info["network"]["history"]


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_student_flies_its_training_trajectory(capsys, runtime):
    code, data = run_json(capsys, ["simulate", "--planner", "student", "--runtime", runtime,
                                   "--trajectory", "eight-medium", "--duration", "12", "--json"])
    assert code == 0
    for key in (*SIM_KEYS, "infer_ms_median"):
        assert key in data
    assert data["status"] == "completed"
    assert data["rmse_position_m"] < 0.04 and data["rmse_orientation_deg"] < 3.0
    assert data["min_uav_distance_m"] > 0.8
    assert 0.0 < data["infer_ms_median"] < 50.0


def test_evaluate_reports_teacher_and_student(capsys):
    code, data = run_json(capsys, ["evaluate", "--trajectories", "eight-medium,eight-slow",
                                   "--duration", "4", "--json"])
    assert code == 0
    assert [row["name"] for row in data["trajectories"]] == ["eight-medium", "eight-slow"]
    for row in data["trajectories"]:
        for planner in ("teacher", "student"):
            assert row[planner]["status"] == "completed"
            assert 0.0 <= row[planner]["deriv_mae_mps"] < 0.05


def test_the_default_policy_is_the_specialist_on_eight_medium_and_else_the_generalist():
    from cableload_sim.trajectories import make_reference
    from learners.export import GENERALIST_POLICIES, SPECIALISTS, default_policy

    generalist = GENERALIST_POLICIES[3]
    assert (generalist / "student.pt").is_file() and (generalist / "student.onnx").is_file()
    assert default_policy(make_reference("eight-medium"), 3) == SHIPPED_POLICY
    for other in (make_reference("track:zandvoort"),
                  make_reference("eight-medium", orientation="zero-sideslip"),
                  make_reference("eight", ax=3.0, ay=3.0, w=0.5), None):
        assert default_policy(other, 3) == generalist
    for n in (4, 6):
        assert default_policy(make_reference("track:zandvoort"), n) == GENERALIST_POLICIES[n]
        assert default_policy(make_reference("eight-medium"), n) == SPECIALISTS[n]
        for policy in (SPECIALISTS[n], GENERALIST_POLICIES[n]):
            assert (policy / "student.onnx").is_file() and (policy / "student.pt").is_file()
    # none for 5: the three-quadrotor specialist (flying it warns)
    assert default_policy(make_reference("track:zandvoort"), 5) == SHIPPED_POLICY


def test_simulate_flies_the_generalist_off_eight_medium(capsys):
    code, data = run_json(capsys, ["simulate", "--planner", "student", "--trajectory",
                                   "circle", "--duration", "6", "--json"])
    assert code == 0 and data["policy"] == "generalist-n3"
    assert data["status"] == "completed" and data["rmse_position_m"] < 0.05
    code, data = run_json(capsys, ["simulate", "--planner", "student", "--trajectory",
                                   "eight-medium", "--duration", "2", "--json"])
    assert code == 0 and data["policy"] == "paper-eight-medium"


@pytest.mark.parametrize("uavs", [4, 6])
def test_students_for_four_and_six_quadrotors_fly_eight_medium(capsys, uavs):
    code, data = run_json(capsys, ["simulate", "--planner", "student", "--uavs", str(uavs),
                                   "--trajectory", "eight-medium", "--duration", "12",
                                   "--json"])
    assert code == 0 and data["policy"] == f"paper-eight-medium-n{uavs}"
    assert data["status"] == "completed" and data["min_uav_distance_m"] > 0.8
    assert data["rmse_position_m"] < 0.02 and data["rmse_orientation_deg"] < 2.0
