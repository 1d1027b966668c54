"""The Gazebo RotorS backend: the Backend protocol over a ROS1 world (a real Gazebo with RotorS
quadrotors flying the Agilicious pilot, or ``cableload world``).

- ``reset`` pauses the physics, places the system with ``/gazebo/set_model_state`` (model
  ``multilift``: the load's pose, the system at rest around it), unpauses, arms and starts every
  pilot and waits until the quadrotors are still; the episode's time zero is the world's clock
  then.
- ``observe`` builds the privileged ``WorldState`` from the pilots' states and the load's
  odometry at the newest load stamp that every quadrotor's state has reached (quadrotor states
  interpolated to it, never held past their newest: a state a period old at the load's newest
  stamp puts the cable directions a degree off, and the teacher's plan from it kicks the
  load's swing). Cable tensions come from ``/cableload/cable_tension`` where the world
  publishes it, else from the hover statics; cable directions from the attachment points.
- ``send`` hands the plan to that quadrotor's ``AgirosClient`` at once (stock or replacing pilot
  queue), so the time spent planning counts as it would in reality.
- ``advance`` waits until the world's clock reaches the end of the planner period, then (for at
  most ``STATE_WAIT_S`` of wall time) until the system's state at that time has arrived, so
  plans are made at the period's end as on the embedded backend, and returns the samples
  recorded meanwhile (at the load's stamps). A clock that stops for ``timeout_s``
  of wall time, or a master that stops answering, ends it: ``health()`` is then not ok and the
  runner ends the episode with ``backend_failed`` and the reason.
- ``reset`` leaves the world paused once the system has settled in hover; the first ``advance``
  unpauses it. The first plans (the backend's own, or those of planner nodes) are made while
  nothing moves, as on the embedded backend, and the episode starts where its clock stood.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import os
import socket
import threading
import time
from typing import cast
from urllib.parse import urlparse

import numpy as np

from backends import ros1
from backends.agiros import AgirosClient, PilotWatch
from backends.base import BackendHealth, EpisodeAborted, Scenario
from cableload_sim.errors import UsageError
from cableload_sim.io.runlog import default_quad_names
from cableload_sim.params import Config
from cableload_sim.physics.statics import hover_geometry
from cableload_sim.physics.world import UavTrajectory, WorldSamples, WorldState
from cableload_sim.rotations import quat_to_matrix

HISTORY_S = 3.0
"""How much of each stream is kept for interpolation (ROS time, s)."""
SETUP_TIMEOUT_S = 10.0
"""How long (wall s) the clock may stand still while the pilots take off (a world may be
compiling or loading); during the episode ``timeout_s`` applies."""
MASTER_CHECK_S = 0.1
"""How often (wall s) the backend checks that the master still answers."""
STATE_WAIT_S = 0.02
"""How long (wall s) ``advance`` waits, once the clock has reached the period's end, for the
states of that instant (published with the clock, they arrive within milliseconds)."""
LOCKSTEP_STATE_WAIT_S = 1.0
"""The same wait against a world in lockstep: its clock stands until the plans of that instant
have come, so waiting costs nothing, and on a loaded machine the states can take longer than
``STATE_WAIT_S`` to arrive (a plan made from the states of the slice before is a different
flight)."""


def master_uri() -> str:
    return os.environ.get("ROS_MASTER_URI", "http://localhost:11311")


def master_reachable(uri: str | None = None, timeout: float = 0.2) -> bool:
    """Whether something accepts connections at the master's address (cheap, never hangs)."""
    parsed = urlparse(uri or master_uri())
    try:
        with socket.create_connection(
            (parsed.hostname or "localhost", parsed.port or 11311), timeout=timeout
        ):
            return True
    except OSError:
        return False


def init_node(name: str) -> None:
    """Start this process's ROS node once (anonymous); refuse clearly without a master."""
    rospy = ros1.rospy()
    if not master_reachable(timeout=1.0):
        raise ros1.RosFailure(
            f"no ROS master at {master_uri()} (ROS_MASTER_URI); start one "
            "with `roscore` or `rosmaster --core`"
        )
    if not rospy.core.is_initialized():
        rospy.init_node(name, anonymous=True, disable_signals=True)


def wait_until_known(latest, ros_time: float, wait_s: float = STATE_WAIT_S) -> None:
    """Wait (``wait_s`` of wall time at most) until ``latest()``, the newest instant some
    states are known at (None: none yet), reaches ``ros_time``: the states of one instant
    arrive over several connections, a little after the clock that announces it."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        known = latest()
        if known is not None and known >= ros_time - 1e-9:
            return
        time.sleep(0.0005)


FUTURE_S = 0.25
"""A message stamped further than this ahead of the world's newest clock (ROS s) is dropped:
it cannot come from the world (a state is published a slice before the clock that announces
its instant, and may be handled a little after it)."""


class _Stream:
    """Recent messages of one source, thread-safe: rows (t, position, attitude quaternion
    w-x-y-z, further arrays...) in stamp order.

    With ``clock`` (a callable giving the world's newest ROS time, None before the first), a
    stamp is checked against it: one from the future (beyond ``FUTURE_S``), from before the
    kept history, one already held, or one not finite is dropped and counted (``dropped``), never
    interpolated; a row stamped ahead of the clock is kept but not seen until the clock has
    reached it. A single message stamped 100 s ahead once made every later state look
    out of date."""

    def __init__(self, clock=None, future_s: float = FUTURE_S):
        self._lock = threading.Lock()
        self._times: list[float] = []
        self._rows: list[tuple] = []
        self._clock = clock
        self.future_s = future_s
        self.dropped = {"future": 0, "past": 0, "repeated": 0, "non_finite": 0}

    def add(self, t: float, *values) -> bool:
        """Keep one message's row; False when its stamp was dropped."""
        now = self._clock() if self._clock is not None else None
        if not math.isfinite(t):
            reason = "non_finite"
        elif now is not None and t > now + self.future_s:
            reason = "future"
        elif now is not None and t < now - HISTORY_S:
            reason = "past"
        else:
            reason = None
        with self._lock:
            if reason is None:
                k = bisect.bisect_left(self._times, t)
                if k < len(self._times) and self._times[k] == t:
                    reason = "repeated"
                else:
                    self._times.insert(k, t)
                    self._rows.insert(k, (t, *values))
                    cut = bisect.bisect_left(self._times, self._times[-1] - HISTORY_S)
                    if cut:
                        del self._times[:cut]
                        del self._rows[:cut]
                    return True
            self.dropped[reason] += 1
        return False

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    def _visible(self) -> int:
        """How many rows (from the oldest) the clock has reached; call with the lock held."""
        now = self._clock() if self._clock is not None else None
        if now is None:
            return len(self._rows)
        return bisect.bisect_right(self._times, now + 1e-9)

    def latest(self):
        with self._lock:
            k = self._visible()
            return self._rows[k - 1] if k else None

    def latest_until(self, t: float):
        """The newest row stamped at or before ``t`` (None without one)."""
        with self._lock:
            k = min(self._visible(), bisect.bisect_right(self._times, t))
            return self._rows[k - 1] if k else None

    def between(self, t_from: float, t_to: float) -> list:
        with self._lock:
            k = self._visible()
            return [row for row in self._rows[:k] if t_from < row[0] <= t_to]

    def at(self, times: np.ndarray) -> list[np.ndarray] | None:
        """Every value interpolated linearly at ``times`` (held beyond the ends); the attitude
        renormalized."""
        with self._lock:
            rows = self._rows[: self._visible()]
        if not rows:
            return None
        t = np.array([r[0] for r in rows])
        out = []
        for k in range(1, len(rows[0])):
            values = np.array([r[k] for r in rows])
            column = np.stack([np.interp(times, t, values[:, c]) for c in range(values.shape[1])], axis=-1)
            if k == 2:  # the attitude
                column /= np.linalg.norm(column, axis=-1, keepdims=True)
            out.append(column)
        return out


def newest_common_stamp(
    load: _Stream, required: list[_Stream], optional: tuple[_Stream, ...] = ()
) -> float | None:
    """The newest stamp of ``load`` that every ``required`` stream, and every ``optional`` one
    that has any row, has reached (None when there is none). Messages of one instant arrive
    over separate connections: the load's newest stamp may be a state period ahead of a
    quadrotor's, whose state would then be a period old there."""
    newest = [s.latest() for s in required]
    if any(row is None for row in newest):
        return None
    newest += [row for row in (s.latest() for s in optional) if row is not None]
    row = load.latest_until(min(r[0] for r in newest) + 1e-9)
    return None if row is None else row[0]


JUMP_M = 0.05
"""Position step (m) beyond what the load's velocity explains, between two of its samples,
that only a reset or a hand-placed model makes (plus ``JUMP_ACCEL`` dt^2)."""
JUMP_SPEED = 0.5
"""Speed step (m/s) between two samples of the load beyond ``JUMP_ACCEL`` dt, likewise."""
JUMP_ACCEL = 30.0
"""Acceleration (m/s^2, 3 g) the load never reaches in flight."""


def load_jump(previous: tuple, row: tuple) -> str | None:
    """Why two consecutive load rows (t, p, q, v, ...) cannot both be flight (None when they
    can): a world reset or a model moved by hand teleports the load."""
    dt = row[0] - previous[0]
    if dt <= 0.0:
        return None
    p0, v0, p1, v1 = previous[1], previous[3], row[1], row[3]
    off = float(np.linalg.norm(p1 - p0 - 0.5 * (v0 + v1) * dt))
    speed_step = float(np.linalg.norm(v1 - v0))
    if off <= JUMP_M + JUMP_ACCEL * dt * dt and speed_step <= JUMP_SPEED + JUMP_ACCEL * dt:
        return None
    return (
        f"the load jumped {np.linalg.norm(p1 - p0):.2f} m (speed {np.linalg.norm(v0):.2f} "
        f"-> {np.linalg.norm(v1):.2f} m/s) in {1e3 * dt:.0f} ms at ROS time {row[0]:.2f} s"
    )


class WorldObserver:
    """The privileged view of a ROS world: every quadrotor's state, the load's odometry and
    the cable tensions, as ``WorldState`` and ``WorldSamples`` (ROS times minus ``t0``).
    ``clock``: the world's newest ROS time (stamps are checked against it, ``_Stream``).
    ``jump`` says when the load was teleported (``load_jump``)."""

    def __init__(self, config: Config, quad_names: list[str], clients: list[AgirosClient], clock=None):
        rospy = ros1.rospy()
        m = ros1.messages()
        self.system = config.system
        self.names = quad_names
        self.n = len(quad_names)
        self.rho = config.system.attachment_array()
        self.attach = np.array([q.attachment for q in config.system.quadrotors])
        self.hover_tensions = hover_geometry(config.system).tensions
        self.quads = [_Stream(clock) for _ in quad_names]
        self.load = _Stream(clock)
        self.tension = _Stream(clock)
        self.jump: str | None = None
        self._last_load: tuple | None = None
        for i, client in enumerate(clients):
            client.on_state = self._quad_callback(i)
        self._subscribers = [
            rospy.Subscriber(ros1.LOAD_ODOMETRY_TOPIC, m.Odometry, self._on_load, queue_size=50),
            rospy.Subscriber(ros1.TENSION_TOPIC, m.CableTension, self._on_tension, queue_size=50),
        ]
        self.t0 = 0.0

    def _quad_callback(self, i: int):
        def on_state(msg):
            t, p, q, v, w, motors = ros1.from_quad_state(msg)
            self.quads[i].add(t, p, q, v, w, motors)

        return on_state

    def _on_load(self, msg) -> None:
        row = ros1.from_odometry(msg)
        if not self.load.add(*row):
            return
        last, self._last_load = self._last_load, row
        if last is not None and self.jump is None:
            self.jump = load_jump(last, row)

    @property
    def stamps_dropped(self) -> int:
        """Messages dropped for their stamps (``_Stream``), every stream together."""
        return sum(s.dropped_total for s in (*self.quads, self.load, self.tension))

    def _on_tension(self, msg) -> None:
        if len(msg.tension) == self.n:
            self.tension.add(msg.header.stamp.to_sec(), np.asarray(msg.tension, dtype=float))

    def ready(self) -> bool:
        """Whether the whole system is known at some instant (``latest_time``)."""
        return self.latest_time() is not None

    def latest_time(self) -> float | None:
        """The newest instant the whole system is known at (``newest_common_stamp``)."""
        return newest_common_stamp(self.load, self.quads, (self.tension,))

    def samples(self, t_from: float, t_to: float) -> WorldSamples:
        """Samples at the load's stamps in (t_from, t_to] (ROS times)."""
        rows = self.load.between(t_from, t_to)
        if not rows:
            return WorldSamples.empty(self.n)
        times = np.array([r[0] for r in rows])
        series = [s.at(times) for s in self.quads]
        if any(q is None for q in series):
            return WorldSamples.empty(self.n)
        quads = cast("list[list[np.ndarray]]", series)  # none is None (checked above)
        tension_series = self.tension.at(times)
        tension = (
            tension_series[0] if tension_series is not None else np.tile(self.hover_tensions, (len(times), 1))
        )
        return WorldSamples(
            t=times - self.t0,
            load_p=np.array([r[1] for r in rows]),
            load_q=np.array([r[2] for r in rows]),
            load_v=np.array([r[3] for r in rows]),
            load_omega=np.array([r[4] for r in rows]),
            uav_p=np.stack([q[0] for q in quads], axis=1),
            uav_q=np.stack([q[1] for q in quads], axis=1),
            uav_v=np.stack([q[2] for q in quads], axis=1),
            uav_omega=np.stack([q[3] for q in quads], axis=1),
            rotor_speeds=np.stack([q[4] for q in quads], axis=1),
            cable_tension=tension,
        )

    def state(self) -> WorldState:
        """The system at ``latest_time()``."""
        t = self.latest_time()
        if t is None:
            raise ros1.RosFailure(
                "no load odometry and quadrotor states of one instant received from the world yet"
            )
        s = self.samples(t - 1e-9, t)
        if len(s) == 0:
            raise ros1.RosFailure("no quadrotor state received from the world yet")
        load_end = s.load_p[0] + self.rho @ quat_to_matrix(s.load_q[0]).T
        uav_end = np.array(
            [s.uav_p[0, i] + quat_to_matrix(s.uav_q[0, i]) @ self.attach[i] for i in range(self.n)]
        )
        span = uav_end - load_end
        direction = span / np.linalg.norm(span, axis=1, keepdims=True)
        return WorldState(
            t=float(s.t[0]),
            load_p=s.load_p[0],
            load_q=s.load_q[0],
            load_v=s.load_v[0],
            load_omega=s.load_omega[0],
            uav_p=s.uav_p[0],
            uav_q=s.uav_q[0],
            uav_v=s.uav_v[0],
            uav_omega=s.uav_omega[0],
            rotor_speeds=s.rotor_speeds[0],
            cable_tension=s.cable_tension[0],
            cable_dir=direction,
        )

    def close(self) -> None:
        for sub in self._subscribers:
            sub.unregister()


WORLD_SECTIONS = (
    "system",
    "controller",
    "mismatch",
    "link",
    "imu",
    "aero",
    "wind",
    "ball",
    "battery",
    "ground",
)
"""Configuration sections the world simulates: an episode must use the world's."""
WORLD_CHECK_S = 0.5
"""How often (wall s) the backend asks the master whether the world is still the one it
started the episode with."""
LOCKSTEP_STALL_S = 6.0
"""How long (wall s) the clock of a world in lockstep may stand: it waits up to
``world_node.LOCKSTEP_WAIT_S`` for a quadrotor's reference."""
UAV_OFF_GRACE_S = 0.1
"""A pilot seen disarmed is reported ``uav_off`` once this much world time (s) has shown no
reset (a world reset disarms every pilot and teleports the system at once)."""


class GazeboBackend:
    """Backend over a ROS1 world; one ``advance`` is one planner period of the world's clock.

    It fails loudly: ``health()`` names what went wrong (``EpisodeStatus`` values) when the
    master stops answering or the world stops (``backend_failed``), the clock stands still with
    the world alive (``clock_stalled``) or goes back, the load is teleported or every pilot is
    disarmed at once (``world_reset``), another world takes over (``world_replaced``), a pilot
    is switched off by someone else (``uav_off``), or a pilot refuses every reference it is
    sent for ``agiros.REJECTED_FOR_S`` (``plans_rejected``). Every reference on a pilot's
    trajectory topic is watched (``PilotWatch``), whoever sent it, so ``rejected_plans`` counts
    them in every mode. ``reset`` refuses a world that simulates another system or
    configuration (``system_mismatch``, from what ``cableload world`` says of itself), and the
    constructor refuses options the backend cannot honour (``sensing``)."""

    name = "gazebo"
    deterministic = False
    """Wall-clock scheduling between processes decides when plans arrive."""

    def __init__(
        self,
        config: Config,
        *,
        quad_names: list[str] | None = None,
        pilot_queue: str = "stock",
        pilot_times: str = "message",
        timeout_s: float = 0.4,
        connect_timeout_s: float = 20.0,
        node_name: str = "cableload_backend",
    ):
        if config.sensing.enabled:
            raise UsageError(
                "sensing.enabled=true: the gazebo backend gives planners the world's published "
                "states and models no motion capture; fly sensing on the embedded backend "
                "(the world's onboard estimate is [imu], set in the world's and the episode's "
                "configuration alike)"
            )
        self.config = config
        self.system = config.system
        self.planner_period_s = 1.0 / config.simulation.planner_rate_hz
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.names = quad_names or default_quad_names(self.system.n_uavs)
        if len(self.names) != self.system.n_uavs:
            raise UsageError(f"quad_names: expected {self.system.n_uavs} names, got {self.names}")
        init_node(node_name)
        rospy = ros1.rospy()
        m = ros1.messages()
        self.pilot_queue = pilot_queue
        self.pilot_times = pilot_times
        self._clock_cond = threading.Condition()
        self.clock: float | None = None
        self.clients = [
            AgirosClient(
                name, pilot_queue, self.planner_period_s, times=pilot_times, clock=lambda: self.clock
            )
            for name in self.names
        ]
        self._clock_wall = time.monotonic()
        self._clock_source: str | None = None
        self._clock_back: tuple[float, float] | None = None
        self._master_checked = self._world_checked = time.monotonic()
        self.observer = WorldObserver(config, self.names, self.clients, clock=self._now)
        self.watches = [PilotWatch(pilot_queue, times=pilot_times) for _ in self.names]
        self._subscribers = []
        self.me = rospy.get_caller_id()
        self.planner_nodes = False
        """Whether the episode's planners are nodes of their own (``NodePlanners``)."""
        self.overrides: list[tuple[float, str, str, str]] = []
        """(ROS time, quadrotor, command, sender) of pilot commands from other nodes."""
        for i, (client, name) in enumerate(zip(self.clients, self.names)):
            client.on_telemetry = self._telemetry_callback(i)
            self._subscribers.append(
                rospy.Subscriber(
                    ros1.TRAJECTORY_TOPIC.format(quad=name),
                    m.Reference,
                    self._reference_callback(i),
                    queue_size=50,
                )
            )
            for command, topic, cls in (
                ("off", ros1.OFF_TOPIC, m.Empty),
                ("land", ros1.LAND_TOPIC, m.Empty),
                ("force_hover", ros1.FORCE_HOVER_TOPIC, m.Empty),
                ("enable", ros1.ENABLE_TOPIC, m.Bool),
            ):
                self._subscribers.append(
                    rospy.Subscriber(
                        topic.format(quad=name), cls, self._command_callback(name, command), queue_size=10
                    )
                )
        self._clock_sub = rospy.Subscriber("/clock", m.Clock, self._on_clock, queue_size=10)
        self._received: list[int] | None = None  # ros1.REFERENCES_RECEIVED_TOPIC, from cableload world
        self._received_at_reset: list[int] | None = None
        self._subscribers.append(
            rospy.Subscriber(ros1.REFERENCES_RECEIVED_TOPIC, m.String, self._on_received, queue_size=10)
        )
        self.pub_horizon = rospy.Publisher(ros1.LOAD_HORIZON_TOPIC, m.Reference, queue_size=2)
        self._failure: str | None = None
        self._failure_status = "backend_failed"
        self.world: dict | None = None
        """What ``cableload world`` says of itself (``ros1.world_info``; None for Gazebo)."""
        self._unpause = None  # set while the world is paused for the first plans
        self._period_end = 0.0
        self._last_sample = 0.0
        self.t0 = 0.0

    # -- clock -----------------------------------------------------------------------------

    def _now(self) -> float | None:
        return self.clock

    def _on_clock(self, msg) -> None:
        t = msg.clock.to_sec()
        with self._clock_cond:
            if self.clock is not None and t < self.clock - 1e-9 and self._clock_back is None:
                self._clock_back = (self.clock, t)
            if self.clock is None or t > self.clock:  # a clock that stands is not alive
                self._clock_wall = time.monotonic()
            self.clock = t
            source = ros1.caller_of(msg)
            if self._clock_source is None:
                self._clock_source = source
            elif source is not None and source != self._clock_source and self._failure is None:
                self._fail(
                    "world_replaced",
                    f"/clock now comes from {source}, no longer from "
                    f"{self._clock_source}: another world took over the ROS graph",
                )
            self._clock_cond.notify_all()

    def _on_received(self, msg) -> None:
        try:
            counts = json.loads(msg.data)
        except ValueError:
            return
        if isinstance(counts, list) and len(counts) == len(self.names):
            with self._clock_cond:
                self._received = [int(c) for c in counts]
                self._clock_cond.notify_all()

    def _lockstep(self) -> bool:
        return bool(self.world and self.world.get("lockstep"))

    def _await_first_plans_received(self) -> None:
        """Against a world in lockstep, before it is unpaused for the episode: wait (at most
        ``LOCKSTEP_STATE_WAIT_S``) until it has received a reference for every quadrotor. The
        plans and the unpause travel over different connections; unpaused first, a world in
        lockstep steps on without waiting for plans it does not know are coming, and the
        whole flight runs a few slices late (seen on a loaded machine)."""
        before = self._received_at_reset
        if before is None:
            return
        with self._clock_cond:
            self._clock_cond.wait_for(
                lambda: self._received is not None and all(a > b for a, b in zip(self._received, before)),
                LOCKSTEP_STATE_WAIT_S,
            )

    def _fail(self, status: str, message: str) -> None:
        if self._failure is None:
            self._failure, self._failure_status = message, status

    def _stall_limit(self, timeout_s: float) -> float:
        lockstep = self._lockstep()
        return max(timeout_s, LOCKSTEP_STALL_S) if lockstep else timeout_s

    def _wait_clock(self, ros_time: float, what: str, timeout_s: float | None = None) -> bool:
        """Wait until the clock reaches ``ros_time``; False (and the failure noted) when the
        clock stands for ``timeout_s`` (default ``self.timeout_s``), the master disappears, or
        the world is replaced."""
        limit = self._stall_limit(self.timeout_s if timeout_s is None else timeout_s)
        with self._clock_cond:
            while True:
                if self._failure is not None:
                    return False
                now = time.monotonic()
                if now - self._master_checked > MASTER_CHECK_S:
                    # connections between nodes outlive the master: ask it directly
                    self._master_checked = now
                    if not master_reachable(timeout=0.1):
                        self._fail("backend_failed", f"ROS master at {master_uri()} stopped answering")
                        return False
                if now - self._world_checked > WORLD_CHECK_S:
                    self._world_checked = now
                    self._check_world_instance()
                    if self._failure is not None:
                        return False
                if self._clock_back is not None:
                    self._clock_went_back()
                    return False
                if self.clock is not None and self.clock >= ros_time:
                    return True
                if now - self._clock_wall > limit:
                    self._clock_stopped(now - self._clock_wall, what)
                    return False
                self._clock_cond.wait(timeout=0.02)

    def _clock_stopped(self, silent_s: float, what: str) -> None:
        source = self._clock_source or ros1.WORLD_NODE
        if self.clock is not None and ros1.node_answers(source):
            self._fail(
                "clock_stalled",
                f"the world's clock has stood at {self.clock:.3f} s for {silent_s:.2f} s "
                f"of wall time while {what}, its node {source} alive (paused?)",
            )
        else:
            self._fail(
                "backend_failed",
                f"no /clock from the world for {silent_s:.2f} s while {what} (its node "
                f"{source} does not answer: the world stopped or is unreachable)",
            )

    def _clock_went_back(self) -> None:
        assert self._clock_back is not None  # called when the clock went back
        before, after = self._clock_back
        self._check_world_instance()
        self._fail(
            "world_reset",
            f"the world's clock went back from {before:.3f} s to "
            f"{after:.3f} s (the simulation was reset or restarted)",
        )

    def _check_world_instance(self) -> None:
        """``world_replaced`` when ``cableload world`` says it is another instance than the one
        this episode started with."""
        if self.world is None:
            return
        info = ros1.world_info()
        if info is not None and info.get("instance") != self.world.get("instance"):
            self._fail(
                "world_replaced",
                f"another `cableload world` (pid {info.get('pid')}) replaced the one this "
                f"episode started with (pid {self.world.get('pid')})",
            )

    def _wait_first_clock(self) -> None:
        """Wait (up to ``SETUP_TIMEOUT_S``, the master checked meanwhile) for the world's first
        /clock: the pilots' topics may connect before it does, and a master lost during the
        set-up leaves it unconnected (a ``RosFailure`` saying so, not a clock of None)."""
        with self._clock_cond:
            if self.clock is not None:
                return
            self._clock_wall = time.monotonic()  # the wait for the first one starts now
        if not self._wait_clock(-math.inf, "the world's first /clock", SETUP_TIMEOUT_S):
            raise ros1.RosFailure(self._failure)

    @property
    def time(self) -> float:
        return (self.clock or 0.0) - self.t0

    # -- watching the pilots ---------------------------------------------------------------

    def _reference_callback(self, i: int):
        def on_reference(msg):
            now = self.clock
            if now is not None:
                self.watches[i].reference(ros1.trajectory_arrays(msg), now, ros1.caller_of(msg))

        return on_reference

    def _command_callback(self, name: str, command: str):
        def on_command(msg):
            sender = ros1.caller_of(msg)
            if sender == self.me or (command == "enable" and msg.data):
                return  # ours, or arming an armed pilot
            said = "enable false" if command == "enable" else command
            self.overrides.append((self.clock or 0.0, name, said, sender))

        return on_command

    def trust(self, senders_by_uav: list[set[str]]) -> None:
        """The nodes whose references each pilot flies in this episode (the backend itself
        always); a reference another node makes a pilot fly ends it (``pilot_override``)."""
        for watch, senders in zip(self.watches, senders_by_uav):
            watch.trusted = {self.me, *senders}

    def _telemetry_callback(self, i: int):
        def on_telemetry(msg):
            self.watches[i].telemetry(
                msg.header.stamp.to_sec(),
                msg.bridge_armed.data,
                msg.num_references_in_queue,
                msg.reference_left_duration,
            )

        return on_telemetry

    def _pilot_problem(self) -> tuple[str, str] | None:
        """(status, message) for pilots switched off, commanded or fed by another node, or
        refusing every reference."""
        for t, name, command, sender in self.overrides:
            if t >= self.t0:
                status = "uav_off" if command in ("off", "enable false") else "pilot_override"
                return status, (
                    f"{name}'s pilot was sent `{command}` by {sender} at ROS time "
                    f"{t:.2f} s, outside the episode"
                )
        for name, watch in zip(self.names, self.watches):
            why = watch.overridden(self.clock or 0.0)
            if why is not None:
                return "pilot_override", f"{name}'s pilot {why}, not from the episode's planner"
        off = [
            (name, w.disarmed_at) for name, w in zip(self.names, self.watches) if w.disarmed_at is not None
        ]
        if off:
            if (
                len(off) == len(self.names)
                and max(t for _, t in off) - min(t for _, t in off) <= UAV_OFF_GRACE_S
            ):
                return "world_reset", (
                    f"every pilot disarmed at once (ROS time {off[0][1]:.2f} s): the world was reset"
                )
            if self.clock is not None and self.clock - min(t for _, t in off) >= UAV_OFF_GRACE_S:
                names = ", ".join(name for name, _ in off)
                return "uav_off", (
                    f"{names} switched off or disarmed outside the episode (ROS time {off[0][1]:.2f} s)"
                )
        for name, watch in zip(self.names, self.watches):
            why = watch.refusing()
            if why is not None:
                return "plans_rejected", f"{name}'s pilot: {why}"
        return None

    # -- protocol --------------------------------------------------------------------------

    def _service(self, name: str, cls):
        rospy = ros1.rospy()
        try:
            rospy.wait_for_service(name, timeout=self.connect_timeout_s)
        except rospy.ROSException:
            raise ros1.RosFailure(
                f"no world answers {name} within {self.connect_timeout_s:g} s "
                "(start Gazebo or `cableload world`)"
            ) from None
        return rospy.ServiceProxy(name, cls)

    def _wait(self, condition, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise ros1.RosFailure(f"timed out after {seconds:g} s waiting for {what}")
            time.sleep(0.01)

    def _check_world(self) -> None:
        """Refuse (``EpisodeAborted``, ``system_mismatch``) a world that flies other
        quadrotors or another configuration than this episode."""
        info = ros1.world_info()
        self.world = info
        if info is None:  # not `cableload world`: the quadrotors it publishes must be ours
            published = {topic for topic, _ in ros1.rospy().get_published_topics()}
            state = ros1.STATE_TOPIC.format(quad=f"quad{len(self.names) + 1}")
            if state in published:
                raise EpisodeAborted(
                    "system_mismatch",
                    f"the world publishes {state}: it "
                    f"flies more than this episode's {len(self.names)} "
                    "quadrotors (--uavs)",
                )
            return
        names = info.get("quad_names")
        if names != list(self.names):
            raise EpisodeAborted(
                "system_mismatch",
                f"the world flies {len(names or [])} "
                f"quadrotors ({', '.join(names or [])}), this episode "
                f"{len(self.names)} ({', '.join(self.names)}): give both the "
                "same --uavs",
            )
        if info.get("pilot_queue") not in (None, self.pilot_queue):
            raise EpisodeAborted(
                "system_mismatch",
                f"the world's pilots run the "
                f"{info['pilot_queue']} queue, this episode sends for "
                f"{self.pilot_queue} (--pilot-queue)",
            )
        if info.get("pilot_times") not in (None, self.pilot_times):
            raise EpisodeAborted(
                "system_mismatch",
                f"the world's pilots time a trajectory by its {info['pilot_times']}, this "
                f"episode sends for pilots that time it by its {self.pilot_times} (--pilot-times)",
            )
        world_config = info.get("config") or {}
        ours = dataclasses.asdict(self.config)
        for section in WORLD_SECTIONS:
            if section in world_config:
                differs = config_differences(ours[section], world_config[section], section)
                if differs:
                    raise EpisodeAborted(
                        "system_mismatch",
                        "the world simulates another configuration than "
                        f"this episode's: {'; '.join(differs[:3])}"
                        f"{f' (and {len(differs) - 3} more)' if len(differs) > 3 else ''}; give "
                        "the world and the episode the same --config and --set",
                    )
        delay_max_s = float(world_config.get("link", {}).get("delay_max_s", 0.0))
        for watch in self.watches:
            watch.settle_s = max(watch.settle_s, delay_max_s + 0.02)
            if self.pilot_times == "receipt":
                watch.queue.tolerance_s = max(watch.queue.tolerance_s, delay_max_s + 0.02)

    def reset(self, scenario: Scenario) -> WorldState:
        if scenario.disturbance is not None:
            raise UsageError(
                "the gazebo backend cannot apply a load wrench disturbance; fly without --disturbance"
            )
        m = ros1.messages()
        self._failure = None
        pause = self._service(ros1.PAUSE_PHYSICS, m.EmptyService)
        unpause = self._service(ros1.UNPAUSE_PHYSICS, m.EmptyService)
        set_state = self._service(ros1.SET_MODEL_STATE, m.SetModelState)
        self._check_world()
        pause()
        request = m.ModelState(
            model_name=ros1.MODEL_NAME,
            pose=ros1.pose(scenario.load_p, scenario.load_q),
            twist=ros1.twist((0, 0, 0), (0, 0, 0)),
            reference_frame="world",
        )
        answer = set_state(request)
        if not answer.success:
            raise ros1.RosFailure(f"{ros1.SET_MODEL_STATE} refused the start pose: {answer.status_message}")
        unpause()
        self._wait(
            lambda: all(c.connected() for c in self.clients) and self.observer.ready(),
            self.connect_timeout_s,
            "every pilot's state, trajectory subscriber and the load's odometry",
        )
        for client in self.clients:
            client.reset_queue()
            client.enable(True)
        self._wait(
            lambda: all(c.telemetry is not None and c.telemetry.bridge_armed.data for c in self.clients),
            self.connect_timeout_s,
            "the pilots to arm",
        )
        for client in self.clients:
            client.command("start")
            if not scenario.on_ground:  # in the air: hover where placed
                client.command("force_hover")
        if scenario.on_ground:  # each pilot climbs its take-off height with slack cables
            self._await_takeoff()
        self._settle()
        # the first plans are made with the world paused (unpaused by the first advance): the
        # system does not drift while they are made, and a world in lockstep (which waits one
        # period after each plan's arrival for the next) receives every plan at its decision
        pause()
        self._await_still_clock()
        self._unpause = unpause
        self._received_at_reset = None
        if self._lockstep():  # the world's count of references received, to wait on in advance()
            with self._clock_cond:
                self._clock_cond.wait_for(lambda: self._received is not None, LOCKSTEP_STATE_WAIT_S)
                self._received_at_reset = None if self._received is None else list(self._received)
        ros1.freeze_heap()  # no full garbage collection stalls the episode mid-flight
        assert self.clock is not None  # _settle waited for the first /clock
        self.t0 = self.clock
        self._wait_state(self.t0)
        self.observer.t0 = self.t0
        # what happened during the set-up (the placement teleports the load) is not a fault
        self.observer.jump = None
        self._clock_back = None
        self.overrides.clear()
        for watch, client in zip(self.watches, self.clients):
            watch.disarmed_at = None
            assert client.telemetry is not None  # every pilot's telemetry came (waited for above)
            watch.armed = bool(client.telemetry.bridge_armed.data)
            watch.foreign.clear()
            watch.senders.clear()
            # planner nodes are trusted once their first plans are in (``trust``)
            watch.trusted = None if self.planner_nodes else {self.me}
        self._period_end = self.t0
        self._last_sample = self.t0  # samples from the episode's start on
        return self.observe()

    def _await_still_clock(self, still_s: float = 0.1, limit_s: float = 2.0) -> None:
        """After a pause: wait until the clock has stood still for ``still_s`` of wall time (a
        world finishes the step it is in, and a paused Gazebo may go on publishing its
        unchanged clock)."""
        start = since = time.monotonic()
        last = self.clock
        while time.monotonic() - since < still_s and time.monotonic() - start < limit_s:
            time.sleep(0.005)
            if self.clock != last:
                last, since = self.clock, time.monotonic()

    def _await_takeoff(self, height_m: float = 0.25) -> None:
        """Wait (world time) until every quadrotor has climbed ``height_m`` off the ground."""
        self._wait_first_clock()
        assert self.clock is not None  # known once _wait_first_clock returns (never None again)
        start = [s.latest()[1][2] for s in self.observer.quads]
        deadline = self.clock + 30.0
        while self.clock < deadline:
            if all(s.latest()[1][2] - z0 >= height_m for s, z0 in zip(self.observer.quads, start)):
                return
            if not self._wait_clock(self.clock + 0.02, "the pilots took off", SETUP_TIMEOUT_S):
                raise ros1.RosFailure(self._failure)
        raise ros1.RosFailure(
            f"the quadrotors did not climb {height_m:g} m off the ground within 30 s of world "
            "time after `start` (a pilot's takeoff_height below that?)"
        )

    def _settle(self, still_speed: float = 0.05, still_for: float = 0.3) -> None:
        """Wait (world time) until every quadrotor has been still for ``still_for`` s."""
        self._wait_first_clock()
        assert self.clock is not None  # known once _wait_first_clock returns (never None again)
        if not self._wait_clock(self.clock + 0.2, "the pilots took off", SETUP_TIMEOUT_S):
            raise ros1.RosFailure(self._failure)
        deadline = self.clock + 30.0
        still_since = self.clock
        while self.clock < deadline:
            speeds = [np.linalg.norm(s.latest()[3]) for s in self.observer.quads]
            if max(speeds) > still_speed:
                still_since = self.clock
            elif self.clock - still_since >= still_for:
                return
            if not self._wait_clock(self.clock + 0.02, "the quadrotors settled", SETUP_TIMEOUT_S):
                raise ros1.RosFailure(self._failure)
        raise ros1.RosFailure("the quadrotors did not settle in hover within 30 s of world time")

    def observe(self) -> WorldState:
        return self.observer.state()

    @property
    def paused_for_first_plans(self) -> bool:
        """Whether the world is paused for the episode's first plans (until ``advance``)."""
        return self._unpause is not None

    @property
    def decision_time(self) -> float:
        """Episode time of the current decision: the start of the planner period that the next
        ``advance`` ends (the state observed may be a little newer)."""
        return self._period_end - self.t0

    def send(self, uav: int, trajectory: UavTrajectory) -> None:
        if not 0 <= uav < len(self.clients):
            raise IndexError(f"uav index {uav} out of range for {len(self.clients)} quadrotors")
        if not trajectory.is_finite() or np.any(np.diff(trajectory.t) <= 0.0):
            raise ValueError(
                f"plan for uav {uav}: non-finite values or node times that do not increase; not sent"
            )
        if self._failure is None:
            self.clients[uav].send(trajectory, self.t0, now=self.clock)

    PILOT_COMMANDS = {"hover": "force_hover", "land": "land", "off": "off"}
    """The safety module's actions as the pilot's commands."""

    def command(self, uav: int, action: str) -> None:
        """A safety action for quadrotor ``uav`` (``hover``, ``land``, ``off``): the pilot's
        ``force_hover``, ``land`` or ``off``, sent at once."""
        if action not in self.PILOT_COMMANDS:
            raise ValueError(f"command: expected one of {sorted(self.PILOT_COMMANDS)}, got {action!r}")
        self.clients[uav].command(self.PILOT_COMMANDS[action])

    def land(self, timeout_s: float = 20.0) -> bool:
        """After a flight from the ground, once the load is set down: every pilot hovers, then
        lands (the pilot lands only from a hover), as an operator does. Whether every
        quadrotor came down to the ground within ``timeout_s`` of world time."""
        for client in self.clients:
            client.command("force_hover")
        assert self.clock is not None  # known since reset()
        if not self._wait_clock(self.clock + 0.2, "the pilots hovered", SETUP_TIMEOUT_S):
            return False
        for client in self.clients:
            client.command("land")
        floor = self.config.ground.landing_height + 0.05
        deadline = self.clock + timeout_s
        while self.clock < deadline:
            if all(s.latest()[1][2] <= floor for s in self.observer.quads):
                return True
            if not self._wait_clock(self.clock + 0.05, "the quadrotors landed", SETUP_TIMEOUT_S):
                return False
        return False

    def publish_reference(
        self, reference, t: float, horizon_s: float = 2.5, lead_s: float = 0.2, step_s: float = 0.02
    ) -> None:
        """Publish the load reference over ``[t - lead_s, t + horizon_s]`` (episode times) for
        planner nodes (``/cableload/load/reference_horizon``); the lead covers what the
        formation prior's finite differences look back. ``close`` publishes an empty one: the
        episode is over."""
        times = t + np.arange(-lead_s, horizon_s + 1e-9, step_s)
        self.pub_horizon.publish(ros1.load_setpoints_message(t, times, reference.sample(times), self.t0))

    def advance(self) -> WorldSamples:
        if self._unpause is not None:  # the first plans are out: the world runs again
            self._await_first_plans_received()
            self._unpause()
            self._unpause = None
            with self._clock_cond:
                self._clock_wall = time.monotonic()  # its clock stood still on purpose
        self._period_end += self.planner_period_s
        if self._failure is None and self._wait_clock(
            self._period_end - ros1.DECISION_EPS * self.planner_period_s,
            "waiting for the planner period to end",
        ):
            self._wait_state(self._period_end)
        t_to = min(self.observer.latest_time() or self._last_sample, self._period_end)
        samples = self.observer.samples(self._last_sample, t_to)
        self._last_sample = max(self._last_sample, t_to)
        return samples

    def _wait_state(self, ros_time: float) -> None:
        """Wait (``STATE_WAIT_S`` at most, ``LOCKSTEP_STATE_WAIT_S`` against a world in
        lockstep) until the system's state at ``ros_time`` is known."""
        wait_s = LOCKSTEP_STATE_WAIT_S if self._lockstep() else STATE_WAIT_S
        wait_until_known(self.observer.latest_time, ros_time, wait_s)

    def health(self) -> BackendHealth:
        status, message = self._failure_status, self._failure
        if message is None and self.observer.jump is not None:
            status, message = (
                "world_reset",
                (f"{self.observer.jump}: the world was reset or the system moved by hand"),
            )
        if message is None:
            status, message = self._pilot_problem() or (status, None)
        # the watches see every sender's references; a client sees, from the telemetry, the
        # rejections of its own that a watch judged too early to tell (a re-timing pilot)
        rejected = sum(max(w.rejected, c.rejected) for w, c in zip(self.watches, self.clients))
        return BackendHealth(
            ok=message is None,
            messages=[message] if message else [],
            status=status,
            rejected_plans=rejected,
            extra={"plans_sent": sum(c.sent for c in self.clients), "pilot_rejections": rejected},
            metrics={
                "references_seen": sum(w.seen for w in self.watches),
                "stamps_dropped": self.observer.stamps_dropped,
                **self._latency(),
            },
        )

    def _latency(self) -> dict:
        """How long after it is made a plan of this backend's planner takes effect. A
        re-timing pilot flies each piece from the plan's value at its arrival (the clients
        compensate the link's latency): none. A stock pilot that keeps the message's times
        flies a plan from the end of what is queued, one period plus the client's margin after
        the previous plan was made (on the embedded backend, the same latency is ``--set
        link.enabled=true`` with a fixed delay of that much and no loss). Planner nodes have
        their own clients (``cableload node`` reports its margin)."""
        if self.planner_nodes:
            return {}
        stamped_stock = self.pilot_queue == "stock" and self.pilot_times == "message"
        latency = {"plan_latency_s": self.clients[0].margin_s if stamped_stock else 0.0}
        if self.pilot_times == "receipt":
            latency["link_latency_s"] = float(np.median([c.latency.typical for c in self.clients]))
        return latency

    def close(self) -> None:
        if self._unpause is not None:  # ended before its first advance: leave the world running
            try:
                self._unpause()
            except Exception:  # noqa: BLE001 - a world that is gone is not paused either
                pass
            self._unpause = None
        if self._failure is None or self._failure_status not in ("backend_failed", "world_replaced"):
            # an empty reference horizon stops planner nodes; a plan one of them had already
            # sent lands within a planner period, before the pilots are told to hover (after,
            # it would set them tracking again)
            self.pub_horizon.publish(
                ros1.messages().Reference(
                    header=ros1.header(self.clock or 0.0, frame="load_reference"), points=[]
                )
            )
            if self.clock is not None and self._failure is None:
                self._wait_clock(self.clock + self.planner_period_s, "the episode ended")
            for client in self.clients:
                client.command("force_hover")
        for client in self.clients:
            client.close()
        for sub in self._subscribers:
            sub.unregister()
        self.observer.close()
        self._clock_sub.unregister()
        self.pub_horizon.unregister()
        ros1.thaw_heap()


def config_differences(ours, theirs, path: str) -> list[str]:
    """``path.key: ours vs theirs`` for every leaf where two config dicts (``asdict``, JSON)
    differ (numbers compared to 1e-9 relative)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            out += config_differences(ours.get(key), theirs.get(key), f"{path}.{key}")
        return out
    if isinstance(ours, (list, tuple)) and isinstance(theirs, (list, tuple)) and len(ours) == len(theirs):
        out = []
        for k, (a, b) in enumerate(zip(ours, theirs)):
            out += config_differences(a, b, f"{path}[{k}]")
        return out
    if (
        isinstance(ours, (int, float))
        and isinstance(theirs, (int, float))
        and not isinstance(ours, bool)
        and not isinstance(theirs, bool)
    ):
        if math.isclose(float(ours), float(theirs), rel_tol=1e-9, abs_tol=1e-12):
            return []
    elif ours == theirs:
        return []
    return [f"{path}: this episode {ours!r}, the world {theirs!r}"]
