"""The flight file: what an arena flight needs besides the system config, in TOML.

It names each quadrotor (its agiros namespace, its motion-capture body, the slot it stands on
before take-off), the load's body and where it rests, the arena and its geofence, the safety
limits, what preflight accepts, and the pilots' queueing mode. Every key is checked like the
system config: a bad key or value is named with what was expected. An example that flies
against ``cableload world --hardware`` is shipped as ``hw/flights/example.toml``::

    [flight]
    config = ""                      # system config: a TOML file or paper-conditions ("": the paper's)
    pilot_queue = "stock"            # stock | replace
    pilot_times = "message"          # message (keeps the stamps) | receipt (agiros re-times)
    mocap_topic = "/mocap/{body}/pose"
    takeoff_height_m = 0.5           # the pilots' takeoff_height: cables still slack there

    [[quad]]
    name = "quad1"                   # agiros namespace: /quad1/agiros_pilot/...
    body = "quad1"                   # motion-capture rigid body
    slot = [3.05, 0.57, 0.0]         # where it stands before take-off (m, world)

    [load]
    body = "load"
    start = [2.5, 0.0, 0.06]         # the load's box centre as it rests on the floor (m)

    [arena]
    min = [-4.5, -3.5, -0.2]         # leaving it switches a quadrotor off (m)
    max = [4.5, 3.5, 3.0]
    geofence_margin_m = 0.3          # no plan may come closer to its walls

    [safety]                         # hw.safety.SafetyLimits, less the arena
    max_speed_mps = 3.0

    [preflight]
    slot_tolerance_m = 0.05
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from backends.pilot import QUEUE_MODES, TIME_MODES
from cableload_sim import checks
from cableload_sim.errors import ConfigError
from hw.safety import SafetyLimits

MOCAP_TOPICS = ("/mocap/{body}/pose", "/vrpn_client_node/{body}/pose")
"""Common motion-capture topic templates (``{body}``: the rigid body's name); any with
``{body}`` is accepted."""

_ROS_NAME = r"[A-Za-z][A-Za-z0-9_]*"


def _ros_name(path: str, value) -> str:
    import re

    name = checks.text()(path, value)
    if not re.fullmatch(_ROS_NAME, name):
        raise ConfigError(f"{path}: expected a ROS name (a letter, then letters, digits or _), got {value!r}")
    return name


def _mocap_template(path: str, value) -> str:
    template = checks.text()(path, value)
    if "{body}" not in template or not template.startswith("/"):
        raise ConfigError(
            f"{path}: expected a topic template starting with / and holding {{body}} "
            f"(e.g. {MOCAP_TOPICS[0]!r} or {MOCAP_TOPICS[1]!r}), got {value!r}"
        )
    return template


@dataclass(frozen=True)
class QuadSpec:
    """One quadrotor of the flight."""

    name: str
    """Its agiros namespace (``/<name>/agiros_pilot/...``)."""
    body: str
    """Its motion-capture rigid body."""
    slot: tuple[float, float, float]
    """Where it stands on the ground before take-off (m, world)."""


@dataclass(frozen=True)
class LoadSpec:
    body: str = "load"
    """The load's motion-capture rigid body."""
    start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The load's position as it rests on the floor before take-off (m, world)."""


@dataclass(frozen=True)
class PreflightLimits:
    """What ``cableload preflight`` accepts."""

    slot_tolerance_m: float = 0.05
    """Largest distance of a quadrotor from its slot (m)."""
    load_tolerance_m: float = 0.1
    """Largest distance of the load from its start (m)."""
    min_state_rate_hz: float = 40.0
    """Slowest acceptable rate of each pilot's state topic (Hz)."""
    min_mocap_rate_hz: float = 80.0
    """Slowest acceptable rate of each motion-capture body (Hz)."""
    max_clock_offset_s: float = 0.05
    """Largest offset between a pilot's stamps and the station's clock (s)."""
    min_voltage_v: float = 14.8
    """Lowest battery voltage to take off with (V)."""
    listen_s: float = 2.0
    """How long preflight listens to every topic (s)."""

    def __post_init__(self):
        for name in (f.name for f in dataclasses.fields(self)):
            checks.positive(name, getattr(self, name))


@dataclass(frozen=True)
class FlightFile:
    """A flight as its file describes it."""

    quads: tuple[QuadSpec, ...]
    load: LoadSpec
    safety: SafetyLimits
    preflight: PreflightLimits = field(default_factory=PreflightLimits)
    config: str = ""
    """The system config: a TOML file (relative to the flight file; first), or a shipped
    configuration's name (``paper``, ``paper-conditions``); empty: the paper's setup."""
    pilot_queue: str = "stock"
    pilot_times: str = "message"
    """How the pilots time a received trajectory: ``receipt`` (agiros re-times it to its
    arrival; the clients compensate the link latency they measure) or ``message``."""
    mocap_topic: str = MOCAP_TOPICS[0]
    takeoff_height_m: float = 0.5
    """How far the pilots climb on ``start`` (their ``takeoff_height``, m): the cables must
    stay slack at that height (preflight checks it)."""
    path: Path | None = None
    """The file it was read from."""

    @property
    def n_uavs(self) -> int:
        return len(self.quads)

    @property
    def names(self) -> list[str]:
        return [q.name for q in self.quads]

    @property
    def slots(self) -> np.ndarray:
        return np.array([q.slot for q in self.quads], dtype=float)

    def mocap(self, body: str) -> str:
        """The pose topic of a motion-capture body."""
        return self.mocap_topic.format(body=body)

    def config_path(self) -> Path | str | None:
        """The flight's system config: a file (relative to the flight file; first) or a shipped
        configuration's name."""
        from cableload_sim.params.config import resolve_config

        if not self.config:
            return None
        return resolve_config(self.config, self.path.parent if self.path is not None else None)

    def load_config(self, overrides=()):
        """The system config this flight flies, with as many quadrotors as it names."""
        from cableload_sim.params import load_config

        config = load_config(self.config_path(), uavs=self.n_uavs, overrides=overrides)
        return config


_FLIGHT_KEYS = {
    "config": checks.text(allow_empty=True),
    "pilot_queue": checks.choice(QUEUE_MODES),
    "pilot_times": checks.choice(TIME_MODES),
    "takeoff_height_m": checks.positive,
}
_QUAD_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "name": _ros_name,
    "body": _ros_name,
    "slot": checks.vector(3),
}
_LOAD_CHECKS: dict[str, Callable[[str, Any], Any]] = {"body": _ros_name, "start": checks.vector(3)}
_ARENA_KEYS = {"min", "max", "geofence_margin_m"}
_SAFETY_FIELDS = {f.name for f in dataclasses.fields(SafetyLimits)} - {
    "arena_min",
    "arena_max",
    "geofence_margin_m",
}


def parse_flight(data: dict, path: Path | None = None) -> FlightFile:
    """A ``FlightFile`` from a parsed TOML table; every bad key or value named."""
    checks.table("flight file", data, {"flight", "quad", "load", "arena", "safety", "preflight"})
    for required in ("quad", "arena"):
        if required not in data:
            what = "[[quad]] tables" if required == "quad" else "[arena] with min and max"
            raise ConfigError(f"flight file: missing {what}")
    flight = checks.table("flight", data.get("flight", {}), set(_FLIGHT_KEYS) | {"mocap_topic"})
    options = {k: check(f"flight.{k}", flight[k]) for k, check in _FLIGHT_KEYS.items() if k in flight}
    if "mocap_topic" in flight:
        options["mocap_topic"] = _mocap_template("flight.mocap_topic", flight["mocap_topic"])
    quads_raw = data["quad"]
    if not isinstance(quads_raw, list) or not quads_raw:
        raise ConfigError(f"quad: expected one or more [[quad]] tables, got {quads_raw!r}")
    quads = []
    for k, raw in enumerate(quads_raw):
        where = f"quad[{k}]"
        checks.table(where, raw, set(_QUAD_CHECKS))
        missing = sorted(set(_QUAD_CHECKS) - set(raw))
        if missing:
            raise ConfigError(f"{where}: missing {missing[0]!r} (expected name, body and slot)")
        quads.append(
            QuadSpec(**{key: check(f"{where}.{key}", raw[key]) for key, check in _QUAD_CHECKS.items()})
        )
    load = checks.build(LoadSpec, "load", data.get("load", {}), _LOAD_CHECKS)
    for what, names in (("name", [q.name for q in quads]), ("body", [q.body for q in quads] + [load.body])):
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(
                f"quad: expected a distinct {what} per quadrotor and the load, got {repeated[0]!r} twice"
            )
    arena = checks.table("arena", data["arena"], _ARENA_KEYS)
    for key in ("min", "max"):
        if key not in arena:
            raise ConfigError(f"arena: missing {key!r} (the arena box's corner, [x, y, z] m)")
    safety_raw = checks.table("safety", data.get("safety", {}), _SAFETY_FIELDS)
    number = {name: checks.finite for name in _SAFETY_FIELDS}
    safety_values = {k: number[k](f"safety.{k}", v) for k, v in safety_raw.items()}
    try:
        safety = SafetyLimits(
            arena_min=checks.vector(3)("arena.min", arena["min"]),
            arena_max=checks.vector(3)("arena.max", arena["max"]),
            geofence_margin_m=checks.non_negative(
                "arena.geofence_margin_m", arena.get("geofence_margin_m", 0.3)
            ),
            **safety_values,
        )
    except ConfigError as err:
        message = str(err)
        prefix = (
            "arena."
            if message.split(":")[0] in ("arena_min", "arena_max", "geofence_margin_m")
            else "safety."
        )
        raise ConfigError(prefix + message.replace("arena_min", "min").replace("arena_max", "max")) from None
    preflight_checks = {f.name: checks.positive for f in dataclasses.fields(PreflightLimits)}
    preflight = checks.build(PreflightLimits, "preflight", data.get("preflight", {}), preflight_checks)
    lo, hi = safety.geofence
    for q in quads:
        if np.any(np.asarray(q.slot) < np.asarray(safety.arena_min)) or np.any(
            np.asarray(q.slot) > np.asarray(safety.arena_max)
        ):
            box = f"[{list(safety.arena_min)}, {list(safety.arena_max)}]"
            raise ConfigError(f"quad {q.name}: slot {list(q.slot)} is outside the arena {box}")
    if np.any(np.asarray(load.start)[:2] < lo[:2]) or np.any(np.asarray(load.start)[:2] > hi[:2]):
        raise ConfigError(
            f"load.start: {list(load.start)} is outside the geofence [{lo.tolist()}, {hi.tolist()}]"
        )
    return FlightFile(tuple(quads), load, safety, preflight, path=path, **options)


EXAMPLE = Path(__file__).resolve().parent / "flights" / "example.toml"
"""The shipped example flight (``cableload world --hardware`` serves it by default)."""


def read_flight(path) -> FlightFile:
    """Read and check a flight file."""
    path = Path(path)
    return parse_flight(checks.read_toml(path, "flight file"), path)
