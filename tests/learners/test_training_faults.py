"""Training and policies: a bad config is refused before a run directory exists, a diverging
run stops with a clear error and exports nothing, a policy flown on another system warns."""

from __future__ import annotations

import dataclasses
import json
import shutil
import warnings

import numpy as np
import pytest
import torch
from test_dagger import TINY, write_tiny

from cableload_sim.cli import main
from cableload_sim.errors import ResourceError
from cableload_sim.params import config_from_dict, load_config
from learners.config import ConfigError, train_config_from_dict
from learners.dagger import TrainingDiverged, train, train_epochs
from learners.export import SHIPPED_POLICY, PolicySystemWarning
from learners.network import NetworkConfig, StudentNet
from planners import make_planner, planner_names
from planners.student import StudentPlanner


@pytest.mark.parametrize(
    "table, key, value, message",
    [
        (
            "training",
            "learning_rate",
            float("inf"),
            r"training\.learning_rate: expected a finite "
            r"number, got inf",
        ),
        ("training", "learning_rate_final", float("nan"), "expected a finite number, got nan"),
        (
            "training",
            "torch_threads",
            -1,
            r"training\.torch_threads: expected >= 0 \(0: one per "
            r"core\), got -1",
        ),
        ("training", "weight_decay", -0.1, r"training\.weight_decay: expected >= 0"),
        ("dagger", "eval_s", float("inf"), r"dagger\.eval_s: expected a finite number, got inf"),
        ("dagger", "eval_s", 0.05, r"dagger\.eval_s: expected 0 \(no evaluation\) or at least 1 s"),
        ("dagger", "episode_s", 0.05, r"dagger\.episode_s: expected at least 1 s, got 0\.05"),
        (
            "dagger",
            "trajectories",
            ["eight-medium", "spiral"],
            r"dagger\.trajectories: unknown "
            r"reference 'spiral'",
        ),
    ],
)
def test_a_bad_training_config_is_refused(table, key, value, message):
    with pytest.raises(ConfigError, match=message):
        train_config_from_dict({table: {key: value}})


def test_a_bad_training_config_leaves_no_run_directory(tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text("[dagger]\neval_s = inf\n")
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "dagger.eval_s: expected a finite number" in err
    assert not out.exists()
    # a config built in Python is validated by train() itself, before anything is written
    unchecked = dataclasses.replace(
        train_config_from_dict(TINY),
        training=dataclasses.replace(train_config_from_dict(TINY).training, torch_threads=-1),
    )
    with pytest.raises(ConfigError, match="torch_threads"):
        train(unchecked, out, progress=False)
    assert not out.exists()


def test_a_dataset_that_would_not_fit_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.setattr("learners.dagger.available_memory", lambda: 1e6)
    with pytest.raises(ResourceError, match=r"needs about [\d.]+ GB of memory for the dataset"):
        train(train_config_from_dict(TINY), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def synthetic_data(rng, n=256, history=4):
    return {
        "ego": rng.normal(size=(n, history, 18)).astype(np.float32),
        "load": rng.normal(size=(n, history, 12)).astype(np.float32),
        "ref": rng.normal(size=(n, 21, 18)).astype(np.float32),
        "prior": rng.normal(size=(n, 21, 15)).astype(np.float32),
        "target": rng.normal(size=(n, 21, 12)).astype(np.float32),
    }


def test_a_non_finite_loss_stops_training(rng):
    torch.manual_seed(0)
    net = StudentNet(NetworkConfig(**TINY["network"]))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e30)
    with pytest.raises(
        TrainingDiverged,
        match=r"the training loss became (nan|inf) \(epoch \d+, "
        r"batch \d+, learning rate 1e\+30\)",
    ):
        train_epochs(net, optimizer, synthetic_data(rng), 20, 32, torch.Generator().manual_seed(0))
    # a sane rate trains on the same data
    net = StudentNet(NetworkConfig(**TINY["network"]))
    loss = train_epochs(
        net,
        torch.optim.Adam(net.parameters(), lr=1e-3),
        synthetic_data(rng),
        2,
        32,
        torch.Generator().manual_seed(0),
    )
    assert np.isfinite(loss)


def test_a_diverging_run_exports_nothing(tmp_path, capsys):
    config = write_tiny(tmp_path)
    text = config.read_text().replace(
        "[training]\n", "[training]\nlearning_rate = 1e30\nlearning_rate_final = 1e30\n"
    )
    config.write_text(text.replace("rounds = 3", "rounds = 1"))
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--out", str(out), "--json"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"{out}: round 0: the training loss became" in err and "no policy exported" in err
    assert not (out / "policy").exists() and not list(out.glob("checkpoints/*.pt"))
    assert list(out.glob("data/round_000*"))  # the collected data is kept


# -- the student planner and its policy -------------------------------------------------------


def test_student_is_a_registered_planner(paper_config):
    assert "student" in planner_names()
    with warnings.catch_warnings():
        # the shipped policy was trained for this system (torch's own deprecation warnings,
        # from tracing the network, are not this test's concern)
        warnings.simplefilter("error", PolicySystemWarning)
        planner = make_planner("student", paper_config)
    assert isinstance(planner, StudentPlanner) and planner.history == 8


def test_a_policy_flown_on_another_system_warns():
    # no student is shipped for 5 quadrotors: the default is the one for 3
    with pytest.warns(
        PolicySystemWarning,
        match=r"trained for another system: trained for 3 "
        r"quadrotors, flying 5",
    ):
        make_planner("student", load_config(uavs=5))
    longer = config_from_dict({"load": {}, "cable": {"length": 1.5}})
    with pytest.warns(PolicySystemWarning, match=r"cables\[\*\]\.length = 1 \(flying 1\.5\)"):
        make_planner("student", longer)


def test_a_policy_that_records_no_system_warns(tmp_path, paper_config):
    policy = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY, policy)
    info = json.loads((policy / "policy.json").read_text())
    del info["system"]
    (policy / "policy.json").write_text(json.dumps(info))
    with pytest.warns(PolicySystemWarning, match="does not record the system"):
        make_planner("student", paper_config, policy=policy)


def test_the_command_line_shows_the_warning_in_one_line(capsys):
    assert main(["simulate", "--planner", "student", "--uavs", "5", "--duration", "1"]) in (0, 1)
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "policy" in line]
    assert line.startswith("cableload: warning: policy ") and line.endswith(
        "was trained for another system: trained for 3 quadrotors, flying 5"
    )


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage" * 50])
def test_a_corrupted_onnx_policy_is_one_line(tmp_path, capsys, content):
    policy = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY, policy)
    (policy / "student.onnx").write_bytes(content)
    code = main(
        ["simulate", "--planner", "student", "--policy", str(policy), "--runtime", "onnx", "--duration", "1"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0, err
    assert f"{policy}/student.onnx: not a readable ONNX model" in err
