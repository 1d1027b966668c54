"""``cableload world``: the numba simulator as a ROS node that speaks what a Gazebo world with
RotorS quadrotors flying the Agilicious pilot speaks.

To its clients it is such a world:

- per quadrotor ``/<quad>/agiros_pilot/{state, odometry, telemetry}`` out and ``trajectory``,
  ``enable``, ``start``, ``land``, ``off``, ``force_hover`` in, with the pilot's state machine
  and queueing rule (``backends.pilot``, stock or replacing queue);
- the load's pose at a motion-capture rate (``/mocap/load/pose``, ``geometry_msgs/PoseStamped``)
  and its odometry (``/cableload/load/odometry``), the cable tensions
  (``/cableload/cable_tension``, a simulator extra);
- ``/clock`` with ``/use_sim_time`` set, and the gazebo_ros services episodes use:
  ``/gazebo/reset_world``, ``/gazebo/pause_physics``, ``/gazebo/unpause_physics``,
  ``/gazebo/set_model_state`` (model ``multilift``: the load's pose; the system is placed at rest
  in hover around it, or, for a load pose on the floor, resting on the ground with ``[ground]``
  on: the load on the floor, each quadrotor on the ground below its slot, cables slack).

The system is spawned airborne in its hover formation. Until every quadrotor has been started
the world holds the system as it was placed: time runs, nothing moves. From the ground the
pilots' ``start`` climbs ``takeoff_height_m`` (0.5 m: the cables stay slack). After that the
physics runs while the world is unpaused. A pilot that lands descends ``land_drop_m`` (or to
the ground) and switches off; once all have, the system is held again. ``off`` while flying
is the emergency kill: motors off are not modelled, so the world stops the flight there and
holds the system (reported in its log).

Hardware mode (``HardwareOptions``, ``cableload world --hardware``): the world stands in for an
arena with real quadrotors, as ``cableload fly`` meets them. It runs on the wall clock (no
``/clock``, ``/use_sim_time`` false, real-time factor 1) with the system resting on the ground
(``[ground]``): the load on the floor, each quadrotor on its slot, cables slack. Every rigid
body (the load and each quadrotor) is published as motion capture does it,
``geometry_msgs/PoseStamped`` on the flight's topic template, with ``[sensing]``'s bias, noise and
latency and a share of frames dropped. References go through ``[link]`` (the Wi-Fi: loss and
delay). The pilots take off from the ground (``start`` climbs the take-off height), report the
battery's voltage under thrust (``[battery]``) in their telemetry, and never hold the system:
the physics always runs. Faults can be rehearsed on ``/cableload/world/fault``
(``std_msgs/String``): ``mocap-lost BODY``, ``link-cut QUAD``, ``state-silent QUAD``, ``clear``.
Pilot commands are written to the world's log with their times.

Pacing: real-time factor 1 by default; any other factor on request, ``0`` for as fast as
possible. Physics advances in slices of one state period (``state_rate_hz``); references and
commands that arrived meanwhile take effect at the next slice, never earlier than they arrived.

With ``config.link`` on, a reference is received at the start of that slice, and its
quadrotor's ``LinkModel`` (seeded from ``WorldOptions.seed``) loses it or says when it arrives
on board: the world runs on up to that time, the physics stepped to the arrival step and no
further, and hands it to the pilot there; the pilot re-plans at once. The other commands (enable,
start, land, off, force hover) do not go through the link.

Lockstep (``WorldOptions.lockstep``, off by default): the clock also waits for the planners, as
a simulator in lockstep with its flight software does. Once a quadrotor has been sent a
reference, the world does not step past one planner period (``simulation.planner_rate_hz``)
after the clock at which it arrived until the next one has. A planner that decides every period
from its first plan on (the gazebo backend and ``cableload node`` do, and both make that first
plan with the world paused) has the plan of each decision received at the decision's own time,
whatever the machine's load: a flight is the same on a busy machine as on an idle one. While
it waits, the world publishes its unchanged ``/clock`` every ``LOCKSTEP_CLOCK_S`` (as a paused
Gazebo does), so that clients do not take it for dead. It stops waiting for a quadrotor that is
told to land, hover or switch off, for every one when the episode publishes an empty reference
horizon (its end), and, with a message in its log, for one whose reference has not come within
``LOCKSTEP_WAIT_S``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from backends import ros1
from backends.embedded import ARRIVAL_TOLERANCE_STEPS
from backends.pilot import Pilot, PilotState, descent, reference_problem
from cableload_sim.errors import UsageError
from cableload_sim.io.runlog import default_quad_names
from cableload_sim.params import Config
from cableload_sim.physics import layout
from cableload_sim.physics.link import InFlight, LinkStats, make_links
from cableload_sim.physics.sensing import MotionCapture
from cableload_sim.physics.simulator import Simulator
from cableload_sim.rotations import quat_to_matrix

GROUND_TAKEOFF_M = 0.5
"""The pilots' take-off height from the ground (m): the example flight's, low enough that the
cables stay slack (the Agilicious default, 1.0 m, would pull them taut around the load)."""
TELEMETRY_RATE_HZ = 20.0
FAULT_TOPIC = "/cableload/world/fault"
"""Hardware mode: faults to rehearse (``std_msgs/String``; ``WorldNode._on_fault``)."""
MOCAP_STREAM = 4
"""Distinguishes the hardware world's motion-capture random stream (link: 1, sensors: 2)."""
LOCKSTEP_WAIT_S = 5.0
"""How long (wall s) a world in lockstep waits for one quadrotor's reference before it stops
waiting for that quadrotor (until it is sent a reference again)."""
EMPTY_HORIZON_BYTES = 256
"""Longest serialized reference horizon that may be empty (a header and no setpoint; one
setpoint alone is longer)."""
LOCKSTEP_CLOCK_S = 0.05
"""How often (wall s) a world paused, or in lockstep waiting for plans, publishes its unchanged
``/clock`` (as a paused Gazebo does)."""


def lockstep_waiting(clock: float, period_s: float, plan_clocks: list[float | None]) -> list[int]:
    """The quadrotors a world in lockstep waits for at ROS time ``clock``: those that are
    planning (``plan_clocks[i]``, the clock at which their newest reference arrived, is not
    None) and whose next decision, one period after that, has come."""
    eps = ros1.DECISION_EPS * period_s
    return [
        i
        for i, received in enumerate(plan_clocks)
        if received is not None and clock >= received + period_s - eps
    ]


@dataclass(frozen=True)
class WorldOptions:
    """How ``cableload world`` runs."""

    real_time_factor: float = 1.0
    """Simulated seconds per wall second; 0 runs as fast as possible."""
    state_rate_hz: float = 100.0
    """Rate of the quadrotor states, odometry and ``/clock`` (Hz)."""
    mocap_rate_hz: float = 100.0
    """Rate of the load's pose and odometry (Hz); a divisor of ``state_rate_hz``."""
    pilot_queue: str = "stock"
    """``stock``: append-only queue of the Agilicious pilot; ``replace``: a patched pilot."""
    pilot_times: str = "message"
    """``receipt``: the pilot re-times a trajectory to its arrival (agiros); ``message``: it
    keeps the message's times."""
    start_paused: bool = False
    land_drop_m: float = 1.0
    """How far a landing quadrotor descends before it switches off (m)."""
    seed: int = 0
    """Seed of the links' draws (``make_links``); used only with ``config.link`` on."""
    lockstep: bool = False
    """The clock waits at every planner decision for the references of that decision."""
    takeoff_height_m: float = GROUND_TAKEOFF_M
    """How far the pilots climb on ``start`` from the ground (their ``takeoff_height``, m)."""

    def __post_init__(self):
        if not np.isfinite(self.real_time_factor) or self.real_time_factor < 0.0:
            raise UsageError(
                f"--real-time-factor: expected a finite number >= 0 (0: as fast as "
                f"possible), got {self.real_time_factor!r}"
            )
        for name, flag in (("state_rate_hz", "--state-rate"), ("mocap_rate_hz", "--mocap-rate")):
            value = getattr(self, name)
            if not np.isfinite(value) or not 1.0 <= value <= 1000.0:
                raise UsageError(f"{flag}: expected 1 to 1000 Hz, got {value!r}")
        ratio = self.state_rate_hz / self.mocap_rate_hz
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise UsageError(
                f"--mocap-rate {self.mocap_rate_hz:g}: expected a whole fraction of "
                f"--state-rate {self.state_rate_hz:g} Hz (e.g. "
                f"{self.state_rate_hz:g} or {self.state_rate_hz / 2:g})"
            )
        if self.land_drop_m <= 0.0 or not np.isfinite(self.land_drop_m):
            raise UsageError(f"land_drop_m: expected a positive distance, got {self.land_drop_m!r}")
        if not (np.isfinite(self.takeoff_height_m) and self.takeoff_height_m > 0.0):
            raise UsageError(
                f"--takeoff-height: expected a positive height (m), got {self.takeoff_height_m!r}"
            )


@dataclass(frozen=True)
class HardwareOptions:
    """An arena with real quadrotors, simulated (see the module's docstring)."""

    bodies: tuple[str, ...]
    """Each quadrotor's motion-capture body."""
    load_body: str = "load"
    mocap_topic: str = "/mocap/{body}/pose"
    """Topic template of a body's poses (``{body}``)."""
    load_start: tuple[float, float, float] = (0.0, 0.0, 0.075)
    """Where the load rests on the floor (m); the quadrotors stand around it."""
    mocap_drop_fraction: float = 0.01
    """Share of motion-capture frames lost (-)."""
    takeoff_height_m: float = 0.5
    """How far the pilots climb on ``start`` from the ground (their ``takeoff_height``, m)."""

    def __post_init__(self):
        if not 0.0 <= self.mocap_drop_fraction < 1.0:
            raise UsageError(f"--mocap-drop: expected a fraction in [0, 1), got {self.mocap_drop_fraction!r}")
        if not self.takeoff_height_m > 0.0:
            raise UsageError(f"takeoff height: expected a positive height, got {self.takeoff_height_m!r}")
        if "{body}" not in self.mocap_topic:
            raise UsageError(f"mocap topic: expected a template with {{body}}, got {self.mocap_topic!r}")


class WorldNode:
    """The simulated world; ``run()`` serves until ROS shuts down or ``stop()``."""

    def __init__(
        self,
        config: Config,
        options: WorldOptions | None = None,
        spawn_pose: tuple | None = None,
        quad_names: list[str] | None = None,
        hardware: HardwareOptions | None = None,
    ):
        self.config = config
        self.hardware = hardware
        if hardware is not None:
            if not config.ground.enabled:
                raise UsageError("--hardware: the system rests on the ground; set ground.enabled=true")
            if len(hardware.bodies) != config.system.n_uavs:
                raise UsageError(
                    f"--hardware: {len(hardware.bodies)} motion-capture bodies for "
                    f"{config.system.n_uavs} quadrotors"
                )
            options = dataclasses.replace(options or WorldOptions(), real_time_factor=1.0, lockstep=False)
        self.options = options or WorldOptions()
        self.sim = Simulator(config)
        self.n = self.sim.n
        self.names = quad_names or default_quad_names(self.n)
        steps = 1.0 / (self.options.state_rate_hz * self.sim.h)
        if abs(steps - round(steps)) > 1e-6 * steps or round(steps) < 1:
            whole = [1.0 / (k * self.sim.h) for k in (1, 2, 4, 5, 10, 20)]
            raise UsageError(
                f"--state-rate {self.options.state_rate_hz:g}: expected a whole number of "
                f"physics steps ({1e3 * self.sim.h:g} ms) per state, e.g. "
                f"{', '.join(f'{r:g}' for r in whole if r <= 1000.0)} Hz"
            )
        self.steps_per_slice = round(steps)
        self.slice_s = self.steps_per_slice * self.sim.h
        self.mocap_every = round(self.options.state_rate_hz / self.options.mocap_rate_hz)
        # the Agilicious pilot publishes its telemetry at every pipeline run (100 Hz): hardware
        # mode does too, and so does a re-timing pilot (its clients judge from the telemetry
        # whether it took each piece: at 20 Hz one message, made before a late piece was
        # applied, could be all they saw of it); the Gazebo stand-in keeps a lighter rate
        full_rate = hardware is not None or self.options.pilot_times == "receipt"
        telemetry_hz = self.options.state_rate_hz if full_rate else TELEMETRY_RATE_HZ
        self.telemetry_every = max(1, round(self.options.state_rate_hz / telemetry_hz))
        self.spawn = spawn_pose or (np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]))
        takeoff = hardware.takeoff_height_m if hardware is not None else self.options.takeoff_height_m
        self.pilots = [
            Pilot(name, self.options.pilot_queue, self.options.land_drop_m, takeoff, self.options.pilot_times)
            for name in self.names
        ]
        for pilot in self.pilots:
            pilot.ground_z = 0.0 if config.ground.enabled else -math.inf
        self.paused = self.options.start_paused
        self.clock = 0.0  # ROS time (s)
        self.epoch = 0.0  # ROS time at the simulator's time zero
        self.messages: deque[str] = deque(maxlen=100)
        self._inbox: deque = deque()
        self.links = make_links(config.link, self.n, self.options.seed)
        self.in_flight = InFlight()
        """References on their way through the links, by arrival in ROS time (s)."""
        self._tolerance_s = ARRIVAL_TOLERANCE_STEPS * self.sim.h
        self._lock = threading.Lock()
        self._received_lock = threading.Lock()
        self.references_received = [0] * self.n
        """References received per quadrotor (``ros1.REFERENCES_RECEIVED_TOPIC``)."""
        self.pub_received: Any = None  # set by connect
        self._stop = threading.Event()
        self._slices = 0
        self.period_s = 1.0 / config.simulation.planner_rate_hz
        self.plan_clocks: list[float | None] = [None] * self.n
        """Per quadrotor, the clock at which its newest reference arrived; None while it is not
        planning (what lockstep waits for)."""
        self.lockstep_waits = 0
        """Decisions at which the world in lockstep had to wait for a reference."""
        self.bad_commands = 0
        """Messages that could not be applied (reported in the log, never fatal)."""
        self._episode_node: str | None = None
        """The node that last placed the system (``set_model_state``): the episode."""
        self.horizons_ignored = 0
        """Reference horizons not from the episode (see ``_on_horizon``)."""
        self.instance = ""
        self._shutdown_reason: str | None = None
        self.ended_by: str | None = None
        """Why the world stopped serving, when it was not asked to (the master shut it down)."""
        self.sim.advance(self.steps_per_slice, log=False)  # compile (or load) the kernels now,
        self.sim.world_state()  # not in the first slice a client waits for
        self.mocap: MotionCapture | None = None
        self._frames: deque = deque()
        """Motion-capture frames taken and not yet published (their latency)."""
        self.mocap_dropped = 0
        self.faults: set[tuple[str, str]] = set()
        """Faults rehearsed in hardware mode (``_on_fault``)."""
        self._setting_down: dict[int, tuple[float, np.ndarray]] = {}
        if hardware is not None:
            self.clock = time.time()  # ROS time is the wall clock
            self.spawn = (np.asarray(hardware.load_start, float), np.array([1.0, 0.0, 0.0, 0.0]))
            rng = np.random.default_rng(np.random.SeedSequence([self.options.seed, MOCAP_STREAM]))
            self.mocap = MotionCapture(config.sensing, self.n + 1, rng)
            self._mocap_rng = rng
        self._place(*self.spawn)

    # -- model -----------------------------------------------------------------------------

    @property
    def sim_time(self) -> float:
        return self.clock - self.epoch

    def on_the_floor(self, load_p) -> bool:
        """Whether a placement of the load at ``load_p`` puts the system on the ground: in
        hardware mode always; else with ``[ground]`` on and the load's centre no higher than
        its box's height above the floor (where no hover formation could hold it)."""
        if self.hardware is not None:
            return True
        return bool(self.config.ground.enabled and load_p[2] <= self.config.system.load.size[2])

    def _place(self, load_p, load_q) -> None:
        if self.on_the_floor(load_p):
            self.sim.reset_on_ground(load_p, load_q)
        else:
            self.sim.reset(load_p, load_q)
        self.sim.seed_onboard(self.options.seed)  # the onboard sensors, when [imu] is on
        self.epoch = self.clock  # the simulator restarts its time at zero
        state = self.sim.world_state()
        for i, pilot in enumerate(self.pilots):
            pilot.hover_position = state.uav_p[i].copy()
            pilot.queue.clear()
        self.plan_clocks = [None] * self.n

    @property
    def held(self) -> bool:
        """Nothing moves: not every quadrotor has started, or all have switched off (never in
        hardware mode: the system rests on the ground)."""
        return self.hardware is None and not all(p.flying for p in self.pilots)

    # -- ROS -------------------------------------------------------------------------------

    def connect(self) -> None:
        """Join the ROS graph as ``/cableload_world``; refused (``RosFailure``) while another
        world answers under that name (the master would shut it down mid-flight and its
        episode would carry on against this one)."""
        rospy = ros1.rospy()
        m = ros1.messages()
        if ros1.node_answers(ros1.WORLD_NODE):
            raise ros1.RosFailure(
                f"a world is already running on this master ({ros1.WORLD_NODE}); stop it "
                "first, or start this one on another master (ROS_MASTER_URI)"
            )
        rospy.set_param("/use_sim_time", self.hardware is None)
        rospy.init_node(ros1.WORLD_NODE[1:], anonymous=False, disable_signals=True)
        rospy.core.add_preshutdown_hook(self._on_shutdown)
        self.instance = uuid.uuid4().hex
        rospy.set_param(
            ros1.WORLD_PARAM,
            json.dumps(
                {
                    "instance": self.instance,
                    "pid": os.getpid(),
                    "quad_names": self.names,
                    "system": dataclasses.asdict(self.config.system),
                    "config": dataclasses.asdict(self.config),
                    "pilot_queue": self.options.pilot_queue,
                    "pilot_times": self.options.pilot_times,
                    "state_rate_hz": self.options.state_rate_hz,
                    "real_time_factor": self.options.real_time_factor,
                    "lockstep": self.options.lockstep,
                    "hardware": self.hardware is not None,
                }
            ),
        )
        self.pub_clock = rospy.Publisher("/clock", m.Clock, queue_size=10)
        received = rospy.Publisher(ros1.REFERENCES_RECEIVED_TOPIC, m.String, queue_size=10, latch=True)
        received.publish(m.String(data=json.dumps(self.references_received)))
        self.pub_received = received
        self.pub_state, self.pub_odometry, self.pub_telemetry = [], [], []
        self._subscribers = []
        # the states latched: a node that subscribes while the world is paused (for the episode's
        # first plans) gets the state it must plan from, not silence until the world runs again
        for i, name in enumerate(self.names):
            self.pub_state.append(
                rospy.Publisher(ros1.STATE_TOPIC.format(quad=name), m.QuadState, queue_size=10, latch=True)
            )
            self.pub_odometry.append(
                rospy.Publisher(ros1.ODOMETRY_TOPIC.format(quad=name), m.Odometry, queue_size=10, latch=True)
            )
            self.pub_telemetry.append(
                rospy.Publisher(
                    ros1.TELEMETRY_TOPIC.format(quad=name), m.Telemetry, queue_size=10, latch=True
                )
            )
            for topic, cls, kind in (
                (ros1.TRAJECTORY_TOPIC, m.Reference, "trajectory"),
                (ros1.ENABLE_TOPIC, m.Bool, "enable"),
                (ros1.START_TOPIC, m.Empty, "start"),
                (ros1.LAND_TOPIC, m.Empty, "land"),
                (ros1.OFF_TOPIC, m.Empty, "off"),
                (ros1.FORCE_HOVER_TOPIC, m.Empty, "force_hover"),
            ):
                self._subscribers.append(
                    rospy.Subscriber(
                        topic.format(quad=name), cls, self._on_command, callback_args=(i, kind), queue_size=50
                    )
                )
        if self.hardware is None:
            self.pub_load_pose = rospy.Publisher(
                ros1.LOAD_POSE_TOPIC, m.PoseStamped, queue_size=10, latch=True
            )
        self.pub_load_odometry = rospy.Publisher(
            ros1.LOAD_ODOMETRY_TOPIC, m.Odometry, queue_size=10, latch=True
        )
        self.pub_tension = rospy.Publisher(ros1.TENSION_TOPIC, m.CableTension, queue_size=10, latch=True)
        self._messages()
        # raw: only an empty horizon (the episode's end) is read, not the 2.7 s of setpoints
        self._subscribers.append(
            rospy.Subscriber(ros1.LOAD_HORIZON_TOPIC, rospy.AnyMsg, self._on_horizon, queue_size=2)
        )
        self.pub_mocap = []
        if self.hardware is not None:
            bodies = (self.hardware.load_body, *self.hardware.bodies)
            self.pub_mocap = [
                rospy.Publisher(self.hardware.mocap_topic.format(body=b), m.PoseStamped, queue_size=20)
                for b in bodies
            ]
            self._msg_mocap = [m.PoseStamped(header=ros1.header(0.0, frame=ros1.WORLD_FRAME)) for _ in bodies]
            self._subscribers.append(rospy.Subscriber(FAULT_TOPIC, m.String, self._on_fault, queue_size=10))
            self._services = []
            return
        self._services = [
            rospy.Service(ros1.RESET_WORLD, m.EmptyService, self._srv_reset),
            rospy.Service(ros1.PAUSE_PHYSICS, m.EmptyService, self._srv_pause),
            rospy.Service(ros1.UNPAUSE_PHYSICS, m.EmptyService, self._srv_unpause),
            rospy.Service(ros1.SET_MODEL_STATE, m.SetModelState, self._srv_set_model_state),
        ]

    def _on_command(self, msg, args) -> None:
        i, kind = args
        payload: dict[str, np.ndarray] | bool | None
        try:
            if kind == "trajectory":  # converted here, in the subscriber's thread
                payload = ros1.trajectory_arrays(msg)
            elif kind == "enable":
                payload = bool(msg.data)
            else:
                payload = None
        except Exception as err:  # noqa: BLE001 - one bad message never ends the world
            self.bad_commands += 1
            self.messages.append(
                f"t={self.sim_time:.3f} s {self.names[i]}: {kind} message "
                f"not read ({type(err).__name__}: {err})"
            )
            return
        self.receive(i, kind, payload)

    def _on_fault(self, msg) -> None:
        """A fault to rehearse (hardware mode, ``FAULT_TOPIC``): ``mocap-lost BODY`` (its frames
        stop), ``link-cut QUAD`` (its references are lost), ``state-silent QUAD`` (its state
        and telemetry stop), ``clear`` (every fault ends)."""
        words = str(msg.data).split()
        kind, target = (words + ["", ""])[:2]
        assert self.hardware is not None  # subscribed to in hardware mode only
        bodies = (self.hardware.load_body, *self.hardware.bodies)
        known = {"mocap-lost": bodies, "link-cut": self.names, "state-silent": self.names}
        if kind == "clear":
            self.faults.clear()
        elif kind in known and target in known[kind]:
            self.faults.add((kind, target))
        else:
            expected = "mocap-lost BODY, link-cut QUAD, state-silent QUAD or clear"
            self.messages.append(f"fault {msg.data!r} not understood (expected {expected})")
            return
        self.messages.append(f"t={self.sim_time:.2f} s: fault {msg.data!r}")

    def _on_horizon(self, raw) -> None:
        """An empty horizon from the episode (the node that placed the system with
        ``set_model_state``) ends its lockstep waits; any other horizon is not read, and an
        empty one from another node is ignored and reported."""
        if len(raw._buff) > EMPTY_HORIZON_BYTES:  # setpoints: the episode goes on
            return
        caller = ros1.caller_of(raw)
        msg = ros1.messages().Reference()
        try:
            msg.deserialize(raw._buff)
        except Exception:  # noqa: BLE001 - a malformed message is not the episode's end
            self.horizons_ignored += 1
            return
        if msg.points:
            return
        if caller != self._episode_node:
            self.horizons_ignored += 1
            if self.horizons_ignored <= 3:
                self.messages.append(
                    f"t={self.sim_time:.2f} s: an empty reference horizon from "
                    f"{caller} ignored (the episode is {self._episode_node})"
                )
            return
        self.plan_clocks = [None] * self.n  # the episode is over: its planners send no more

    def receive(self, i: int, kind: str, payload) -> None:
        """A command for quadrotor ``i`` (``kind``: trajectory, enable, start, land, off,
        force_hover), converted from its message: node arrays of the reference in ROS time,
        the flag of enable, else None. It takes effect from the next slice on."""
        self._inbox.append((i, kind, payload))  # first: lockstep steps on once it is noted
        if kind == "trajectory":
            self.plan_clocks[i] = self.clock
            with self._received_lock:
                self.references_received[i] += 1
                text = json.dumps(self.references_received)
            if self.pub_received is not None:
                self.pub_received.publish(ros1.messages().String(data=text))
        elif kind in ("land", "off", "force_hover"):
            self.plan_clocks[i] = None  # no more references are coming for it

    def _srv_reset(self, _request):
        with self._lock:
            for pilot in self.pilots:
                pilot.off()
            self._place(*self.spawn)
            self.messages.append("reset_world: system back at its spawn pose, pilots off")
        return ros1.messages().EmptyService._response_class()

    def _srv_pause(self, _request):
        self.paused = True
        return ros1.messages().EmptyService._response_class()

    def _srv_unpause(self, _request):
        self.paused = False
        return ros1.messages().EmptyService._response_class()

    def _srv_set_model_state(self, request):
        response = ros1.messages().SetModelState._response_class()
        state = request.model_state
        problem = None
        if state.model_name != ros1.MODEL_NAME:
            problem = f"unknown model {state.model_name!r}; this world has {ros1.MODEL_NAME!r}"
        elif state.reference_frame not in ("", "world", "map"):
            problem = f"reference_frame {state.reference_frame!r}: only the world frame"
        elif np.any(ros1.xyz(state.twist.linear)) or np.any(ros1.xyz(state.twist.angular)):
            problem = "the system is placed at rest only (twist must be zero)"
        p = ros1.xyz(state.pose.position)
        q = ros1.wxyz(state.pose.orientation)
        if problem is None and (
            not np.isfinite(p).all() or not np.isfinite(q).all() or abs(np.linalg.norm(q) - 1.0) > 1e-3
        ):
            problem = f"pose: expected finite values and a unit quaternion, got {p}, {q}"
        if problem is not None:
            response.success, response.status_message = False, problem
            return response
        with self._lock:
            try:
                self._place(p, q / np.linalg.norm(q))
            except UsageError as err:  # e.g. a formation whose cables are taut on the ground
                response.success, response.status_message = False, str(err)
                return response
        self._episode_node = ros1.caller_of(request)
        where = "on the ground" if self.on_the_floor(p) else "in hover"
        response.success, response.status_message = True, f"placed at rest {where}"
        return response

    def summary(self) -> str:
        """References each pilot accepted and rejected (the world's own count: the pilot's
        telemetry has no field for it), and how often its queue ran out while tracking."""
        counts = ", ".join(f"{p.name} {p.queue.accepted}/{p.queue.rejected}" for p in self.pilots)
        dry = ", ".join(f"{p.name} {p.ran_dry}" for p in self.pilots)
        text = f"pilot references accepted/rejected: {counts}; queue ran dry: {dry}"
        if self.options.lockstep:
            text += f"; lockstep waits: {self.lockstep_waits}"
        if self.bad_commands:
            text += f"; messages not applied: {self.bad_commands}"
        if self.horizons_ignored:
            text += f"; reference horizons ignored: {self.horizons_ignored}"
        if any(p.dry_at for p in self.pilots):
            text += "; ran dry at (s): " + ", ".join(
                f"{p.name} {' '.join(f'{t:.2f}' for t in p.dry_at)}" for p in self.pilots if p.dry_at
            )
        if self.config.link.enabled:
            link = self.link_stats()
            text += (
                f"; link: {link.sent} references sent, {link.dropped} lost, "
                f"{len(self.in_flight)} still on their way, delay mean "
                f"{1e3 * link.delay_mean_s:.1f} ms, max {1e3 * link.delay_max_s:.1f} ms"
            )
        return text

    def link_stats(self) -> LinkStats:
        """What the links of every quadrotor did since the world started."""
        return LinkStats.combined([link.stats() for link in self.links])

    # -- loop ------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self, duration_s: float | None = None) -> None:
        """Serve until stopped, ROS shuts down, or ``duration_s`` of ROS time passed."""
        rospy = ros1.rospy()
        rtf = self.options.real_time_factor
        ros1.freeze_heap()  # no full garbage collection stops the clock (see freeze_heap)
        try:
            self._serve(rospy, rtf, duration_s)
        finally:
            ros1.thaw_heap()
        if rospy.is_shutdown() and not self._stop.is_set():
            reason = self._shutdown_reason or self.ended_by
            self.ended_by = f"the ROS node was shut down: {reason or 'by the master'}"

    def _on_shutdown(self, reason: str) -> None:
        self._shutdown_reason = reason

    def _serve(self, rospy, rtf: float, duration_s: float | None) -> None:
        if self.hardware is not None:  # the wall clock from the first slice on
            with self._lock:
                self.clock = time.time()
                self.epoch = self.clock - self.sim.time
        wall0, clock0 = time.monotonic(), self.clock
        while not self._stop.is_set() and not rospy.is_shutdown():
            if duration_s is not None and self.clock - clock0 >= duration_s:
                break
            if self.paused:  # as a paused Gazebo: the clock is published, unchanged
                time.sleep(LOCKSTEP_CLOCK_S)
                self.pub_clock.publish(self._msg_clock)
                wall0, clock0 = time.monotonic(), self.clock
                continue
            if self.options.lockstep and not self._await_plans(rospy):
                continue  # paused or stopped while waiting
            with self._lock:
                self.step_slice()
            try:
                self.publish()
            except rospy.ROSException as err:  # the master shut this node down meanwhile
                if not rospy.is_shutdown():
                    raise
                self.ended_by = str(err)
                break
            if rtf > 0.0:
                delay = wall0 + (self.clock - clock0) / rtf - time.monotonic()
                if delay > 0.0:
                    time.sleep(delay)
                elif delay < -1.0:  # far behind (a slow machine): do not try to catch up
                    wall0, clock0 = time.monotonic(), self.clock

    def _await_plans(self, rospy) -> bool:
        """Lockstep: wait until every planning quadrotor's reference of the newest decision has
        arrived (or is given up on); False when the world was paused or stopped meanwhile."""
        waiting = lockstep_waiting(self.clock, self.period_s, self.plan_clocks)
        if not waiting or self.held:
            return True
        self.lockstep_waits += 1
        start = last_clock = time.monotonic()
        while waiting:
            if self._stop.is_set() or rospy.is_shutdown() or self.paused:
                return False
            now = time.monotonic()
            if now - start > LOCKSTEP_WAIT_S:
                for i in waiting:
                    self.plan_clocks[i] = None
                    self.messages.append(
                        f"t={self.sim_time:.2f} s {self.names[i]}: lockstep: no reference within "
                        f"{LOCKSTEP_WAIT_S:g} s of wall time; no longer waited for"
                    )
                return True
            if now - last_clock >= LOCKSTEP_CLOCK_S:
                self.pub_clock.publish(self._msg_clock)  # the clock last published
                last_clock = now
            time.sleep(0.0005)
            waiting = lockstep_waiting(self.clock, self.period_s, self.plan_clocks)
        return True

    def step_slice(self) -> None:
        """Apply what arrived, give each controller its pilot's plan, advance one slice."""
        state = self.sim.world_state()
        now = self.sim_time
        flying = not self.held
        while self._inbox:
            i, kind, payload = self._inbox.popleft()
            try:
                if kind == "trajectory" and ("link-cut", self.names[i]) in self.faults:
                    continue  # lost on the way
                if self.hardware is not None and kind in ("start", "land", "off", "force_hover", "enable"):
                    self.messages.append(
                        f"t={now:.3f} s {self.names[i]}: {kind}{'' if payload is None else f' {payload}'}"
                    )
                if kind == "trajectory" and self.config.link.enabled:
                    arrival = self.links[i].transmit(self.clock)
                    if arrival is not None:
                        self.in_flight.put(arrival, i, payload)
                else:
                    self._apply(i, kind, payload, now, state.uav_p[i])
            except Exception as err:  # noqa: BLE001 - one bad message never ends the world
                self.bad_commands += 1
                self.messages.append(
                    f"t={now:.3f} s {self.names[i]}: {kind} message not applied ({type(err).__name__}: {err})"
                )
        self._deliver(replan=False)  # those arriving now (no delay, or at the slice's start)
        if self.hardware is not None:
            self._set_down_switched_off(state, now)
        off = [p.name for p in self.pilots if p.state is PilotState.OFF and not p.landed]
        if flying and off and self.hardware is None:
            self.messages.append(
                f"t={now:.2f} s: {', '.join(off)} switched off in flight; "
                "the flight stops here (every pilot off, the system held)"
            )
            for pilot in self.pilots:
                pilot.off()
        if self.held:
            self._hold_slice()
        else:
            for i, pilot in enumerate(self.pilots):
                plan = pilot.plan(now, state.uav_p[i])
                if plan is not None:
                    self.sim.send_plan(i, plan)
            self._advance_slice()
        self._slices += 1

    def _set_down_switched_off(self, state, now: float) -> None:
        """Hardware mode: a quadrotor switched off in the air would fall; the simulator does
        not model motors off, so the world sets it down at the landing speed instead (its pilot
        stays off: nothing it is sent is flown) and says so in its log."""
        floor = self.config.ground.landing_height
        for i, pilot in enumerate(self.pilots):
            airborne = state.uav_p[i, 2] > floor + 0.1
            if pilot.state is PilotState.OFF and airborne and i not in self._setting_down:
                self._setting_down[i] = (now, state.uav_p[i].copy())
                self.messages.append(
                    f"t={now:.2f} s {pilot.name}: switched off in the air; motors off are not "
                    "modelled, the world sets it down"
                )
            elif pilot.state is not PilotState.OFF:
                self._setting_down.pop(i, None)
        for i, (t0, start) in self._setting_down.items():
            self.sim.send_plan(i, descent(now, t0, start, max(start[2] - floor, 0.0)))

    def _hold_slice(self) -> None:
        """One slice in which time runs and the simulator's state does not; references are
        handed to their pilots at their arrival."""
        start, epoch = self.clock, self.epoch
        end = start + self.slice_s
        while self.in_flight.next_arrival() < end - self._tolerance_s:
            arrival = max(self.in_flight.next_arrival(), self.clock)
            self.clock = arrival
            self.epoch = epoch + (arrival - start)
            self._deliver(replan=False)
        self.clock = end
        self.epoch = epoch + self.slice_s

    def _advance_slice(self) -> None:
        """One slice of physics, stepped in pieces that end where a reference arrives (splitting
        changes no bit of the physics)."""
        left = self.steps_per_slice
        while left > 0:
            steps = cast(int, min(left, self._steps_to_next_arrival()))  # left is finite
            self.sim.advance(steps, log=False)
            self.clock = self.epoch + self.sim.time
            left -= steps
            if left > 0:
                self._deliver(replan=True)

    def _steps_to_next_arrival(self) -> int | float:
        arrival = self.in_flight.next_arrival()
        if not math.isfinite(arrival):
            return math.inf
        return max(1, math.ceil((arrival - self.clock) / self.sim.h - ARRIVAL_TOLERANCE_STEPS))

    def _deliver(self, replan: bool) -> None:
        """Hand every reference that has arrived by now to its pilot; with ``replan``, a pilot
        that queued one gives its controller the new plan at once (mid-slice)."""
        due = self.in_flight.due(self.clock + self._tolerance_s)
        if not due:
            return
        state = self.sim.world_state()
        now = self.sim_time
        for i, payload in due:
            accepted = self._apply(i, "trajectory", payload, now, state.uav_p[i])
            pilot = self.pilots[i]
            if replan and accepted and pilot.state in (PilotState.HOVER, PilotState.TRACKING):
                plan = pilot.plan(now, state.uav_p[i])
                if plan is not None:
                    self.sim.send_plan(i, plan)

    def _apply(self, i: int, kind: str, payload, now: float, position) -> bool:
        """Apply one command to pilot ``i``; False for a reference it rejected."""
        pilot = self.pilots[i]
        if kind == "trajectory":
            payload = {**payload, "t": np.asarray(payload["t"], dtype=float) - self.epoch}
            end = pilot.queue.end
            if not pilot.offer(payload, now):
                problem = reference_problem(payload)
                span = (
                    f"[{payload['t'][0]:.4f}, {payload['t'][-1]:.4f}] s"
                    if problem is None
                    else f"({problem})"
                )
                self.messages.append(
                    f"t={now:.3f} s {pilot.name}: reference {span} rejected "
                    f"({pilot.state.value}, queue ends {'-' if end is None else f'{end:.4f}'} s)"
                )
                return False
        elif kind == "enable":
            pilot.enable(payload)
        elif kind == "start":
            pilot.start(position, now)
        elif kind == "land":
            pilot.land(now, position)
        elif kind == "off":
            was_flying = pilot.flying
            pilot.off()
            pilot.landed = not was_flying
        elif kind == "force_hover":
            pilot.force_hover(position)
        return True

    def _messages(self) -> None:
        """The messages ``publish`` sets in place and sends every slice (building them anew
        took most of a slice's time: about 100 us each)."""
        m = ros1.messages()
        zero, rest = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        self._msg_state = [ros1.quad_state(0.0, zero, rest, zero, zero) for _ in self.names]
        self._msg_odometry = [
            ros1.odometry(0.0, f"{name}/body", zero, rest, zero, zero) for name in self.names
        ]
        self._msg_load_pose = m.PoseStamped(header=ros1.header(0.0), pose=ros1.pose(zero, rest))
        self._msg_load_odometry = ros1.odometry(0.0, "load", zero, rest, zero, zero)
        self._msg_tension = m.CableTension(header=ros1.header(0.0))
        self._msg_clock = m.Clock()

    def publish(self) -> None:
        t = self.clock
        now = ros1.stamp(t)  # one stamp for every message of this instant
        state = self.sim.world_state()
        # linear velocities in the body frames, all at once
        v_body = np.einsum("nji,nj->ni", quat_to_matrix(state.uav_q), state.uav_v)
        silent = {i for i, name in enumerate(self.names) if ("state-silent", name) in self.faults}
        for i in range(self.n):
            if i in silent:
                continue
            self.pub_state[i].publish(
                ros1.fill_quad_state(
                    self._msg_state[i],
                    t,
                    state.uav_p[i],
                    state.uav_q[i],
                    state.uav_v[i],
                    state.uav_omega[i],
                    state.rotor_speeds[i],
                    time_stamp=now,
                )
            )
            self.pub_odometry[i].publish(
                ros1.fill_odometry(
                    self._msg_odometry[i],
                    t,
                    state.uav_p[i],
                    state.uav_q[i],
                    v_body[i],
                    state.uav_omega[i],
                    time_stamp=now,
                )
            )
        if self._slices % self.mocap_every == 0:
            if self.hardware is None:  # in hardware mode the motion capture publishes it
                pose = self._msg_load_pose
                pose.header.stamp = now
                ros1.set_pose(pose.pose, state.load_p, state.load_q)
                self.pub_load_pose.publish(pose)
            load_v_body = quat_to_matrix(state.load_q).T @ state.load_v
            self.pub_load_odometry.publish(
                ros1.fill_odometry(
                    self._msg_load_odometry,
                    t,
                    state.load_p,
                    state.load_q,
                    load_v_body,
                    state.load_omega,
                    time_stamp=now,
                )
            )
            self._msg_tension.header.stamp = now
            self._msg_tension.tension = [float(x) for x in state.cable_tension]
            self.pub_tension.publish(self._msg_tension)
        if self._slices % self.telemetry_every == 0:
            for i in range(self.n):
                if i not in silent:
                    self.pub_telemetry[i].publish(self.telemetry(i, t, state))
        if self.hardware is not None:
            self._publish_mocap(t, state)
            return  # on the wall clock: no /clock
        # the clock last: a planner that decides when it ticks finds that time's states sent
        self._msg_clock.clock = now
        self.pub_clock.publish(self._msg_clock)

    def _publish_mocap(self, t: float, state) -> None:
        """Take a motion-capture frame of every body at its rate, publish those whose latency
        has passed; a share of frames is lost."""
        assert self.hardware is not None and self.mocap is not None  # (hardware mode only)
        if self._slices % self.mocap_every == 0:
            p = np.vstack([state.load_p[None], state.uav_p])
            q = np.vstack([state.load_q[None], state.uav_q])
            self._frames.append(self.mocap.capture(t, p, q))
        while self._frames and self._frames[0].available <= t + 1e-9:
            frame = self._frames.popleft()
            stamp = ros1.stamp(frame.t)
            bodies = (self.hardware.load_body, *self.hardware.bodies)
            for b, (pub, msg) in enumerate(zip(self.pub_mocap, self._msg_mocap)):
                if ("mocap-lost", bodies[b]) in self.faults:
                    continue
                if self._mocap_rng.random() < self.hardware.mocap_drop_fraction:
                    self.mocap_dropped += 1
                    continue
                msg.header.stamp = stamp
                ros1.set_pose(msg.pose, frame.p[b], frame.q[b])
                pub.publish(msg)

    def telemetry(self, i: int, t: float, state):
        m = ros1.messages()
        pilot = self.pilots[i]
        end = pilot.queue.end
        left = max(0.0, end - self.sim_time) if end is not None else 0.0
        reference = pilot.queue.sample(self.sim_time) if pilot.state is PilotState.TRACKING else None
        if reference is not None:
            ref_state = ros1.quad_state(
                t, reference.p[0], (1, 0, 0, 0), reference.v[0], reference.body_rates[0]
            )
            rmse = float(np.linalg.norm(reference.p[0] - state.uav_p[i]))
        else:
            ref_state = ros1.quad_state(t, pilot.hover_position, (1, 0, 0, 0), (0, 0, 0), (0, 0, 0))
            rmse = float(np.linalg.norm(pilot.hover_position - state.uav_p[i])) if pilot.flying else 0.0
        return m.Telemetry(
            header=ros1.header(t),
            t=t,
            bridge_type=m.String("SIM"),
            bridge_armed=m.Bool(pilot.armed),
            guard_triggered=m.Bool(False),
            num_references_in_queue=len(pilot.queue),
            reference_left_duration=left,
            rmse=rmse,
            reference=ref_state,
            voltage=self.voltage(i),
        )

    def voltage(self, i: int) -> float:
        """Quadrotor ``i``'s battery voltage under its thrust (``[battery]``), else a full pack."""
        if not self.config.battery.enabled:
            return 16.0
        o = layout.battery_offset(self.n, int(self.config.ball.enabled), i)
        return float(self.sim.x[o + layout.BATT_VOLTAGE])
