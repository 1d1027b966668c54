"""``cableload fly``, ``preflight`` and ``world --hardware`` refuse what cannot fly, before any
ROS connection, with one line naming the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from cableload_sim.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "hw" / "flights" / "example.toml"


def run(capsys, argv) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err.strip()


def test_a_trajectory_that_does_not_start_above_the_load_is_refused(capsys, tmp_path):
    moved = tmp_path / "moved.toml"
    moved.write_text(EXAMPLE.read_text().replace("start = [2.5, 0.0, 0.074]", "start = [1.5, 0.0, 0.074]"))
    code, err = run(capsys, ["fly", str(moved), "--trajectory", "eight-medium", "--operator", "keyboard"])
    assert code == 2
    assert "the load is lifted at [2.5, 0.0] m but rests at [1.5, 0.0] m" in err


def test_nodes_are_students(capsys):
    code, err = run(capsys, ["fly", str(EXAMPLE), "--planner", "teacher", "--nodes"])
    assert code == 2 and "--nodes: the students run as nodes" in err


def test_a_bad_flight_file_is_named(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text().replace("max_speed_mps = 4.0", "max_speed_mps = -4.0"))
    for argv in (["fly", str(bad)], ["preflight", str(bad)], ["world", "--hardware", "--flight", str(bad)]):
        code, err = run(capsys, argv)
        assert code == 2 and "safety.max_speed_mps: expected a positive number" in err, (argv, err)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["world", "--flight", str(EXAMPLE)], "--flight: a flight file is served with --hardware"),
        (["world", "--hardware", "--wifi-loss", "1.5"], "--wifi-loss: expected"),
        (["world", "--hardware", "--wifi-delay", "0.2,0.1"], "--wifi-delay: expected 0 <= MIN <= MAX"),
        (["world", "--hardware", "--mocap-drop", "1.0"], "--mocap-drop: expected a fraction in [0, 1)"),
    ],
)
def test_bad_hardware_world_options_are_named(capsys, argv, message):
    code, err = run(capsys, argv)
    assert code == 2 and message in err, err
