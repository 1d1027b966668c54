"""The flight file: the shipped example reads, and every bad key or value is named."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import numpy as np
import pytest

from cableload_sim.errors import ConfigError
from hw.flight import parse_flight, read_flight

EXAMPLE = Path(__file__).resolve().parents[2] / "hw" / "flights" / "example.toml"


def example() -> dict:
    return tomllib.loads(EXAMPLE.read_text())


def test_the_example_flight_reads_with_its_quadrotors_bodies_and_limits():
    flight = read_flight(EXAMPLE)
    assert flight.names == ["quad1", "quad2", "quad3"]
    assert flight.mocap("load") == "/mocap/load/pose"
    assert flight.safety.min_distance_m == 0.4
    assert flight.safety.max_speed_mps == 4.0
    lo, hi = flight.safety.geofence
    np.testing.assert_allclose(lo, [-4.2, -3.2, -0.2])
    assert flight.pilot_queue == "stock"
    assert flight.load_config().system.n_uavs == 3


def test_the_example_slots_are_where_the_simulator_rests_the_quadrotors_on_the_ground():
    """The world in hardware mode places the system as the simulator does; preflight then
    finds every quadrotor on its slot."""
    from cableload_sim.physics.simulator import Simulator

    flight = read_flight(EXAMPLE)
    sim = Simulator(flight.load_config())
    sim.reset_on_ground(np.array(flight.load.start), np.array([1.0, 0.0, 0.0, 0.0]))
    state = sim.world_state()
    np.testing.assert_allclose(state.uav_p, flight.slots, atol=0.01)
    np.testing.assert_allclose(state.load_p, flight.load.start, atol=0.01)


def spoil(path: str, value):
    data = example()
    target = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is KeyError:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return data


@pytest.mark.parametrize(
    "path, value, message",
    [
        ("flight.pilot_queu", "stock", "flight: unknown key 'pilot_queu'"),
        ("flight.pilot_queue", "fifo", "flight.pilot_queue: expected one of"),
        ("flight.mocap_topic", "/mocap/pose", "flight.mocap_topic: expected a topic template"),
        ("quad.1.slot", [1.0, 2.0], r"quad\[1\].slot: expected a list of 3"),
        ("quad.0.name", "quad 1", r"quad\[0\].name: expected a ROS name"),
        ("quad.2.body", "quad1", "expected a distinct body"),
        ("quad.0.slot", [9.0, 0.0, 0.05], "quad quad1: slot .* outside the arena"),
        ("quad.1.colour", "red", r"quad\[1\]: unknown key 'colour'"),
        ("quad.2.slot", KeyError, r"quad\[2\]: missing 'slot'"),
        ("load.start", [9.0, 0.0, 0.0], "load.start: .* outside the geofence"),
        ("arena.max", [4.5, 3.5, -1.0], "arena.max: expected above min"),
        ("arena.geofence_margin_m", -0.1, "arena.geofence_margin_m: expected a non-negative"),
        ("arena.min", KeyError, "arena: missing 'min'"),
        ("safety.max_speed_mps", 0.0, "safety.max_speed_mps: expected a positive"),
        ("safety.max_sped_mps", 3.0, "safety: unknown key 'max_sped_mps'"),
        ("safety.min_distance_m", "far", "safety.min_distance_m: expected a finite number"),
        ("preflight.listen_s", -2, "preflight.listen_s: expected a positive"),
    ],
)
def test_a_bad_key_or_value_is_named(path, value, message):
    with pytest.raises(ConfigError, match=message):
        parse_flight(spoil(path, value))


def test_a_flight_needs_quadrotors_and_an_arena():
    data = example()
    with pytest.raises(ConfigError, match=r"missing \[\[quad\]\]"):
        parse_flight({k: v for k, v in data.items() if k != "quad"})
    with pytest.raises(ConfigError, match=r"missing \[arena\]"):
        parse_flight({k: v for k, v in data.items() if k != "arena"})
    with pytest.raises(ConfigError, match="flight file: unknown key 'quads'"):
        parse_flight({**copy.deepcopy(data), "quads": []})


def test_a_flight_file_that_is_not_toml_is_named(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[flight\n")
    with pytest.raises(ConfigError, match="bad.toml"):
        read_flight(bad)
