"""Bad input and faults at the command line: one line naming the file or value and what is
wrong, exit status 2 for usage errors and 1 for run-time faults, never a traceback; a bug
deep inside keeps its traceback."""

from __future__ import annotations

import errno
import json
import os

import pytest

from cableload_sim.cli import main

pytest.importorskip("rosbags")

from flights import write_flight_bag  # noqa: E402


def run(capsys, argv) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cableload: error: "), err
    return lines[0]


def strict_json(text: str):
    """JSON as the standard has it: NaN and Infinity are refused."""

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


# -- output files ---------------------------------------------------------------------------


def test_log_into_a_missing_folder(capsys, tmp_path):
    code, _, err = run(
        capsys, ["simulate", "--duration", "1", "--log", str(tmp_path / "nowhere" / "run.bag")]
    )
    assert code == 2
    assert f"folder '{tmp_path / 'nowhere'}' does not exist" in one_line(err)


def test_log_into_a_folder_that_cannot_be_written(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() != 0:  # root writes anywhere: then the check is made to see a refusal
        folder.chmod(0o555)
    else:
        monkeypatch.setattr("cableload_sim.io.runlog.writer.os.access", lambda *args: False)
    code, _, err = run(capsys, ["simulate", "--duration", "1", "--log", str(folder / "run.bag")])
    folder.chmod(0o755)
    assert code == 2 and f"folder '{folder}' is not writable" in one_line(err)
    assert list(folder.iterdir()) == []


def test_overwrite_never_removes_a_folder(capsys, tmp_path):
    folder = tmp_path / "run.bag"
    folder.mkdir()
    (folder / "keep").write_text("x")
    code, _, err = run(capsys, ["simulate", "--duration", "1", "--log", str(folder), "--overwrite"])
    assert code == 2 and "is a folder; expected a file name" in one_line(err)
    assert (folder / "keep").exists()


def test_a_full_disk_is_one_line_and_keeps_the_log(capsys, tmp_path, monkeypatch):
    from cableload_sim.io.runlog import read_run
    from cableload_sim.io.runlog import writer as writer_module

    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer_module.os, "fsync", fsync)
    path = tmp_path / "full.bag"
    code, _, err = run(capsys, ["simulate", "--duration", "5", "--log", str(path)])
    line = one_line(err)
    assert code == 1
    assert f"{path}.active: No space left on device (the log up to 1 s" in line
    monkeypatch.undo()
    assert read_run(path).samples.t[-1] >= 1.0


def test_every_log_path_is_checked_before_the_first_flight(capsys, tmp_path):
    taken = tmp_path / "run-teacher.bag"
    taken.write_bytes(b"an earlier run")
    code, _, err = run(
        capsys,
        ["simulate", "--duration", "1", "--planner", "formation,teacher", "--log", str(tmp_path / "run.bag")],
    )
    assert code == 2 and "run-teacher.bag' exists already" in one_line(err)
    assert not (tmp_path / "run-formation.bag").exists()  # nothing flown, nothing lost
    assert taken.read_bytes() == b"an earlier run"


def test_a_log_larger_than_the_disk_is_refused_with_its_size(capsys, tmp_path):
    code, _, err = run(capsys, ["simulate", "--duration", "1e9", "--log", str(tmp_path / "run.bag")])
    line = one_line(err)
    assert code == 1
    assert "1 run log(s) of 1e+09 s need about" in line and "GB free" in line
    assert not list(tmp_path.iterdir())


# -- input files ----------------------------------------------------------------------------


def test_random_bytes_as_a_bag(capsys, tmp_path, rng):
    noise = tmp_path / "noise.bag"
    noise.write_bytes(b"\x99" + rng.bytes(5000))
    for argv in (
        ["metrics", str(noise)],
        ["plot", str(noise), "--out", str(tmp_path / "p")],
        ["replay", str(noise), "--screenshot", str(tmp_path / "s.png")],
    ):
        code, _, err = run(capsys, argv)
        assert code == 1 and f"'{noise}' is not a ROS1 bag" in one_line(err), argv
    assert not (tmp_path / "p").exists()


def test_random_bytes_as_a_config(capsys, tmp_path, rng):
    noise = tmp_path / "noise.toml"
    noise.write_bytes(b"\x99" + rng.bytes(5000))
    code, _, err = run(capsys, ["simulate", "--duration", "1", "--config", str(noise)])
    assert code == 2 and f"config file '{noise}' is not UTF-8 text" in one_line(err)
    code, _, err = run(capsys, ["train", "--config", str(noise), "--out", str(tmp_path / "t")])
    assert code == 2 and f"training config '{noise}' is not UTF-8 text" in one_line(err)
    assert not (tmp_path / "t").exists()


def test_plot_of_a_bag_without_this_projects_topics(capsys, tmp_path):
    bag = tmp_path / "chatter.bag"
    write_flight_bag(bag, topics=False)
    code, _, err = run(capsys, ["plot", str(bag), "--out", str(tmp_path / "plots")])
    assert code == 1 and "holds no samples of this project's topics" in one_line(err)
    assert not (tmp_path / "plots").exists()


def test_metrics_of_a_real_flight_take_the_config(capsys, tmp_path):
    bag = tmp_path / "flight.bag"
    write_flight_bag(bag)  # two quadrotors, no system, no reference
    code, _, err = run(capsys, ["metrics", str(bag)])
    assert code == 2 and "records no system" in one_line(err) and "--config FILE" in err
    code, out, _ = run(capsys, ["metrics", str(bag), "--uavs", "2", "--json"])
    metrics = strict_json(out)
    assert code == 0 and metrics["sim_time_s"] == pytest.approx(2.97)
    assert metrics["rmse_position_m"] is None  # no reference recorded: null, not NaN
    code, _, err = run(capsys, ["metrics", str(bag), "--uavs", "3"])
    assert code == 2 and "2 quadrotors recorded, the system given has 3" in one_line(err)


# -- options and values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "planners, message",
    [
        (",", "--planner: expected planner names separated by commas"),
        ("formation,,teacher", "--planner: expected planner names"),
        ("formation,formation", "'formation' named twice"),
        ("formation,magic", "unknown planner 'magic'"),
        ("nodes", "--planner nodes"),
    ],
)
def test_planner_lists(capsys, tmp_path, planners, message):
    code, _, err = run(
        capsys, ["simulate", "--duration", "1", "--planner", planners, "--log", str(tmp_path / "run.bag")]
    )
    assert code == 2 and message in one_line(err)
    assert not list(tmp_path.iterdir())  # refused before anything flew


def test_a_reference_below_the_ground_is_refused(capsys):
    code, _, err = run(capsys, ["simulate", "--duration", "5", "-o", "z=-100"])
    assert code == 2 and "outside the allowed box" in one_line(err)


def test_a_load_too_heavy_is_refused_before_flight(capsys, tmp_path):
    config = tmp_path / "heavy.toml"
    config.write_text("[load]\nmass = 5.0\n")
    code, out, err = run(capsys, ["simulate", "--duration", "5", "--config", str(config)])
    assert code == 2 and out == ""
    assert "load of 5 kg on 3 cables is too heavy: quadrotor 2 needs" in one_line(err)


def test_coincident_attachment_points(capsys, tmp_path):
    config = tmp_path / "points.toml"
    config.write_text("[load]\nattachments = [[0.1, 0.1, 0.06], [0.1, 0.1, 0.06], [0.1, 0.1, 0.06]]\n")
    code, _, err = run(capsys, ["simulate", "--duration", "1", "--config", str(config)])
    assert code == 2 and "points 0 and 1 coincide" in one_line(err)


def test_json_has_no_nan(capsys):
    from cableload_sim.cli.main import json_safe

    assert json_safe({"a": float("nan"), "b": [float("inf"), 1.5], "c": "x"}) == {
        "a": None,
        "b": [None, 1.5],
        "c": "x",
    }
    code, out, _ = run(capsys, ["simulate", "--duration", "1", "--json"])
    assert code == 0 and strict_json(out)["status"] == "completed"


# -- what is a usage error and what is a bug ------------------------------------------------


def test_a_value_error_from_deep_code_is_a_bug_not_a_usage_error(monkeypatch):
    def broken(self, state, reference):
        raise ValueError("a numerical defect")

    monkeypatch.setattr("planners.formation.FormationPlanner.plan", broken)
    with pytest.raises(ValueError, match="a numerical defect"):
        main(["simulate", "--duration", "1"])


def test_an_os_error_names_the_file():
    from cableload_sim.cli.main import os_error_line

    err = OSError(errno.EACCES, "Permission denied", "/x/run.bag.active")
    assert os_error_line(err) == "/x/run.bag.active: Permission denied"
    renamed = OSError(errno.EXDEV, "Invalid cross-device link", "/a", None, "/b")
    assert os_error_line(renamed) == "/a -> /b: Invalid cross-device link"


def test_a_hardware_worlds_take_off_height_is_the_flight_files(capsys):
    """``world --hardware`` serves a flight file, whose pilots' take-off height counts: a
    second one on the command line is refused before any ROS connection."""
    code, out, err = run(capsys, ["world", "--hardware", "--takeoff-height", "0.4"])
    assert code == 2 and out == ""
    assert "--takeoff-height: with --hardware the flight file's takeoff_height_m counts" in one_line(err)
    code, out, err = run(capsys, ["world", "--takeoff-height", "-1"])
    assert code == 2 and "--takeoff-height: expected a positive height (m), got -1.0" in one_line(err)
