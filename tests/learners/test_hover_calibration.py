"""Whether a policy flies with its hover residual subtracted is chosen on its validation draws,
recorded in ``policy.json`` (``hover_calibration``) and honoured by the flown planner."""

from __future__ import annotations

import json
import shutil

import pytest

from cableload_sim.errors import FileContentError
from learners import dagger
from learners.export import GENERALIST_POLICIES, student_planner
from learners.network import NetworkConfig, StudentNet


def _row(position_m, attitude_deg, status="completed"):
    return {
        "eval_rmse_position_m": position_m,
        "eval_rmse_orientation_deg": attitude_deg,
        "eval_status": status,
    }


@pytest.mark.parametrize(
    "raw, calibrated, chosen",
    [
        (_row(0.0038, 0.20), _row(0.0030, 0.20), True),  # 0.50 against 0.58: better
        (_row(0.0029, 0.19), _row(0.0031, 0.22), False),  # 0.53 against 0.48: worse
        (_row(0.0029, 0.19), _row(0.0001, 0.01, "diverged"), False),  # an incomplete run never wins
        (_row(0.0001, 0.01, "diverged"), _row(0.0031, 0.22), True),  # over one that did not end
    ],
)
def test_the_calibration_is_kept_only_where_it_flies_the_validation_draws_better(
    monkeypatch, raw, calibrated, chosen
):
    net = StudentNet(NetworkConfig(frame="load-yaw", prior="formation-follow"))
    asked = []

    def fake_evaluate(net_, config, references, hover_calibration=False, pool=None):
        asked.append(hover_calibration)
        return calibrated

    monkeypatch.setattr(dagger, "_evaluate", fake_evaluate)
    choice = dagger.hover_calibration_choice(net, None, ["draw"], raw)
    assert asked == [True]
    assert choice["hover_calibration"] is chosen
    assert choice["hover_calibrated_eval"]["eval_rmse_position_m"] == calibrated["eval_rmse_position_m"]


def test_a_world_frame_policy_is_never_calibrated(monkeypatch):
    monkeypatch.setattr(dagger, "_evaluate", lambda *a, **k: pytest.fail("flown"))
    net = StudentNet(NetworkConfig(frame="world"))
    assert dagger.hover_calibration_choice(net, None, ["draw"], _row(0.01, 1.0)) == {
        "hover_calibration": False
    }


def test_the_shipped_generalists_record_the_choice_their_validation_made(paper_config):
    """Each shipped generalist is calibrated only if that flew its validation draws better
    (three, calibrated 0.436 against 0.439 raw; four 3.086 against 3.123; six
    1.194 against 1.153: raw), and flies as recorded."""
    for n, directory in GENERALIST_POLICIES.items():
        info = json.loads((directory / "policy.json").read_text())
        calibrated = info["hover_calibrated_eval"]
        assert info["hover_calibration"] is (
            dagger.validation_score(calibrated) < dagger.validation_score(info)
        ), n
        planner = student_planner(paper_config.with_uavs(n), directory, "onnx")
        assert planner.hover_calibration is info["hover_calibration"], n


def test_policy_json_choice_is_honoured_and_a_bad_one_refused(tmp_path, paper_config):
    policy = tmp_path / "policy"
    shutil.copytree(GENERALIST_POLICIES[3], policy)
    info = json.loads((policy / "policy.json").read_text())
    assert info["network"]["frame"] == "load-yaw"
    for recorded in (False, True):  # false differs from the rule for policies recording none
        info["hover_calibration"] = recorded
        (policy / "policy.json").write_text(json.dumps(info))
        assert student_planner(paper_config, policy, "onnx").hover_calibration is recorded
    del info["hover_calibration"]  # recorded before the choice: load-yaw policies calibrate
    (policy / "policy.json").write_text(json.dumps(info))
    assert student_planner(paper_config, policy, "onnx").hover_calibration
    info["hover_calibration"] = "yes"
    (policy / "policy.json").write_text(json.dumps(info))
    with pytest.raises(
        FileContentError,
        match=r"policy.json: hover_calibration: expected true "
        r"or false, got 'yes'",
    ):
        student_planner(paper_config, policy, "onnx")
