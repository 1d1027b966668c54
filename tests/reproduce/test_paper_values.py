"""The paper's values as transcribed: every table loads with the rows the paper prints, the values
read from the paper are where they belong, the ✗ of Table 6 stays a mark, the printed errors
agree with the printed poses, and bad input is refused with a message naming it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from cableload_sim.errors import ConfigError, UsageError
from cableload_sim.reproduce import paper
from cableload_sim.reproduce.paper import Mark, paper_table, paper_tables, paper_timings

ROWS = {1: 2, 2: 12, 3: 3, 4: 2, 5: 12, 6: 18, 7: 2, 8: 2, 9: 6, 10: 5, 11: 4}
"""Rows in each file: one per printed row, times the policies of a table printed with a pair of
columns per policy (2, 5: student and teacher; 6: three student policies); one per printed
column for the tables printed with the metrics as rows (1, 4, 7, 8)."""

PRINTED_ROWS = {1: 2, 2: 6, 3: 3, 4: 2, 5: 6, 6: 6, 7: 2, 8: 2, 9: 6, 10: 5, 11: 4}
"""Body rows as the paper prints them (Table 9: experiments 0 to 5, two lines each)."""

SPOT_CHECKS = [
    # (table, row fields, column, value as printed)
    (1, {"planner": "teacher"}, "position", 0.171),
    (1, {"planner": "student"}, "orientation", 9.335),
    (2, {"case": "3.5 x 3.5", "planner": "student"}, "position", 0.707),
    (2, {"case": "2.7 x 2.3", "planner": "teacher"}, "orientation", 4.324),
    (3, {"method": "MLP"}, "y", 0.116),
    (3, {"method": "Teacher"}, "z", 0.003),
    (4, {"orientation_mode": "zero-sideslip"}, "orientation", 93.575),
    (4, {"orientation_mode": "constant"}, "position", 0.092),
    (5, {"case": "2.0 x 2.0", "planner": "student"}, "orientation", 10.877),
    (5, {"case": "2.5 x 2.5", "planner": "teacher"}, "position", 0.090),
    (6, {"case": "Eight (Zero-sideslip)", "policy": "SP (Zero-sideslip)"}, "orientation", 12.603),
    (6, {"case": "Square (Constant)", "policy": "SP (Constant)"}, "position", 0.202),
    (6, {"case": "Circle (Zero-sideslip)", "policy": "SP (Both)"}, "orientation", 10.403),
    (7, {"orientation_mode": "constant"}, "orientation", 3.157),
    (7, {"orientation_mode": "zero-sideslip"}, "position", 0.378),
    (8, {"planner": "teacher"}, "orientation", 1.631),
    (8, {"planner": "student"}, "position", 0.097),
    (9, {"experiment": 0}, "start_position", (2.5465, 0.0034, 0.4888)),
    (9, {"experiment": 3}, "orientation_error", 4.3358),
    (9, {"experiment": 5}, "end_orientation", (5.9588, -13.9744, 88.3386)),
    (10, {"perturbation": "load_mass"}, "orientation", 44.469),
    (10, {"perturbation": "communication_delay"}, "position", 0.178),
    (11, {"policy": "SP (Both)"}, "training_time", 388.37),
    (11, {"policy": "SP (Real)"}, "rounds", 25),
]


@pytest.fixture(scope="module")
def tables() -> dict[int, paper.PaperTable]:
    return paper_tables()


@pytest.mark.parametrize("number", sorted(ROWS))
def test_every_table_loads_with_the_rows_the_paper_prints(tables, number):
    table = tables[number]
    assert table.number == number and table.caption.startswith(f"Table {number}: ")
    assert len(table.rows) == ROWS[number] and table.printed_rows == PRINTED_ROWS[number]
    assert set(table.columns) <= set(table.units)
    for row in table.rows:
        assert set(table.columns) <= set(row) and row["case"]


def test_the_loader_knows_eleven_tables(tables):
    assert sorted(tables) == list(range(1, 12)) == list(paper.TABLES)


@pytest.mark.parametrize("number, fields, column, printed", SPOT_CHECKS)
def test_a_value_read_from_the_paper_is_in_its_row(tables, number, fields, column, printed):
    assert tables[number].row(**fields)[column] == printed


def test_the_units_are_the_papers():
    assert paper_table(2).units["position"] == "m" and paper_table(2).units["orientation"] == "deg"
    assert paper_table(3).units["overall"] == "m/s"
    assert paper_table(9).units["end_position"] == "m" and paper_table(9).units["orientation_error"] == "deg"
    assert paper_table(11).units["total_time"] == "min"


def test_the_crosses_of_table_6_load_as_the_stop_mark(tables):
    table = tables[6]
    stopped = [row for row in table.rows if row["position"] is Mark.STOPPED]
    assert {(row["case"], row["policy"]) for row in stopped} == {
        ("Eight (Constant)", "SP (Zero-sideslip)"),
        ("Eight (Zero-sideslip)", "SP (Constant)"),
        ("Eight (Zero-sideslip)", "SP (Both)"),
        ("Circle (Constant)", "SP (Zero-sideslip)"),
        ("Circle (Zero-sideslip)", "SP (Constant)"),
        ("Square (Constant)", "SP (Zero-sideslip)"),
        ("Square (Zero-sideslip)", "SP (Constant)"),
    }
    # the paper's fourteen ✗, never a number; every other entry is one
    assert all(row["orientation"] is Mark.STOPPED for row in stopped)
    flown = [row for row in table.rows if row not in stopped]
    assert all(isinstance(row[c], float) for row in flown for c in table.columns)
    assert table.stated["stop_separation"].value == 0.4 and table.stated["stop_separation"].unit == "m"


def test_the_repeated_tables_hold_the_same_values(tables):
    """The appendix reprints Table 2 as Table 5 and Table 4 as Table 7."""
    for first, second in ((2, 5), (4, 7)):
        assert [{c: r[c] for c in tables[first].columns} for r in tables[first].rows] == [
            {c: r[c] for c in tables[second].columns} for r in tables[second].rows
        ]
    unperturbed = tables[10].row(perturbation="none")
    square = tables[6].row(case="Square (Zero-sideslip)", policy="SP (Both)")
    assert (unperturbed["position"], unperturbed["orientation"]) == (
        square["position"],
        square["orientation"],
    )


def test_the_total_training_time_is_collection_plus_training(tables):
    for row in tables[11].rows:
        assert row["data_collection_time"] + row["training_time"] == pytest.approx(
            row["total_time"], abs=1e-9
        )


def test_the_overall_derivative_error_is_the_mean_of_the_axes(tables):
    for row in tables[3].rows:
        assert (row["x"] + row["y"] + row["z"]) / 3 == pytest.approx(row["overall"], abs=5e-4)


def test_the_pose_errors_of_table_9_follow_from_its_goal_and_end_poses(tables):
    """The position error is the goal-to-end distance; the orientation error the angle of the
    rotation between goal and end with R = Rx(roll) Ry(pitch) Rz(yaw): 36 printed angles and 18
    printed coordinates checked against 12 printed errors."""
    for row in tables[9].rows:
        distance = np.linalg.norm(np.subtract(row["end_position"], row["goal_position"]))
        assert distance == pytest.approx(row["position_error"], abs=1e-4)
        goal = Rotation.from_euler("XYZ", row["goal_orientation"], degrees=True)
        end = Rotation.from_euler("XYZ", row["end_orientation"], degrees=True)
        assert math.degrees((goal.inv() * end).magnitude()) == pytest.approx(
            row["orientation_error"], abs=0.01
        )
    errors = [row["position_error"] for row in tables[9].rows]
    assert round(sum(errors) / len(errors), 3) == tables[9].stated["mean_position_error"].value == 0.058


def test_the_timings_quote_their_sentences():
    timings = paper_timings()
    assert timings["teacher_planning_time"].value == 101 and timings["teacher_planning_time"].unit == "ms"
    assert timings["teacher_solver_time"].value + timings["teacher_post_processing_time"].value == 100
    assert timings["student_inference_laptop_gpu"].value == 27
    assert timings["simulator_real_time_factor"].value == 0.25
    assert (
        timings["episode_collection_time"].value == 160 and timings["episode_collection_time"].relation == "~"
    )
    training = timings["real_policy_training_time"]
    assert (training.value, training.unit, training.relation) == (80, "min", "<=")
    assert "completed within 80 minutes" in training.sentence
    for value in timings.values():
        assert f"{value.value:g}" in value.sentence.replace("two hours", "2")


@pytest.mark.parametrize("number", [0, 12, -1])
def test_an_unknown_table_number_is_refused_naming_it(number):
    with pytest.raises(UsageError, match=rf"paper table: expected an integer from 1 to 11, got {number}"):
        paper_table(number)


def test_a_table_number_that_is_not_an_integer_is_refused():
    with pytest.raises(UsageError, match=r"expected an integer from 1 to 11, got '3'"):
        paper_table("3")  # type: ignore[arg-type]


def test_a_row_asked_for_that_is_not_one_is_refused(tables):
    with pytest.raises(UsageError, match=r"paper table 6: 6 rows match \{'policy': 'SP \(Both\)'\}"):
        tables[6].row(policy="SP (Both)")


def _broken(monkeypatch, number, change):
    """Table ``number`` as its file holds it, changed by ``change`` before it is checked."""
    data = paper._read(f"table_{number:02d}.toml")
    change(data)
    monkeypatch.setattr(paper, "_read", lambda name: data)


def test_a_file_missing_a_required_key_is_refused_naming_it(monkeypatch):
    _broken(monkeypatch, 3, lambda data: data.pop("caption"))
    with pytest.raises(ConfigError, match=r"table_03.toml: missing key 'caption'; expected the keys"):
        paper_table(3)


def test_a_row_missing_a_column_is_refused_naming_it(monkeypatch):
    _broken(monkeypatch, 8, lambda data: data["rows"][1].pop("orientation"))
    with pytest.raises(ConfigError, match=r"table_08.toml.rows\[1\]: missing key 'orientation'"):
        paper_table(8)


def test_a_mark_that_is_not_one_is_refused(monkeypatch):
    _broken(monkeypatch, 6, lambda data: data["rows"][1].update(position="x"))
    with pytest.raises(ConfigError, match=r"rows\[1\].position: expected a number or one of the marks"):
        paper_table(6)


def test_a_file_of_another_table_is_refused(monkeypatch):
    _broken(monkeypatch, 4, lambda data: data.update(table=7))
    with pytest.raises(ConfigError, match=r"table_04.toml.table: expected 4, the number in its name, got 7"):
        paper_table(4)
