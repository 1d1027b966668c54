"""``cableload preflight FLIGHT.toml``: is everything the flight needs alive and in place?

It listens to every topic of the flight for ``[preflight] listen_s`` and checks, per
quadrotor: its pilot's state topic at its rate, the offset between the pilot's stamps and this
station's clock, its battery's voltage (telemetry), its motion-capture body at its rate, that
it stands on its slot; for the load: its body at its rate and that it rests at its start. One
static check comes first: at the pilots' take-off height the cables must still be slack (else
``start`` would yank the load off the floor). The checks (``Check``) are pure functions of what
was heard (``Heard``), so that tests can drive them without ROS.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from hw.flight import FlightFile

CONNECT_TIMEOUT_S = 3.0
"""How long preflight waits for its subscriptions to connect before it starts listening (s)."""


@dataclass(frozen=True)
class Check:
    """One preflight check: who, what, the value found, what it must be, the verdict."""

    quad: str
    """The quadrotor's name, ``load``, or ``flight`` for a check of the whole flight."""
    check: str
    value: float | str | None
    expected: str
    passed: bool

    def as_dict(self) -> dict:
        value = self.value
        if isinstance(value, float) and not np.isfinite(value):
            value = None
        return {
            "quad": self.quad,
            "check": self.check,
            "value": value,
            "expected": self.expected,
            "passed": self.passed,
        }


@dataclass
class Heard:
    """What preflight heard in ``listen_s`` seconds (wall times, s)."""

    listen_s: float
    state_stamps: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """Per quadrotor, the stamps of its pilot's states."""
    state_offsets: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """Per quadrotor, receipt time minus stamp of each state (the clock offset plus latency)."""
    voltages: dict[str, float] = field(default_factory=dict)
    mocap_stamps: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    mocap_positions: dict[str, np.ndarray] = field(default_factory=dict)
    """Per body, its latest position."""


def _rate(stamps: list[float], listen_s: float) -> float:
    if len(stamps) < 2:
        return 0.0
    span = max(stamps[-1] - stamps[0], 1e-9)
    return (len(stamps) - 1) / span if span > 0.5 * listen_s else len(stamps) / listen_s


def cable_slack_at_takeoff(flight: FlightFile, config) -> list[Check]:
    """Whether each cable stays slack with its quadrotor at its slot plus the take-off height
    and the load at its start (its attachment points about it, level)."""
    system = config.system
    rho = system.attachment_array()
    checks = []
    for i, quad in enumerate(flight.quads):
        top = np.asarray(quad.slot) + [0.0, 0.0, flight.takeoff_height_m]
        uav_end = top + np.asarray(system.quadrotors[i].attachment)
        span = float(np.linalg.norm(uav_end - (np.asarray(flight.load.start) + rho[i])))
        length = system.cables[i].length
        checks.append(
            Check(
                quad.name,
                "cable slack after take-off",
                round(span, 3),
                f"< {length:g} m (cable length)",
                span < length,
            )
        )
    return checks


def judge(flight: FlightFile, heard: Heard, now: float) -> list[Check]:
    """Every check on what was heard."""
    limits = flight.preflight
    out = []
    for quad in flight.quads:
        name = quad.name
        rate = _rate(heard.state_stamps.get(name, []), heard.listen_s)
        out.append(
            Check(
                name,
                "state rate (Hz)",
                round(rate, 1),
                f">= {limits.min_state_rate_hz:g}",
                rate >= limits.min_state_rate_hz,
            )
        )
        offsets = heard.state_offsets.get(name, [])
        offset = float(np.median(offsets)) if offsets else float("nan")
        out.append(
            Check(
                name,
                "clock offset (s)",
                round(offset, 4) if offsets else None,
                f"|.| <= {limits.max_clock_offset_s:g}",
                bool(offsets) and abs(offset) <= limits.max_clock_offset_s,
            )
        )
        volts = heard.voltages.get(name, float("nan"))
        out.append(
            Check(
                name,
                "battery (V)",
                round(volts, 2) if np.isfinite(volts) else None,
                f">= {limits.min_voltage_v:g}",
                bool(volts >= limits.min_voltage_v),
            )
        )
        out += _body_checks(
            name, quad.body, np.asarray(quad.slot), limits.slot_tolerance_m, "on its slot (m)", heard, limits
        )
    out += _body_checks(
        "load",
        flight.load.body,
        np.asarray(flight.load.start),
        limits.load_tolerance_m,
        "at its start (m)",
        heard,
        limits,
    )
    return out


def _body_checks(who, body, where, tolerance, what, heard: Heard, limits) -> list[Check]:
    rate = _rate(heard.mocap_stamps.get(body, []), heard.listen_s)
    checks = [
        Check(
            who,
            f"motion capture of {body} (Hz)",
            round(rate, 1),
            f">= {limits.min_mocap_rate_hz:g}",
            rate >= limits.min_mocap_rate_hz,
        )
    ]
    position = heard.mocap_positions.get(body)
    if position is None:
        checks.append(Check(who, what, None, f"<= {tolerance:g}", False))
    else:
        off = float(np.linalg.norm(position - where))
        checks.append(Check(who, what, round(off, 3), f"<= {tolerance:g}", off <= tolerance))
    return checks


def listen(flight: FlightFile, seconds: float) -> Heard:
    """Subscribe to every topic of the flight for ``seconds`` (ROS) and keep what came."""
    from backends import ros1
    from backends.gazebo import init_node

    init_node("cableload_preflight")
    rospy = ros1.rospy()
    m = ros1.messages()
    heard = Heard(seconds)
    subscribers = []

    def on_state(name):
        def callback(msg):
            stamp = msg.header.stamp.to_sec()
            if stamp < started - 0.5:  # latched, from long ago
                return
            heard.state_stamps[name].append(stamp)
            heard.state_offsets[name].append(time.time() - stamp)

        return callback

    started = time.time()

    def on_telemetry(name):
        def callback(msg):
            if msg.header.stamp.to_sec() >= started - 0.5:  # not a latched message of long ago
                heard.voltages[name] = float(msg.voltage)

        return callback

    def on_pose(body):
        def callback(msg):
            heard.mocap_stamps[body].append(msg.header.stamp.to_sec())
            heard.mocap_positions[body] = ros1.xyz(msg.pose.position)

        return callback

    for quad in flight.quads:
        subscribers.append(
            rospy.Subscriber(
                ros1.STATE_TOPIC.format(quad=quad.name), m.QuadState, on_state(quad.name), queue_size=100
            )
        )
        subscribers.append(
            rospy.Subscriber(
                ros1.TELEMETRY_TOPIC.format(quad=quad.name),
                m.Telemetry,
                on_telemetry(quad.name),
                queue_size=10,
            )
        )
    for body in [q.body for q in flight.quads] + [flight.load.body]:
        subscribers.append(rospy.Subscriber(flight.mocap(body), m.PoseStamped, on_pose(body), queue_size=200))
    # A subscription takes a moment to connect to its publisher: the window opens once every
    # subscription is connected, or after CONNECT_TIMEOUT_S when one is not (a topic without a
    # publisher), so that a late connection is not read as a slow rate.
    deadline = time.time() + CONNECT_TIMEOUT_S
    while time.time() < deadline and not all(sub.get_num_connections() > 0 for sub in subscribers):
        time.sleep(0.05)
    started = time.time()
    heard.state_stamps = defaultdict(list)
    heard.state_offsets = defaultdict(list)
    heard.mocap_stamps = defaultdict(list)
    time.sleep(seconds)
    for sub in subscribers:
        sub.unregister()
    return heard


def preflight(flight: FlightFile, config=None, heard: Heard | None = None) -> list[Check]:
    """Every check of the flight: the static ones, then those on what ``listen`` hears."""
    config = config if config is not None else flight.load_config()
    heard = heard if heard is not None else listen(flight, flight.preflight.listen_s)
    return cable_slack_at_takeoff(flight, config) + judge(flight, heard, time.time())
