"""The operator's station: the buttons a flight is flown with, from a gamepad, a keyboard or a
script, and the dead-man switch that switches every quadrotor off when it is let go.

Buttons (``Button``): ``deadman`` (held for as long as the quadrotors may fly), ``enable``,
``takeoff``, ``start_transport``, ``confirm``, ``hover``, ``land``, ``off``. Every source gives
``OperatorEvent``s (a button pressed or released, wall-clock time) through the same two calls,
``poll()`` and ``close()``:

- ``GamepadSource``: a gamepad read with ``evdev`` (Linux input devices), the dead-man on a
  shoulder button that must be held;
- ``KeyboardSource``: the terminal's keys, for a bench without a gamepad. A keyboard reports no
  key held down, so its dead-man is latched: ``space`` holds it, ``x`` (or Escape) lets it go;
- ``ScriptedSource``: a TOML script of steps, each a button, the station phase it waits for
  and a delay, for tests and rehearsals (``hw/flights/operator-fly.toml``).

The software is never the only way to stop: the RC transmitter's kill switch cuts the motors
through the flight controller whatever this station does (see the flight-test guide).
"""

from __future__ import annotations

import enum
import os
import select
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cableload_sim import checks
from cableload_sim.errors import ConfigError, UsageError


class Button(str, enum.Enum):
    DEADMAN = "deadman"
    ENABLE = "enable"
    TAKEOFF = "takeoff"
    START_TRANSPORT = "start_transport"
    CONFIRM = "confirm"
    HOVER = "hover"
    LAND = "land"
    OFF = "off"
    RELEASE = "release"
    """Not a button: the scripted source's way to let the dead-man go."""


PHASES = ("idle", "enabled", "airborne", "shown", "transport", "done", "landed")
"""The station's phases a script step may wait for: ``idle`` (nothing yet), ``enabled`` (every
pilot armed), ``airborne`` (every quadrotor hovering after take-off), ``shown`` (the first plans
on screen, waiting for ``confirm``), ``transport`` (the planners fly), ``done`` (the transport
ended), ``landed`` (every quadrotor back on the ground)."""


@dataclass(frozen=True)
class OperatorEvent:
    button: Button
    pressed: bool
    t: float
    """Wall-clock time (s)."""
    source: str


class InputSource(Protocol):
    name: str

    def poll(self, phase: str) -> list[OperatorEvent]:
        """Events since the last call (never blocks); ``phase`` is the station's."""

    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptStep:
    button: Button
    when: str = ""
    """The station phase to wait for before the delay ("" : none)."""
    wait_s: float = 0.0
    """Delay after the phase (or the previous step) before the button is pressed (s)."""


class ScriptedSource:
    """Presses the buttons of a script in order: each step waits for its phase, then its delay.
    ``deadman`` is pressed and held; ``release`` lets it go."""

    name = "script"

    def __init__(self, steps: list[ScriptStep], clock=time.monotonic):
        self.steps = list(steps)
        self.clock = clock
        self._k = 0
        self._since: float | None = None

    @classmethod
    def from_file(cls, path) -> ScriptedSource:
        data = checks.read_toml(Path(path), "operator script")
        checks.table("operator script", data, {"step"})
        raw = data.get("step")
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{path}: expected [[step]] tables, got {raw!r}")
        steps = []
        buttons = [b.value for b in Button]
        for k, step in enumerate(raw):
            where = f"step[{k}]"
            checks.table(where, step, {"button", "when", "wait_s"})
            if "button" not in step:
                raise ConfigError(f"{where}: missing 'button' (one of {buttons})")
            steps.append(
                ScriptStep(
                    Button(checks.choice(buttons)(f"{where}.button", step["button"])),
                    checks.choice(("", *PHASES))(f"{where}.when", step.get("when", "")),
                    checks.non_negative(f"{where}.wait_s", step.get("wait_s", 0.0)),
                )
            )
        return cls(steps)

    @property
    def finished(self) -> bool:
        return self._k >= len(self.steps)

    def poll(self, phase: str) -> list[OperatorEvent]:
        events: list[OperatorEvent] = []
        while self._k < len(self.steps):
            step = self.steps[self._k]
            now = self.clock()
            if self._since is None:
                if step.when and phase != step.when:
                    return events
                self._since = now
            if now - self._since < step.wait_s:
                return events
            t = time.time()
            if step.button is Button.RELEASE:
                events.append(OperatorEvent(Button.DEADMAN, False, t, self.name))
            else:
                events.append(OperatorEvent(step.button, True, t, self.name))
                if step.button is not Button.DEADMAN:
                    events.append(OperatorEvent(step.button, False, t, self.name))
            self._k += 1
            self._since = None
        return events

    def close(self) -> None:
        pass


class KeyboardSource:
    """The terminal's keys: ``space`` dead-man held (latched), ``x`` or Escape dead-man let go,
    ``e`` enable, ``t`` take-off, ``s`` start transport, ``c`` confirm, ``h`` hover, ``l``
    land, ``o`` off."""

    name = "keyboard"
    KEYS = {
        " ": (Button.DEADMAN, True),
        "x": (Button.DEADMAN, False),
        "\x1b": (Button.DEADMAN, False),
        "e": (Button.ENABLE, True),
        "t": (Button.TAKEOFF, True),
        "s": (Button.START_TRANSPORT, True),
        "c": (Button.CONFIRM, True),
        "h": (Button.HOVER, True),
        "l": (Button.LAND, True),
        "o": (Button.OFF, True),
    }

    def __init__(self, stream=None):
        import termios
        import tty

        self.stream = stream if stream is not None else sys.stdin
        if not self.stream.isatty():
            raise UsageError("--operator keyboard: needs a terminal (stdin is not one)")
        self.fd = self.stream.fileno()
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)

    def poll(self, phase: str) -> list[OperatorEvent]:
        events = []
        while select.select([self.fd], [], [], 0.0)[0]:
            key = os.read(self.fd, 1).decode(errors="replace").lower()
            if key in self.KEYS:
                button, pressed = self.KEYS[key]
                events.append(OperatorEvent(button, pressed, time.time(), self.name))
                if button is not Button.DEADMAN:
                    events.append(OperatorEvent(button, False, time.time(), self.name))
        return events

    def close(self) -> None:
        import termios

        termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)


GAMEPAD_BUTTONS = {
    "BTN_TL": Button.DEADMAN,  # left shoulder: held
    "BTN_SOUTH": Button.ENABLE,  # A / cross
    "BTN_NORTH": Button.TAKEOFF,  # Y / triangle
    "BTN_START": Button.START_TRANSPORT,
    "BTN_EAST": Button.CONFIRM,  # B / circle
    "BTN_WEST": Button.HOVER,  # X / square
    "BTN_SELECT": Button.LAND,
    "BTN_TR": Button.OFF,  # right shoulder
}
"""Default mapping of evdev key names to buttons (an Xbox or PlayStation layout)."""


class GamepadSource:
    """A gamepad through ``evdev`` (the ``flight`` extra; Linux). ``device``: its path
    (``/dev/input/eventN``), an open device (anything with evdev's ``read_one`` and
    ``close``), or None for the first device that has the dead-man button. Key presses and
    releases of the mapped buttons become events (auto-repeats and axes are ignored); a
    device that fails (unplugged) lets the dead-man go."""

    name = "gamepad"

    def __init__(self, device=None, mapping: dict[str, Button] | None = None):
        try:
            import evdev
        except ImportError as err:
            raise UsageError(
                "--operator gamepad: needs the evdev package (pip install evdev, or the "
                "project's flight extra); "
                "--operator keyboard works without it"
            ) from err
        self.evdev = evdev
        self.mapping = mapping or GAMEPAD_BUTTONS
        codes = {evdev.ecodes.ecodes[name]: button for name, button in self.mapping.items()}
        self.codes = codes
        if device is None:
            deadman = next(c for c, b in codes.items() if b is Button.DEADMAN)
            for path in evdev.list_devices():
                candidate = evdev.InputDevice(path)
                if deadman in candidate.capabilities().get(evdev.ecodes.EV_KEY, []):
                    device = path
                    break
            else:
                raise UsageError("--operator gamepad: no input device with a dead-man button (BTN_TL) found")
        self.device = evdev.InputDevice(device) if isinstance(device, str) else device

    def poll(self, phase: str) -> list[OperatorEvent]:
        events = []
        try:
            while True:
                event = self.device.read_one()
                if event is None:
                    break
                if (
                    event.type == self.evdev.ecodes.EV_KEY
                    and event.code in self.codes
                    and event.value in (0, 1)
                ):
                    events.append(
                        OperatorEvent(self.codes[event.code], bool(event.value), time.time(), self.name)
                    )
        except OSError:  # unplugged: the dead-man is let go
            events.append(OperatorEvent(Button.DEADMAN, False, time.time(), self.name))
        return events

    def close(self) -> None:
        self.device.close()


def input_source(spec: str) -> InputSource:
    """``script:FILE``, ``keyboard``, ``gamepad`` or ``gamepad:/dev/input/eventN``."""
    if spec.startswith("script:"):
        return ScriptedSource.from_file(spec.removeprefix("script:"))
    if spec == "keyboard":
        return KeyboardSource()
    if spec == "gamepad" or spec.startswith("gamepad:"):
        return GamepadSource(spec.partition(":")[2] or None)
    raise UsageError(f"--operator: expected script:FILE, keyboard or gamepad[:DEVICE], got {spec!r}")
