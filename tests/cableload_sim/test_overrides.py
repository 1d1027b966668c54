"""``--set table.key=value``: every key, nested tables and lists, TOML values, the same
validation as the file, errors that name the key and what it may be."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

from cableload_sim.cli import main
from cableload_sim.params import ConfigError, Override, config_from_dict, load_config


def paper_document() -> dict:
    text = resources.files("cableload_sim.configs").joinpath("paper.toml").read_text()
    return tomllib.loads(text)


def test_nested_keys_lists_and_booleans():
    config = load_config(
        overrides=[
            "quadrotor.rotor.time_constant=0.03",
            "load.size=[0.5, 0.4, 0.1]",
            "link.enabled=true",
            "gravity=9.80665",
            "sensing.mocap_rate_hz=200",
            "teacher.max_iter=7",
            "load.attachments=[[0.3, 0.2, 0.05], [0.3, -0.2, 0.05], [-0.3, 0.0, 0.05]]",
        ]
    )
    assert config.system.quadrotors[0].rotor.time_constant == 0.03
    assert config.system.load.size == (0.5, 0.4, 0.1)
    assert config.link.enabled is True
    assert config.system.gravity == 9.80665
    assert config.sensing.mocap_rate_hz == 200.0
    assert config.teacher.max_iter == 7
    assert config.system.load.attachments[2] == (-0.3, 0.0, 0.05)
    # derived values follow: the box inertia of the new size
    assert config.system.load.inertia_matrix()[2, 2] == pytest.approx(1.4 * (0.25 + 0.16) / 12)


def test_the_last_of_repeated_keys_wins_and_the_file_keeps_the_rest():
    config = load_config(overrides=["load.mass=2.0", "load.mass=2.8"])
    assert config.system.load.mass == 2.8
    assert config.system.load.size == load_config().system.load.size


@pytest.mark.parametrize(
    "key",
    [
        "gravity",
        "load.mass",
        "quadrotor.mass",
        "quadrotor.rotor.arm_length",
        "cable.length",
        "formation.min_spacing_m",
        "controller.rate_hz",
        "simulation.physics_dt",
        "mismatch.load_mass_scale",
        "teacher.weight_position",
        "link.drop_fraction",
        "sensing.latency_s",
    ],
)
def test_every_table_is_reachable_and_checked_like_the_file(key):
    """A bad value set on the command line fails with the file's own message."""
    document = paper_document()
    Override.parse(f"{key}=-5").apply(document)
    with pytest.raises(ConfigError) as from_file:
        config_from_dict(document, "paper.toml")
    with pytest.raises(ConfigError, match=f"^--set '{key}=-5': ") as from_set:
        load_config(overrides=[f"{key}=-5"])
    assert str(from_set.value) == f"--set '{key}=-5': {from_file.value}"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "quadrotor.rotor.tau=0.1",
            r"quadrotor\.rotor: unknown key 'tau'; expected one of "
            r"\['arm_length', 'speed_max', 'speed_min', 'thrust_coeff', "
            r"'time_constant', 'torque_coeff'\]",
        ),
        (
            "weather.speed=3",
            r"unknown key 'weather'; expected one of \['aero', 'ball', 'battery', "
            r"'cable', 'controller'",
        ),
        ("load.mass.value=1", r"load\.mass is a value \(1\.4\), not a table"),
        ("load.size=[0.5, 0.4", r"is not a TOML value .*expected e\.g\. 0\.5, true"),
        ("load.size=[0.5, 0.4]", r"load\.size: expected a list of 3 positive numbers, got \[0\.5, 0\.4\]"),
        ("link.enabled=yes", r"link\.enabled: expected true or false, got 'yes'"),
        ("load.mass=heavy", r"load\.mass: expected a positive number, got 'heavy'"),
        ("link.drop_fraction=1", r"drop_fraction: expected a fraction below 1"),
        ("load mass=2", r"'load mass' is not a dotted key"),
        ("load.mass", r"expected TABLE\.KEY=VALUE"),
        ("quadrotor.rotor=3", r"quadrotor\.rotor: expected a table, got 3"),
    ],
)
def test_clear_errors(text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[text])


def test_an_error_names_the_override_it_comes_from():
    with pytest.raises(ConfigError, match=r"^--set 'load\.mass=-1': "):
        load_config(overrides=["link.enabled=true", "load.mass=-1"])
    # rates checked together: the one that breaks them is named
    with pytest.raises(
        ConfigError,
        match=r"^--set 'sensing\.mocap_rate_hz=300': .*whole "
        r"fraction of the physics rate",
    ):
        load_config(overrides=["sensing.enabled=true", "sensing.mocap_rate_hz=300"])


def test_a_broken_file_is_named_before_the_overrides(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[load]\nmass = -1.0\n")
    with pytest.raises(ConfigError, match=r"^.*bad\.toml:load\.mass: expected a positive"):
        load_config(path, overrides=["load.mass=2.0"])


def test_command_line_set_is_repeatable_and_reaches_the_flight(capsys):
    import json

    code = main(
        [
            "simulate",
            "--duration",
            "1",
            "--json",
            "--set",
            "link.enabled=true",
            "--set",
            "link.drop_fraction=0.5",
            "--set",
            "load.size=[0.5,0.4,0.1]",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["link_sent_plans"] == 30 and data["link_dropped_plans"] > 0


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--duration", "1"],
        ["evaluate", "--duration", "1"],
        ["metrics", "x.bag"],
        ["gazebo-world", "-o", "w.world"],
        ["world"],
        ["node", "--planner", "teacher"],
    ],
)
def test_every_command_with_a_config_refuses_a_bad_override(argv, capsys):
    assert main([*argv, "--set", "quadrotor.rotor.tau=0.1"]) == 2
    err = capsys.readouterr().err
    assert "--set 'quadrotor.rotor.tau=0.1'" in err and "unknown key 'tau'" in err


def test_train_set_applies_to_the_training_config(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "run"), "--set", "dagger.roundz=3"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'roundz'" in err and "'rounds'" in err
    assert main(["train", "--out", str(tmp_path / "run"), "--set", "dagger.rounds=0"]) == 2
    assert "dagger.rounds: expected at least 1, got 0" in capsys.readouterr().err
