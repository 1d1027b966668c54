"""The operator's station without ROS: the scripted and keyboard inputs, and the dead-man that
switches every quadrotor off the moment it is let go, from any phase."""

from __future__ import annotations

import os
import time

import pytest

from cableload_sim.errors import ConfigError, UsageError
from hw.flight import EXAMPLE, read_flight
from hw.fly import FlightAborted, Station
from hw.operator import Button, KeyboardSource, ScriptedSource, ScriptStep, input_source

FLIGHTS = EXAMPLE.parent


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_script_waits_for_each_phase_then_its_delay():
    clock = Clock()
    source = ScriptedSource(
        [ScriptStep(Button.DEADMAN), ScriptStep(Button.TAKEOFF, "enabled", 0.5), ScriptStep(Button.RELEASE)],
        clock=clock,
    )
    held = source.poll("idle")
    assert [(e.button, e.pressed) for e in held] == [(Button.DEADMAN, True)]  # held, not released
    assert source.poll("idle") == []  # waits for its phase
    assert source.poll("enabled") == []  # then its delay
    clock.now = 0.6
    pressed = source.poll("enabled")
    assert [(e.button, e.pressed) for e in pressed[:2]] == [(Button.TAKEOFF, True), (Button.TAKEOFF, False)]
    assert [(e.button, e.pressed) for e in pressed[2:]] == [(Button.DEADMAN, False)]
    assert source.finished


def test_the_shipped_scripts_read_and_bad_ones_are_named(tmp_path):
    fly = ScriptedSource.from_file(FLIGHTS / "operator-fly.toml")
    assert [s.button for s in fly.steps][:5] == [
        Button.DEADMAN,
        Button.ENABLE,
        Button.TAKEOFF,
        Button.START_TRANSPORT,
        Button.CONFIRM,
    ]
    release = ScriptedSource.from_file(FLIGHTS / "operator-release.toml")
    assert release.steps[-1] == ScriptStep(Button.RELEASE, "transport", 10.0)
    bad = tmp_path / "bad.toml"
    for text, message in (
        ('[[step]]\nbutton = "jump"\n', r"step\[0\].button: expected one of"),
        ('[[step]]\nbutton = "land"\nwhen = "flying"\n', r"step\[0\].when: expected one of"),
        ('[[step]]\nbutton = "land"\nwait_s = -1\n', r"step\[0\].wait_s: expected a non-negative"),
        ('[[step]]\nwhen = "done"\n', r"step\[0\]: missing 'button'"),
        ('[[stepp]]\nbutton = "land"\n', "unknown key 'stepp'"),
    ):
        bad.write_text(text)
        with pytest.raises(ConfigError, match=message):
            ScriptedSource.from_file(bad)
    with pytest.raises(UsageError, match="--operator: expected script:FILE"):
        input_source("joystick")


def test_the_keyboard_latches_the_deadman_and_reads_the_buttons():
    master, slave = os.openpty()
    stream = os.fdopen(slave, "r")
    source = KeyboardSource(stream)
    try:
        os.write(master, b" et")
        time.sleep(0.05)
        events = [(e.button, e.pressed) for e in source.poll("idle")]
        assert events[0] == (Button.DEADMAN, True)
        assert (Button.ENABLE, True) in events and (Button.TAKEOFF, True) in events
        os.write(master, b"x")
        time.sleep(0.05)
        assert [(e.button, e.pressed) for e in source.poll("idle")] == [(Button.DEADMAN, False)]
    finally:
        source.close()
        stream.close()
        os.close(master)


class Pilot:
    def __init__(self):
        self.commands: list[tuple[str, float]] = []
        self.telemetry = None
        self.state = None

    def command(self, name: str) -> None:
        self.commands.append((name, time.time()))

    def enable(self, on: bool) -> None:
        self.commands.append((f"enable {on}", time.time()))


class Pilots:
    def __init__(self, n):
        self.clients = [Pilot() for _ in range(n)]
        self.time = 3.0
        self.actions: list[tuple[int, str]] = []

    def command(self, i: int, action: str) -> None:
        self.actions.append((i, action))


def run_station(steps, phase="idle", seconds=0.3):
    flight = read_flight(EXAMPLE)
    backend = Pilots(flight.n_uavs)
    station = Station(flight, backend, ScriptedSource(steps))
    station.phase = phase
    station.transporting = phase == "transport"
    station.start()
    time.sleep(seconds)
    return station, backend


def test_letting_the_deadman_go_switches_every_quadrotor_off_at_once():
    station, backend = run_station(
        [ScriptStep(Button.DEADMAN), ScriptStep(Button.RELEASE, wait_s=0.1)], "transport"
    )
    try:
        offs = [t for pilot in backend.clients for name, t in pilot.commands if name == "off"]
        assert len(offs) == 3
        assert max(offs) - station.released_at < 0.05
        assert station.safety.stopped and station.safety.stop_status == "operator_off"
        assert station.safety.events[0].rule == "deadman"
        with pytest.raises(FlightAborted, match="dead-man"):
            station.check_deadman()
        assert [a["action"] for a in station.log.actions] == ["deadman_held", "deadman_released"]
    finally:
        station.close()


def test_enable_without_the_deadman_is_refused():
    flight = read_flight(EXAMPLE)
    backend = Pilots(flight.n_uavs)
    station = Station(flight, backend, ScriptedSource([ScriptStep(Button.ENABLE)]))
    station.start()
    try:
        assert station.wait_button(Button.ENABLE, timeout_s=2.0) is Button.ENABLE
        assert not station.deadman  # the flight's prepare() refuses to arm then
    finally:
        station.close()


def test_hover_during_the_transport_stops_it_in_hover():
    station, backend = run_station([ScriptStep(Button.DEADMAN), ScriptStep(Button.HOVER)], "transport")
    try:
        assert sorted(backend.actions) == [(0, "hover"), (1, "hover"), (2, "hover")]
        assert station.safety.stopped and station.safety.stop_status == "operator_hover"
        assert not any(name == "off" for p in backend.clients for name, _ in p.commands)
    finally:
        station.close()


def test_the_first_plans_are_shown_as_one_line_strip_per_quadrotor():
    pytest.importorskip("visualization_msgs.msg", reason="needs python3-visualization-msgs")
    import numpy as np

    from cableload_sim.horizon import node_times
    from cableload_sim.physics.world import UavTrajectory
    from hw.fly import plan_markers

    times = node_times(0.0)
    plans = []
    for k in range(3):
        p = np.zeros((times.size, 3))
        p[:, 0] = times + k
        zeros = np.zeros_like(p)
        plans.append(UavTrajectory(times, p, zeros, zeros, zeros, zeros))
    markers = plan_markers(plans, ["quad1", "quad2", "quad3"]).markers
    assert [m.ns for m in markers] == ["quad1", "quad2", "quad3"]
    assert [len(m.points) for m in markers] == [times.size] * 3
    assert markers[2].points[-1].x == pytest.approx(times[-1] + 2)
    assert all(0.0 <= c <= 1.0 for m in markers for c in (m.color.r, m.color.g, m.color.b))


class FakeGamepad:
    """An open input device: evdev's ``read_one`` over a list of events, an exception raised
    where one stands (a device unplugged)."""

    def __init__(self, events):
        self.events = list(events)
        self.closed = False

    def read_one(self):
        if not self.events:
            return None
        event = self.events.pop(0)
        if isinstance(event, Exception):
            raise event
        return event


def test_the_gamepad_reads_its_buttons_and_an_unplugged_one_lets_the_deadman_go():
    evdev = pytest.importorskip("evdev", reason="the flight extra (evdev) is not installed")
    from hw.operator import GamepadSource

    def key(name: str, value: int):
        return evdev.InputEvent(0, 0, evdev.ecodes.EV_KEY, evdev.ecodes.ecodes[name], value)

    axis = evdev.InputEvent(0, 0, evdev.ecodes.EV_ABS, evdev.ecodes.ABS_X, 120)
    device = FakeGamepad(
        [key("BTN_TL", 1), axis, key("BTN_SOUTH", 1), key("BTN_SOUTH", 2), key("BTN_SOUTH", 0)]
        + [key("BTN_MODE", 1), key("BTN_TR", 1)]
    )
    source = GamepadSource(device)
    got = [(e.button, e.pressed) for e in source.poll("idle")]
    assert got == [
        (Button.DEADMAN, True),
        (Button.ENABLE, True),  # the auto-repeat (2) and the stick are not buttons
        (Button.ENABLE, False),
        (Button.OFF, True),  # BTN_MODE is not mapped
    ]
    assert source.poll("idle") == []  # nothing new
    device.events.append(OSError(19, "No such device"))
    unplugged = source.poll("transport")
    assert [(e.button, e.pressed) for e in unplugged] == [(Button.DEADMAN, False)]


def test_the_status_line_of_each_quadrotor_says_what_the_operator_needs():
    """Armed, the pilot's state, voltage, motion-capture rate, the plan's age and the last
    safety action, per quadrotor, from the pilots' telemetry and the backend's ages."""
    from types import SimpleNamespace

    import numpy as np

    from hw.safety import Action

    def telemetry(armed: bool, queued: int, left: float, volts: float):
        return SimpleNamespace(
            bridge_armed=SimpleNamespace(data=armed),
            guard_triggered=SimpleNamespace(data=False),
            num_references_in_queue=queued,
            reference_left_duration=left,
            voltage=volts,
        )

    flight = read_flight(EXAMPLE)
    backend = Pilots(flight.n_uavs)
    backend.clients[0].telemetry = telemetry(True, 2, 0.15, 15.82)
    backend.clients[1].telemetry = telemetry(True, 0, 0.0, 15.4)
    rates = {quad.body: 100.0 for quad in flight.quads}
    rates[flight.quads[2].body] = 61.0
    backend.observer = SimpleNamespace(mocap_rates=lambda: rates)
    backend.safety_inputs = lambda: {"plan_age": np.array([0.05, 0.12, 0.7])}
    station = Station(flight, backend, ScriptedSource([]))
    station.transporting = True
    station.safety.trip(3.0, "link_lost", Action.HOVER, "no plan", flight.n_uavs, uav=2)
    lines = station.status_lines()
    held = "safety: hover (link_lost)"  # a load is carried by all: every quadrotor hovers
    assert lines[0] == f"quad1: armed, tracking, 15.82 V, mocap 100 Hz, plan 0.05 s old, {held}"
    assert lines[1] == f"quad2: armed, hover, 15.40 V, mocap 100 Hz, plan 0.12 s old, {held}"
    assert lines[2] == f"quad3: disarmed, off, - V, mocap 61 Hz, plan 0.70 s old, {held}"
    station.safety.reset()
    assert station.status_lines()[0].endswith("safety: none")
