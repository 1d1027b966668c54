"""The planners' closed-loop figures on named flights, against the record in
``tests/closed_loop_record.json``: a change made for speed (the kernels, the teacher's
solver, the student's runtime) must leave every flight as it was, to 1 % of its position and
orientation RMSE. A change meant to alter the flights refreshes the record, with the reason in
its commit:

    .venv/bin/python tests/test_closed_loop_record.py --update
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

RECORD = Path(__file__).with_name("closed_loop_record.json")
FLIGHTS = (
    # planner, trajectory, orientation, quadrotors, seconds
    ("formation", "eight-medium", "constant", 3, 10.0),
    ("formation-follow", "eight-medium", "zero-sideslip", 3, 10.0),
    ("teacher", "eight-medium", "constant", 3, 10.0),
    ("teacher", "eight-medium", "zero-sideslip", 3, 10.0),
    ("student", "eight-medium", "constant", 3, 10.0),
    ("student", "eight-medium", "zero-sideslip", 3, 10.0),
)
KEYS = ("rmse_position_m", "rmse_orientation_deg")


def flight_id(flight: tuple) -> str:
    planner, trajectory, orientation, uavs, seconds = flight
    return f"{planner}-{trajectory}-{orientation}-n{uavs}-{seconds:g}s"


def figures(flight: tuple) -> dict[str, float]:
    """The flight's status and RMSEs on the embedded simulator, the default config."""
    from backends.session import Flight, fly
    from cableload_sim.params import load_config
    from cableload_sim.trajectories import make_reference

    planner, trajectory, orientation, uavs, seconds = flight
    config = load_config(uavs=uavs)
    result = fly(Flight(config, make_reference(trajectory, orientation=orientation), seconds), planner)
    return {"status": result["status"], **{key: float(result[key]) for key in KEYS}}


@pytest.mark.parametrize("flight", FLIGHTS, ids=flight_id)
def test_a_flight_flies_as_recorded(flight):
    record = json.loads(RECORD.read_text())[flight_id(flight)]
    now = figures(flight)
    assert now["status"] == record["status"] == "completed"
    for key in KEYS:
        assert now[key] == pytest.approx(record[key], rel=0.01), (key, now, record)


def test_the_record_holds_every_flight():
    record = json.loads(RECORD.read_text())
    assert sorted(record) == sorted(flight_id(f) for f in FLIGHTS)
    assert all(r["status"] == "completed" and r["rmse_position_m"] > 0 for r in record.values())


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {sys.argv[0]} --update")
    fresh = {flight_id(f): figures(f) for f in FLIGHTS}
    RECORD.write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n")
    print(json.dumps(fresh, indent=1, sort_keys=True))
