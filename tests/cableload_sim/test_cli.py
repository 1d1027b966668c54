"""The command line: JSON keys, tables, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cableload_sim.cli.main import SIM_KEYS, main


def run_json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_simulate_json_keys(capsys):
    code, data = run_json(
        capsys,
        ["simulate", "--planner", "formation", "--trajectory", "eight-slow", "--duration", "3", "--json"],
    )
    assert code == 0
    for key in SIM_KEYS:
        assert key in data
    assert data["status"] == "completed"
    assert data["sim_time_s"] == pytest.approx(3.0)
    assert data["real_time_factor"] > 0.0 and data["wall_time_s"] > 0.0


def test_simulate_track_and_options(capsys):
    code, data = run_json(
        capsys,
        [
            "simulate",
            "--trajectory",
            "track:zandvoort",
            "--track-size",
            "6",
            "--speed",
            "1.5",
            "--duration",
            "2",
            "--json",
        ],
    )
    assert code == 0 and data["trajectory"].startswith("track:")
    code, data = run_json(
        capsys,
        [
            "simulate",
            "--trajectory",
            "eight-slow",
            "-o",
            "ax=3",
            "-o",
            "ay=3",
            "--uavs",
            "4",
            "--duration",
            "2",
            "--json",
            "--orientation",
            "zero-sideslip",
        ],
    )
    assert code == 0


def test_simulate_table(capsys):
    assert main(["simulate", "--duration", "1"]) == 0
    out = capsys.readouterr().out
    assert "rmse_position_m" in out and "formation" in out


def test_trajectories_lists_names(capsys):
    assert main(["trajectories"]) == 0
    out = capsys.readouterr().out
    for name in (
        "eight-slow",
        "eight-medium",
        "eight-medium-plus",
        "eight-fast",
        "circle",
        "square",
        "hover",
        "pose-to-pose",
        "track",
    ):
        assert name in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["simulate", "--trajectory", "spiral"], "spiral"),
        (["simulate", "--planner", "magic"], "unknown planner 'magic'"),
        (["simulate", "--trajectory", "eight-slow", "-o", "w=-1"], "-1"),
        (["simulate", "--uavs", "1"], "uavs"),
        (["simulate", "--trajectory", "eight-slow", "--track-size", "5"], "--track-size"),
        (["simulate", "--config", "/nonexistent.toml"], "does not exist"),
    ],
)
def test_errors_are_clear(capsys, argv, message):
    assert main(argv + ["--duration", "1"]) == 2
    assert message in capsys.readouterr().err


def test_bench_sim_json(capsys):
    code, data = run_json(capsys, ["bench", "sim", "--steps", "20000", "--batch", "4", "--json"])
    assert code == 0
    assert data["steps_per_s"] > 0 and data["batch_steps_per_s"] > 0
    assert data["state_finite"] is True


def test_console_script_help_is_fast():
    out = subprocess.run(
        [sys.executable, "-m", "cableload_sim.cli", "--help"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0 and "simulate" in out.stdout
    # --help imports neither numba nor the planners
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, cableload_sim.cli; "
            "print('numba' in sys.modules, 'casadi' in sys.modules, 'torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.stdout.strip() == "False False False"


def test_simulate_teacher_reports_solver_figures(capsys):
    code, data = run_json(capsys, ["simulate", "--planner", "teacher", "--duration", "2", "--json"])
    assert code == 0
    for key in ("solve_ms_median", "solve_ms_p99", "solver_failures"):
        assert key in data
    assert data["solver_failures"] == 0


def test_side_by_side_and_bench_teacher(capsys):
    code, data = run_json(capsys, ["simulate", "--planner", "formation,teacher", "--duration", "1", "--json"])
    assert code == 0 and [d["planner"] for d in data] == ["formation", "teacher"]
    code, data = run_json(capsys, ["bench", "teacher", "--uavs", "3", "--duration", "2", "--json"])
    assert code == 0 and data["3"]["solver_failures"] == 0 and data["3"]["plans"] == 20
    assert main(["bench", "teacher", "--uavs", "1,x"]) == 2


@pytest.mark.slow
def test_log_replay_plot_and_metrics_from_the_command_line(capsys, tmp_path):
    bag = tmp_path / "run.bag"
    code, live = run_json(capsys, ["simulate", "--duration", "3", "--json", "--log", str(bag)])
    assert code == 0 and bag.is_file()
    code, logged = run_json(capsys, ["metrics", str(bag), "--json"])
    assert code == 0
    for key in ("rmse_position_m", "rmse_orientation_deg", "min_uav_distance_m", "max_thrust_ratio"):
        assert logged[key] == pytest.approx(live[key], rel=1e-9)
    assert main(["plot", str(bag), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "top_view.png").stat().st_size > 5000
    assert (
        main(
            [
                "replay",
                str(bag),
                "--screenshot",
                str(tmp_path / "shot.png"),
                "--time",
                "1.5",
                "--window-size",
                "320",
                "240",
            ]
        )
        == 0
    )
    assert (tmp_path / "shot.png").stat().st_size > 1000
    # the same path again is refused without --overwrite
    assert main(["simulate", "--duration", "1", "--log", str(bag)]) == 2
    capsys.readouterr()


def test_every_orientation_mode_flies_from_the_command_line(capsys):
    """The command line offers every orientation mode the references have (the training
    distribution draws ``oscillating`` too), its parameters as ``-o`` options."""
    import numpy as np

    from cableload_sim.cli.main import ORIENTATIONS, build_parser, build_reference
    from cableload_sim.rotations import quat_to_euler
    from cableload_sim.trajectories import ORIENTATION_MODES

    assert ORIENTATIONS == ORIENTATION_MODES
    argv = ["simulate", "--trajectory", "circle", "--orientation", "oscillating", "--duration", "4"]
    options = ["-o", "yaw_amplitude_deg=40", "-o", "yaw_frequency=0.1"]
    reference = build_reference(build_parser().parse_args([*argv, *options]))
    yaw = np.degrees(quat_to_euler(reference.sample(np.linspace(10.0, 20.0, 501)).q)[:, 2])
    assert np.ptp(yaw) == pytest.approx(80.0, abs=1.0)  # +-40 deg over one 10 s period
    assert main([*argv, *options, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "completed"


def test_each_sampled_reference_comes_with_the_command_that_flies_it(capsys, tmp_path):
    """``trajectories --sample`` prints, per draw, a ``cableload simulate`` line; each line
    flies that draw (here for one second) on the system the draw was made for."""
    import shlex

    config = "learners/configs/generalist.toml"
    argv = ["trajectories", "--sample", config, "--count", "4", "--seed", "3", "--out", str(tmp_path)]
    assert main([*argv, "--uavs", "4"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if ": cableload simulate" in line]
    assert len(lines) == 4
    assert main([*argv, "--uavs", "4", "--json"]) == 0
    drawn = json.loads(capsys.readouterr().out)
    for line, spec in zip(lines, drawn):
        command = shlex.split(line.split(": ", 1)[1])
        assert command == shlex.split(spec["command"])
        assert command[command.index("--trajectory") + 1] == spec["name"]
        assert command[command.index("--uavs") + 1] == "4"
        command[command.index("--duration") + 1] = "1"
        assert main([*command[1:], "--json"]) == 0, line
        flown = json.loads(capsys.readouterr().out)
        assert flown["status"] == "completed" and flown["sim_time_s"] == pytest.approx(1.0)
