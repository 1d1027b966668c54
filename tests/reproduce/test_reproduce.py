"""`cableload reproduce`: each experiment is set up as the paper's text describes it (sizes,
rounds, perturbations), the quick reproduction writes every table's files with the paper's value
beside ours, a second call resumes without flying again, and bad input is refused."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cableload_sim.errors import OutputExistsError, UsageError
from cableload_sim.reproduce import tables
from cableload_sim.reproduce.conditions import CONDITIONS, condition_config, condition_settings
from cableload_sim.reproduce.paper import paper_table, paper_timings
from cableload_sim.reproduce.runner import reproduce

PAPER = CONDITIONS["paper"]
ROOT = Path(__file__).resolve().parents[2]


def _trainings(exp) -> dict:
    return {t.name: t.config for t in exp.trainings}


def test_flights_and_trainings_follow_the_papers_text():
    episode = paper_timings()["episode_duration"].value
    assert tables.EPISODE_S == episode == 40

    exp = tables.experiment("1", False, PAPER)
    d = _trainings(exp)["eight-2.2x2"]["dagger"]
    assert (d["rounds"], d["epochs"], d["disturbance_rounds"], d["episode_s"]) == (20, 16, 5, 40.0)
    assert d["trajectories"] == [{"name": "eight", "ax": 2.2, "ay": 2.0, "w": tables.PAPER_EIGHT_RATE}]
    assert sorted(r.planner for r in exp.runs) == ["student", "student", "teacher", "teacher"]

    exp = tables.experiment("5", False, PAPER)  # Tables 2 and 5 are one experiment
    assert exp.tables == (2, 5)
    d = _trainings(exp)["two-eights"]["dagger"]
    assert (d["rounds"], d["disturbance_rounds"], d["trajectory_order"]) == (20, 4, "alternate")
    trained = [(t["ax"], t["ay"]) for t in d["trajectories"]]
    paper_sizes = {(r["x_amplitude"], r["y_amplitude"]): r["trained"] for r in paper_table(2).rows}
    assert trained == [size for size, was_trained in paper_sizes.items() if was_trained]
    flown = {(r.reference.options["ax"], r.reference.options["ay"]) for r in exp.runs}
    assert flown == set(paper_sizes)
    for run in exp.runs:  # every row finds its paper row
        assert len(paper_table(2).select(**run.paper)) == 1

    exp = tables.experiment("3", False, PAPER)
    decoders = {name: c["network"]["decoder"] for name, c in _trainings(exp).items()}
    assert decoders == {"eight-2.2x2": "pinn", "eight-2.2x2-mlp": "mlp"}
    assert {r.paper["case"] for r in exp.runs} == {row["case"] for row in paper_table(3).rows}

    exp = tables.experiment("7", False, PAPER)
    configs = _trainings(exp)
    rounds = {n: c["dagger"]["rounds"] for n, c in configs.items()}
    assert rounds == {"sp-constant": 30, "sp-zss": 30, "sp-both": 60}
    assert {n: set(c["references"]["orientations"]) for n, c in configs.items()} == {
        "sp-constant": {"constant"},
        "sp-zss": {"zero-sideslip"},
        "sp-both": {"constant", "zero-sideslip"},
    }
    for c in configs.values():  # eights, circles and squares, their height oscillating
        assert set(c["references"]["families"]) == {"eight", "circle", "square"}
        assert c["references"]["vertical_share"] == 1.0
    stop = paper_table(6).stated["stop_separation"].value
    assert tables.STOP_SEPARATION_M == stop == 0.4
    for run in exp.runs:
        number = run.paper.get("table", 6)
        fields = {k: v for k, v in run.paper.items() if k != "table"}
        (row,) = paper_table(number).select(**fields)
        assert row["orientation_mode"] == run.reference.orientation
        sizes = (("radius", "radius"), ("side", "side"), ("x_amplitude", "ax"), ("y_amplitude", "ay"))
        for paper_key, option in sizes:
            if paper_key in row:
                assert run.reference.options[option] == row[paper_key]

    exp = tables.experiment("9", False, PAPER)
    assert _trainings(exp)["pose"]["dagger"]["rounds"] == 80
    assert _trainings(exp)["pose"]["references"]["move_tilt_deg"][1] == 15.0
    move = paper_timings()["pose_trajectory_duration"].value
    assert all(r.reference.options["duration"] == move for r in exp.runs)
    (sequence,) = [r for r in exp.runs if r.sequence]
    goals = [s["goal"] for s in sequence.sequence]
    assert goals == [[*r["goal_position"], *r["goal_orientation"]] for r in paper_table(9).rows]

    exp = tables.experiment("10", False, PAPER)
    stated = paper_table(10).stated
    changes = {r.paper["perturbation"]: dict(o.split("=", 1) for o in r.overrides) for r in exp.runs}
    assert set(changes) == {row["perturbation"] for row in paper_table(10).rows}
    assert changes["none"] == {}
    assert float(changes["ball"]["ball.mass"]) == stated["ball_mass"].value
    scale = float(changes["load_mass"]["mismatch.load_mass_scale"])
    assert scale * stated["load_mass"].value == stated["doubled_load_mass"].value
    deltas = json.loads(changes["attachment_and_rope"]["mismatch.cable_length_deltas"])
    rope = stated["rope_length_change"].value / 100  # cm
    assert sorted(deltas) == [-rope, 0.0, rope]
    link = changes["communication_delay"]
    assert float(link["link.drop_fraction"]) == stated["dropped_predictions"].value / 100
    assert float(link["link.delay_max_s"]) == stated["prediction_delay"].value / 1000
    assert all(r.policy == "sp-both" and r.reference.options["side"] == 2.0 for r in exp.runs)


def test_every_setup_builds_a_valid_training_config_and_a_flyable_config():
    from cableload_sim.params import load_config
    from learners.config import train_config_from_dict

    for name in tables.experiment_names():
        exp = tables.experiment(name, True, PAPER)
        for training in exp.trainings:
            train_config_from_dict(training.config, training.name)
        for run in exp.runs:
            load_config(PAPER, overrides=run.overrides)
            run.reference.build()


def test_unknown_tables_and_conditions_are_refused(tmp_path):
    with pytest.raises(UsageError, match=r"unknown table '12'; expected one of 1, 2, .*ablation"):
        reproduce(["12"], out=tmp_path / "r", quick=True)
    with pytest.raises(UsageError, match=r"conditions: expected one of paper, ideal, got 'gazebo'"):
        condition_config("gazebo")
    assert not (tmp_path / "r").exists()
    out = subprocess.run(
        [sys.executable, "-m", "cableload_sim.cli", "reproduce", "12", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "unknown table '12'" in out.stderr


def test_quick_reproduction_writes_every_table_then_resumes(tmp_path):
    """One test, so that the quick run (most of a minute) is made once whatever the workers."""
    out = tmp_path / "quick"
    index = reproduce(None, out=out, quick=True, progress=False)
    text = index.read_text()
    for name in tables.experiment_names():
        exp = tables.experiment(name, True, PAPER)
        for page in tables.page_names(exp):
            for suffix in ("md", "csv", "png"):
                assert (out / f"{page}.{suffix}").stat().st_size > 0, (page, suffix)
            assert f"({page}.md)" in text
            with open(out / f"{page}.csv", newline="") as fh:
                rows = list(csv.DictReader(fh))
            assert rows, page
    assert sorted(p.name for p in out.glob("table-*.md")) == [f"table-{t:02d}.md" for t in range(1, 12)]
    table2 = (out / "table-02.md").read_text()
    assert "| student, eight 2.7 x 2.7 |" in table2 and "| 0.166 |" in table2  # the paper's value
    with open(out / "table-02.csv", newline="") as fh:
        row = next(csv.DictReader(fh))
    ratio = float(row["position ours (m)"]) / float(row["position paper (m)"])
    assert float(row["position ratio"]) == pytest.approx(ratio)
    assert (out / "table-05.csv").read_text() == (out / "table-02.csv").read_text()  # the same values
    assert "| ✗ |" in (out / "table-06.md").read_text()  # the paper's stopped runs
    assert "| SP (Both), Zandvoort" in (out / "table-04.md").read_text()
    assert "| SP (Both), Zandvoort" not in (out / "table-06.md").read_text()
    assert "goal 0" in (out / "table-09.md").read_text() and "goal 0" not in (out / "table-08.md").read_text()
    for key in ("sensing.enabled=true", "link.enabled=true", "quadrotor.rotor.speed_max=3000.0"):
        assert key in text
    assert "`eight-2.2x2`: `paper-conditions`" in text  # what the policies were trained under
    assert "| [2, 5](table-02.md) | position, orientation RMSE |" in text  # the summary
    table1 = (out / "table-01.md").read_text()
    assert "| teacher, mean of 1 of 1 flights |" in table1 and "| 0.171 |" in table1

    # a second call resumes: nothing flown again; other options are refused
    flown = sorted((out / "work" / "runs").rglob("*.json"))
    assert flown
    before = {p: p.stat().st_mtime_ns for p in flown}
    reproduce(["2"], out=out, quick=True, progress=False)
    assert {p: p.stat().st_mtime_ns for p in flown} == before  # nothing flown again
    with pytest.raises(OutputExistsError, match="expected .*'quick': False"):
        reproduce(["2"], out=out, quick=False, progress=False)


def test_the_paper_conditions_are_a_shipped_configuration_that_flies_the_double_mass():
    """`--config paper-conditions`: sensing, onboard estimators and the Wi-Fi link on, no plan
    lost, and rotors strong enough for the paper's 2.8 kg load (which 20 N quadrotors cannot
    hold up); the ideal conditions are the default configuration."""
    from cableload_sim.params import load_config
    from cableload_sim.physics.feasibility import check_hover

    assert condition_config("ideal") == "paper" and condition_settings("ideal") == []
    config = load_config("paper-conditions")
    assert config.sensing.enabled and config.imu.enabled and config.link.enabled
    assert config.link.drop_fraction == 0.0 and 0.0 < config.link.delay_min_s < config.link.delay_max_s
    assert load_config("paper-conditions.toml") == config
    assert config.system.load.mass == load_config().system.load.mass == 1.4
    heavy = load_config("paper-conditions", overrides=["load.mass=2.8"])
    assert heavy.system.load.mass == 2.8
    check_hover(heavy)
    with pytest.raises(UsageError, match="too heavy"):
        check_hover(load_config(None, overrides=["load.mass=2.8"]))
    out = subprocess.run(
        [sys.executable, "-m", "cableload_sim.cli", "simulate", "--config", "paper-conditions"]
        + ["--planner", "teacher", "--trajectory", "eight-medium", "--set", "load.mass=2.8"]
        + ["--duration", "6", "--json"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["rmse_position_m"] < 0.1
    assert result["link_sent_plans"] > 0 and result["link_dropped_plans"] == 0


def test_a_flight_of_table_1_rests_the_load_below_its_eight():
    import tomllib

    from cableload_sim.reproduce.runner import _flight_under
    from hw.flight import parse_flight

    example = ROOT / "hw" / "flights" / "example.toml"
    run = next(r for r in tables.experiment("1", False, PAPER).runs if r.planner == "student")
    assert run.backend == "world" and run.policy == "eight-2.2x2"
    reference = run.reference.build()
    moved = _flight_under(example.read_text(), reference)
    before, after = tomllib.loads(example.read_text()), tomllib.loads(moved)
    p0, _ = reference.start_pose()
    assert after["load"]["start"][:2] == pytest.approx(p0[:2], abs=1e-4)
    shift = [after["load"]["start"][k] - before["load"]["start"][k] for k in range(3)]
    for old, new in zip(before["quad"], after["quad"], strict=True):
        assert [n - o for n, o in zip(new["slot"], old["slot"], strict=True)] == pytest.approx(
            shift, abs=1e-4
        )
    parse_flight(after, example)  # still a valid flight file


def test_a_folder_made_under_other_settings_of_the_conditions_is_refused(tmp_path):
    """The conditions' settings are part of the folder's stamp: a folder made when `paper`
    meant another setup (here, 2500 rad/s rotors) is not resumed."""
    from cableload_sim.reproduce.runner import Reproduction

    out = tmp_path / "old"
    out.mkdir()
    settings = [s for s in condition_settings("paper") if not s.startswith("quadrotor.rotor.speed_max")]
    (out / "reproduction.json").write_text(
        json.dumps({"quick": False, "conditions": "paper", "settings": settings})
    )
    with pytest.raises(OutputExistsError, match="speed_max=3000.0"):
        Reproduction(out, progress=False)
    stamp = json.loads((out / "reproduction.json").read_text())
    stamp["settings"] = condition_settings("paper")
    (out / "reproduction.json").write_text(json.dumps(stamp))
    Reproduction(out, progress=False)  # the same settings: resumed


def test_calls_started_together_on_one_new_folder_share_it(tmp_path):
    """Two calls on one folder (each its own tables): whichever comes first writes the stamp,
    the other resumes it; neither takes the folder for a foreign one."""
    from concurrent.futures import ThreadPoolExecutor

    from cableload_sim.reproduce.runner import Reproduction

    out = tmp_path / "shared"
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: Reproduction(out, progress=False), range(8)))
    assert len(made) == 8
    assert json.loads((out / "reproduction.json").read_text())["conditions"] == "paper"
    for k in range(8):
        made[k]._add_time("table_03", 1.0)
    assert json.loads((out / "reproduction.json").read_text())["seconds"]["table_03"] == 8.0
