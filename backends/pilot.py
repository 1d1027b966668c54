"""The Agilicious pilot's behaviour as ``cableload world`` reproduces it (no ROS here).

Per quadrotor, a state machine and a reference queue:

- ``off``: motors off. ``enable`` (``std_msgs/Bool`` true) arms: ``enabled``.
- ``start`` (armed): from the ground (below ``TAKEOFF_THRESHOLD_M``) climb ``takeoff_height_m``
  at ``START_LAND_SPEED`` along a rest-to-rest minimum-snap piece, then ``hover``; above it, a
  hand-held start: ``hover`` where it is.
- ``hover``: holds its position; a queued reference whose start time has come makes it
  ``tracking``.
- ``tracking``: flies the queued references in order; when the queue runs out it holds the last
  reference's final position (``hover``).
- ``land``: accepted from ``hover`` only; from ``tracking`` the pilot forces a hover and refuses
  the land (send it again once hovering). It descends at ``LAND_SPEED`` until the quadrotor
  has come down ``land_drop_m`` (or reached the ground), then ``off`` (the real pilot idles
  armed on the ground until its operator sends ``off``; the world does that for it).
  ``force_hover``: drops the queue and hovers where it is. ``off`` and ``enable`` false disarm
  from any state and drop every reference.

The numbers are the Agilicious pilot's defaults (``pilot.yaml``: ``takeoff_height`` 1.0 m,
``takeoff_threshold`` 0.5 m, ``start_land_speed`` 0.6 m/s).

Times of a received trajectory (``times``): the agiros pilot re-times every trajectory message
to the moment it arrives (``receipt``: each point's time shifted by the arrival time minus the
first point's, so the first point is flown at once), and only then queues it. A pilot that
kept the message's times (``message``) is what the Gazebo and flight clients can choose for a
patched pilot. The clients compensate the re-timing (``backends.agiros``): each piece they send
starts at the plan's value one measured link latency after it leaves, so that it is flown at
the time it was planned for.

Queueing rule of the stock pilot (``queue="stock"``): a reference is appended only when it
starts at or after the end of the last queued one, otherwise it is rejected; expired references
leave the queue. A pilot patched to replace its queue (``queue="replace"``) takes every valid
reference in place of the whole queue. A reference with fewer than two points, times that do
not increase, or a non-finite value is rejected by both.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from cableload_sim.horizon import node_times
from cableload_sim.physics.world import UavTrajectory

LAND_SPEED = 0.6
"""Descent speed while landing, and climb speed of a take-off (m/s; ``start_land_speed``)."""
TAKEOFF_HEIGHT_M = 1.0
"""How far a take-off from the ground climbs (m; ``takeoff_height``)."""
TAKEOFF_THRESHOLD_M = 0.5
"""Below this height a ``start`` takes off; above it the pilot hovers where it is (m)."""
TIME_TOLERANCE = 1e-6
"""Two reference times closer than this (s) count as equal (float64 times through ROS)."""
QUEUE_MODES = ("stock", "replace")
TIME_MODES = ("receipt", "message")
"""How a pilot times a received trajectory: re-timed to its arrival (agiros) or as stamped."""
REFERENCE_FIELDS = ("t", "p", "v", "a", "j", "w")
DRY_TIMES_KEPT = 20


class PilotState(str, enum.Enum):
    OFF = "off"
    ENABLED = "enabled"
    HOVER = "hover"
    TRACKING = "tracking"
    LANDING = "landing"


FLYING = (PilotState.HOVER, PilotState.TRACKING, PilotState.LANDING)


def reference_problem(ref: dict) -> str | None:
    """Why a reference (arrays t (k,), p, v, a, j, w (k, 3)) is malformed, or None."""
    t = np.asarray(ref.get("t", ()), dtype=float)
    if t.ndim != 1 or t.size < 2:
        return f"expected at least 2 points, got {t.size}"
    for name in REFERENCE_FIELDS[1:]:
        value = np.asarray(ref.get(name, ()), dtype=float)
        if value.shape != (t.size, 3):
            return f"{name}: expected shape ({t.size}, 3), got {value.shape}"
        if not np.isfinite(value).all():
            return f"{name}: non-finite value"
    if not np.isfinite(t).all() or np.any(np.diff(t) <= 0.0):
        return "point times must be finite and increasing"
    return None


@dataclass
class ReferenceQueue:
    """The pilot's queue of references (each a dict of node arrays, times in seconds)."""

    mode: str = "stock"
    times: str = "message"
    tolerance_s: float = TIME_TOLERANCE
    """A reference starting this little before the queue's end still counts as after it (s)."""
    references: list[dict] = field(default_factory=list)
    accepted: int = 0
    rejected: int = 0

    def __post_init__(self):
        if self.mode not in QUEUE_MODES:
            raise ValueError(f"pilot queue mode: expected one of {QUEUE_MODES}, got {self.mode!r}")
        if self.times not in TIME_MODES:
            raise ValueError(f"pilot trajectory times: expected one of {TIME_MODES}, got {self.times!r}")

    def offer(self, ref: dict, now: float) -> bool:
        """Queue ``ref``, arriving at ``now``, if the rule allows (re-timed to ``now`` first when
        ``times`` is ``receipt``); whether it was accepted."""
        self.drop_expired(now)
        if reference_problem(ref) is not None:
            self.rejected += 1
            return False
        if self.times == "receipt":
            ref = retimed(ref, now)
        if self.mode == "replace":
            self.references = [ref]
        elif self.references and ref["t"][0] < self.references[-1]["t"][-1] - self.tolerance_s:
            self.rejected += 1
            return False
        else:
            self.references.append(ref)
        self.accepted += 1
        return True

    def drop_expired(self, now: float) -> None:
        while self.references and self.references[0]["t"][-1] < now:
            self.references.pop(0)

    def clear(self) -> None:
        self.references = []

    def __len__(self) -> int:
        return len(self.references)

    @property
    def end(self) -> float | None:
        return float(self.references[-1]["t"][-1]) if self.references else None

    @property
    def start(self) -> float | None:
        return float(self.references[0]["t"][0]) if self.references else None

    def final_position(self) -> np.ndarray | None:
        return self.references[-1]["p"][-1].copy() if self.references else None

    def sample(self, now: float) -> UavTrajectory | None:
        """The queue from ``now`` on the horizon's nodes (what the onboard controller gets,
        sampled by ``sample_nodes``); beyond the last point the final position at rest; None
        when the queue is empty."""
        self.drop_expired(now)
        if not self.references:
            return None
        if len(self.references) == 1:
            nodes = self.references[0]
        else:
            nodes = {k: np.concatenate([r[k] for r in self.references]) for k in REFERENCE_FIELDS}
        times = node_times(now)
        out = sample_nodes(nodes, times)
        return UavTrajectory(times, out["p"], out["v"], out["a"], out["j"], out["w"])


def retimed(ref: dict, arrival: float) -> dict:
    """``ref`` with its times shifted so that its first point is at ``arrival`` (what the agiros
    pilot does to every trajectory it receives)."""
    t = np.asarray(ref["t"], dtype=float)
    return {**ref, "t": t + (arrival - t[0])}


def sample_nodes(nodes: dict, times: np.ndarray) -> dict[str, np.ndarray]:
    """Reference points (arrays t, p, v, a, j, w; times increasing) at ``times``, interpolated
    as the onboard controller interpolates a plan: cubic Hermite of p with slopes v, of v with
    slopes a and of a with slopes j, linear for j and w. Before the first point its values;
    after the last (by more than ``TIME_TOLERANCE``) its position, at rest. Resampling a plan
    this way keeps it the plan the controller would fly (straight chords between points would
    cut its corners)."""
    t = np.asarray(nodes["t"], dtype=float)
    times = np.asarray(times, dtype=float)
    k = np.clip(np.searchsorted(t, times, side="right") - 1, 0, len(t) - 2)
    dt = (t[k + 1] - t[k])[:, None]
    s = np.clip((times - t[k]) / dt[:, 0], 0.0, 1.0)[:, None]
    s2, s3 = s * s, s * s * s
    h00, h10, h01, h11 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, 3 * s2 - 2 * s3, s3 - s2

    def hermite(value, slope):
        return h00 * value[k] + h10 * dt * slope[k] + h01 * value[k + 1] + h11 * dt * slope[k + 1]

    def linear(value):
        return (1.0 - s) * value[k] + s * value[k + 1]

    p, v, a, j, w = (np.asarray(nodes[name], dtype=float) for name in REFERENCE_FIELDS[1:])
    out = {"p": hermite(p, v), "v": hermite(v, a), "a": hermite(a, j), "j": linear(j), "w": linear(w)}
    after = times > t[-1] + TIME_TOLERANCE  # float noise of a piece's end is not past it
    for name in ("v", "a", "j", "w"):
        out[name][after] = 0.0
    return out


def hold(t: float, position) -> UavTrajectory:
    """Hold ``position`` at rest on the horizon from ``t``."""
    times = node_times(t)
    zeros = np.zeros((times.size, 3))
    return UavTrajectory(
        times, np.repeat(np.asarray(position, float)[None], times.size, 0), zeros, zeros, zeros, zeros
    )


def climb(t0: float, start, height: float, step_s: float = 0.02) -> dict:
    """A take-off: ``height`` m straight up from ``start`` from ``t0``, rest to rest at
    ``LAND_SPEED`` on average, as reference points (the septic smoothstep: minimum snap)."""
    duration = max(height / LAND_SPEED, 2 * step_s)
    t = np.linspace(0.0, duration, max(3, int(np.ceil(duration / step_s)) + 1))
    s = t / duration
    shape = (
        35 * s**4 - 84 * s**5 + 70 * s**6 - 20 * s**7,
        (140 * s**3 - 420 * s**4 + 420 * s**5 - 140 * s**6),
    )
    d3 = 420 * s**2 - 1680 * s**3 + 2100 * s**4 - 840 * s**5
    d4 = 840 * s - 5040 * s**2 + 8400 * s**3 - 4200 * s**4
    points = {name: np.zeros((t.size, 3)) for name in REFERENCE_FIELDS[1:]}
    points["p"][:] = np.asarray(start, float)
    points["p"][:, 2] += height * shape[0]
    points["v"][:, 2] = height * shape[1] / duration
    points["a"][:, 2] = height * d3 / duration**2
    points["j"][:, 2] = height * d4 / duration**3
    return {"t": t0 + t, **points}


def descent(t: float, start_time: float, start, drop: float) -> UavTrajectory:
    """Straight down from ``start`` at ``LAND_SPEED`` (from ``start_time``), ``drop`` m at most."""
    times = node_times(t)
    fallen = np.clip(LAND_SPEED * (times - start_time), 0.0, drop)
    p = np.repeat(np.asarray(start, float)[None], times.size, 0)
    p[:, 2] -= fallen
    v = np.zeros_like(p)
    v[:, 2] = np.where(fallen < drop, -LAND_SPEED, 0.0)
    zeros = np.zeros_like(p)
    return UavTrajectory(times, p, v, zeros, zeros, zeros)


class Pilot:
    """One quadrotor's pilot: state machine, queue, and the plan it gives the controller."""

    def __init__(
        self,
        name: str,
        queue: str = "stock",
        land_drop_m: float = 1.0,
        takeoff_height_m: float = TAKEOFF_HEIGHT_M,
        times: str = "message",
    ):
        self.name = name
        self.queue = ReferenceQueue(queue, times)
        self.land_drop_m = land_drop_m
        self.takeoff_height_m = takeoff_height_m
        self.ground_z = 0.0
        """Height of the floor (m): a take-off starts below ``TAKEOFF_THRESHOLD_M`` above it."""
        self.state = PilotState.OFF
        self.hover_position = np.zeros(3)
        self._land_start: tuple[float, np.ndarray] | None = None
        self._final = self.hover_position
        self.landed = False
        self.ran_dry = 0
        """Times the queue ran out while tracking (the pilot then hovers at its end)."""
        self.dry_at: list[float] = []
        """When it did (s; the first ``DRY_TIMES_KEPT``)."""

    @property
    def armed(self) -> bool:
        return self.state is not PilotState.OFF

    @property
    def flying(self) -> bool:
        return self.state in FLYING

    def enable(self, on: bool) -> None:
        if not on:
            self.off()
        elif self.state is PilotState.OFF:
            self.state = PilotState.ENABLED

    def start(self, position, t: float = 0.0) -> bool:
        """Take off at time ``t`` (s): climb from the ground, or hover in place when already
        above ``TAKEOFF_THRESHOLD_M``; only when armed and not flying."""
        if self.state is not PilotState.ENABLED:
            return False
        position = np.asarray(position, float).copy()
        self.hover_position = position
        self.state = PilotState.HOVER
        self.landed = False
        if position[2] - self.ground_z < TAKEOFF_THRESHOLD_M:
            up = climb(t, position, self.takeoff_height_m)
            self.queue.clear()
            self.queue.references.append(up)
            self.hover_position = up["p"][-1].copy()
        return True

    def force_hover(self, position) -> None:
        if self.flying:
            self.queue.clear()
            self.hover_position = np.asarray(position, float).copy()
            self.state = PilotState.HOVER

    def land(self, t: float, position) -> bool:
        """Land from hover; from tracking, force a hover instead and refuse (False)."""
        if self.state is PilotState.TRACKING:
            self.force_hover(position)
            return False
        if self.state is not PilotState.HOVER:
            return False
        self.queue.clear()
        self._land_start = (t, np.asarray(position, float).copy())
        self.state = PilotState.LANDING
        return True

    def off(self) -> None:
        self.queue.clear()
        self.state = PilotState.OFF

    def offer(self, ref: dict, now: float) -> bool:
        """A reference from the trajectory topic; only an armed pilot queues it."""
        if not self.armed:
            self.queue.rejected += 1
            return False
        return self.queue.offer(ref, now)

    def plan(self, t: float, position) -> UavTrajectory | None:
        """The controller's plan at time ``t`` (None: motors off)."""
        if self.state is PilotState.LANDING:
            assert self._land_start is not None  # set by land(), the one way into LANDING
            start_time, start = self._land_start
            drop = min(self.land_drop_m, max(start[2] - self.ground_z, 0.0))
            if LAND_SPEED * (t - start_time) >= drop:
                self.off()
                self.landed = True
                return None
            return descent(t, start_time, start, drop)
        if self.state in (PilotState.HOVER, PilotState.TRACKING):
            self.queue.drop_expired(t)
            if self.queue.start is not None and self.queue.start <= t + TIME_TOLERANCE:
                self.state = PilotState.TRACKING
                final = self.queue.final_position()
                assert final is not None  # the queue holds a reference (its start is not None)
                self._final = final
                return self.queue.sample(t)
            if self.state is PilotState.TRACKING:  # the queue ran out: hold its end
                self.hover_position = self._final
                self.state = PilotState.HOVER
                self.ran_dry += 1
                if len(self.dry_at) < DRY_TIMES_KEPT:
                    self.dry_at.append(float(t))
            return hold(t, self.hover_position)
        return None
