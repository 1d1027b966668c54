"""The hardware backend: the Backend protocol over real quadrotors flying the Agilicious stack.

Each quadrotor is its agiros pilot (``backends.agiros.AgirosClient``: ``state``, ``telemetry``
in; ``trajectory``, ``enable``, ``start``, ``land``, ``off``, ``force_hover`` out). The load is
seen only by motion capture (``geometry_msgs/PoseStamped`` on the flight's topic template): its
twist comes from its pose stream (``hw.mocap.BodyTracker``). Every quadrotor's body is tracked
too, for the ages and rates the safety module and preflight judge. Time is the wall clock (ROS
time without ``/use_sim_time``): ``advance`` waits until the planner period has passed.

Nothing here decides what is safe: the episode runner passes every plan through the safety
module first (``hw.safety``) and calls ``command`` with its actions; ``safety_inputs`` gives the
module the ages of every state and motion-capture body, how long since each pilot last took a
new plan (from its telemetry: the queue's end moving on), the batteries' voltages and the
pilots' guards.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from backends import ros1
from backends.agiros import AgirosClient
from backends.base import BackendHealth, EpisodeAborted, Scenario
from backends.gazebo import WorldObserver, _Stream, init_node
from cableload_sim.params import Config
from cableload_sim.physics.statics import hover_geometry
from cableload_sim.physics.world import UavTrajectory, WorldSamples, WorldState
from hw.flight import FlightFile
from hw.mocap import BodyTracker

READY_WAIT_S = 5.0
"""How long (wall s) ``reset`` waits for every state and motion-capture body."""
PILOT_COMMANDS = {"hover": "force_hover", "land": "land", "off": "off"}


def wall_time() -> float:
    return time.time()


class ArenaObserver(WorldObserver):
    """The system as an arena sees it: each pilot's state, the load from motion capture (pose
    filtered into its twist), no tensions (the hover tensions stand in, as no sensor measures
    them). Rows are kept on the wall clock; a stamp from the future is dropped."""

    def __init__(self, config: Config, flight: FlightFile, clients: list[AgirosClient]):
        rospy = ros1.rospy()
        m = ros1.messages()
        self.system = config.system
        self.names = flight.names
        self.n = flight.n_uavs
        self.rho = config.system.attachment_array()
        self.attach = np.array([q.attachment for q in config.system.quadrotors])
        self.hover_tensions = hover_geometry(config.system).tensions
        # rows are kept relative to an origin: wall-clock seconds (about 1.8e9) leave a float
        # no room for the small differences the streams take between stamps
        self.origin = wall_time()
        self.quads = [_Stream(self.now) for _ in self.names]
        self.load = _Stream(self.now)
        self.tension = _Stream(self.now)
        self.jump = None
        self._last_load = None
        self.t0 = 0.0
        self._lock = threading.Lock()
        self.trackers = {flight.load.body: BodyTracker.for_load(config.sensing, flight.load.body)}
        for quad in flight.quads:
            # the planners fly on the pilots' states: a quadrotor's frames are only watched
            self.trackers[quad.body] = BodyTracker.for_quadrotor(config.sensing, quad.body, filtered=False)
        self.load_body = flight.load.body
        for i, client in enumerate(clients):
            client.on_state = self._quad_callback(i)
        self._subscribers = [
            rospy.Subscriber(flight.mocap(body), m.PoseStamped, self._mocap_callback(body), queue_size=50)
            for body in self.trackers
        ]

    def now(self) -> float:
        """The wall clock, relative to the origin (s)."""
        return wall_time() - self.origin

    def _quad_callback(self, i: int):
        def on_state(msg):
            t, p, q, v, w, motors = ros1.from_quad_state(msg)
            self.quads[i].add(msg.header.stamp.to_sec() - self.origin, p, q, v, w, motors)

        return on_state

    def _mocap_callback(self, body: str):
        tracker = self.trackers[body]

        def on_pose(msg):
            stamp = msg.header.stamp.to_sec() - self.origin
            if stamp > self.now() + 0.25:  # from the future: not a frame of this arena
                return
            with self._lock:
                if not tracker.add(stamp, ros1.xyz(msg.pose.position), ros1.wxyz(msg.pose.orientation)):
                    return
                if body == self.load_body:
                    p, v, q, omega = tracker.estimate(stamp)
                    self.load.add(stamp, p, q, v, omega)

        return on_pose

    def mocap_ages(self, now: float) -> dict[str, float]:
        """Each body's newest frame's age at wall time ``now`` (s)."""
        with self._lock:
            return {body: tracker.age(now - self.origin) for body, tracker in self.trackers.items()}

    def mocap_rates(self) -> dict[str, float]:
        with self._lock:
            return {body: tracker.rate_hz() for body, tracker in self.trackers.items()}


class HardwareBackend:
    """Backend over the quadrotors and the motion capture of ``flight``; one ``advance`` is one
    planner period of the wall clock."""

    name = "hardware"
    deterministic = False

    def __init__(self, flight: FlightFile, config: Config, node_name: str = "cableload_fly"):
        if config.system.n_uavs != flight.n_uavs:
            raise ValueError(f"the config has {config.system.n_uavs} quadrotors, the flight {flight.n_uavs}")
        self.flight = flight
        self.config = config
        self.system = config.system
        self.planner_period_s = 1.0 / config.simulation.planner_rate_hz
        init_node(node_name)
        self.clients = [
            AgirosClient(
                name, flight.pilot_queue, self.planner_period_s, times=flight.pilot_times, clock=wall_time
            )
            for name in flight.names
        ]
        self.observer = ArenaObserver(config, flight, self.clients)
        self._plans_taken = [wall_time()] * self.n
        self._queue_ends: list[float | None] = [None] * self.n
        for i, client in enumerate(self.clients):
            client.on_telemetry = self._telemetry_callback(i)
        self.t0 = wall_time()
        self._period_end = 0.0
        self._last_sample = 0.0
        self.failure: str | None = None

    @property
    def n(self) -> int:
        return self.flight.n_uavs

    @property
    def time(self) -> float:
        return wall_time() - self.t0

    def _telemetry_callback(self, i: int):
        def on_telemetry(msg):
            now = msg.header.stamp.to_sec()
            left = msg.reference_left_duration
            end = now + left if msg.num_references_in_queue and np.isfinite(left) else None
            previous = self._queue_ends[i]
            if end is not None and (previous is None or end > previous + 1e-3):
                self._plans_taken[i] = wall_time()
            self._queue_ends[i] = end

        return on_telemetry

    # -- the protocol ----------------------------------------------------------------------

    def wait_ready(self, seconds: float = READY_WAIT_S) -> str | None:
        """Until every pilot's state and every motion-capture body has been received; what is
        missing after ``seconds`` (None when nothing is)."""
        deadline = time.monotonic() + seconds
        while True:
            missing = [c.quad for c in self.clients if c.state is None]
            # a command published before the pilot's subscription is connected is lost
            missing += [
                f"{c.quad}'s pilot subscriptions" for c in self.clients if c.state and not c.connected()
            ]
            ages = self.observer.mocap_ages(wall_time())
            missing += [f"motion capture of {b}" for b, age in ages.items() if not np.isfinite(age)]
            if not missing and self.observer.ready():
                return None
            if time.monotonic() > deadline:
                return ", ".join(missing) or "no instant at which the whole system is known"
            time.sleep(0.02)

    def reset(self, scenario: Scenario | None = None) -> WorldState:
        """Start the episode's clock now; the system is where it is (nothing is placed)."""
        missing = self.wait_ready()
        if missing is not None:
            raise EpisodeAborted("backend_failed", f"nothing received from {missing}")
        # time zero: the newest instant the whole system is known at (the first state the
        # planners see is at t = 0, never before)
        start = self.observer.latest_time()
        assert start is not None  # wait_ready found the whole system known at some instant
        self.observer.t0 = start
        self.t0 = start + self.observer.origin
        self._period_end = 0.0
        self._last_sample = self.observer.t0
        for client in self.clients:
            client.reset_queue()
        self._plans_taken = [wall_time()] * self.n
        return self.observe()

    def observe(self) -> WorldState:
        return self.observer.state()

    def send(self, uav: int, trajectory: UavTrajectory) -> None:
        self.clients[uav].send(trajectory, self.t0, now=wall_time())

    def command(self, uav: int, action: str) -> None:
        if action not in PILOT_COMMANDS:
            raise ValueError(f"command: expected one of {sorted(PILOT_COMMANDS)}, got {action!r}")
        self.clients[uav].command(PILOT_COMMANDS[action])

    def advance(self) -> WorldSamples:
        self._period_end += self.planner_period_s
        delay = self.t0 + self._period_end - wall_time()
        if delay > 0.0:
            time.sleep(delay)
        t_to = min(self.observer.latest_time() or self._last_sample, self.observer.t0 + self._period_end)
        samples = self.observer.samples(self._last_sample, t_to)
        self._last_sample = max(self._last_sample, t_to)
        return samples

    def safety_inputs(self) -> dict:
        now = wall_time()
        state_age = np.array(
            [now - c.state.header.stamp.to_sec() if c.state is not None else np.inf for c in self.clients]
        )
        telemetry = [c.telemetry for c in self.clients]
        voltage = np.array([t.voltage if t is not None else np.nan for t in telemetry])
        guard = np.array([bool(t.guard_triggered.data) if t is not None else False for t in telemetry])
        return {
            "state_age": state_age,
            "mocap_age": self.observer.mocap_ages(now),
            "plan_age": now - np.array(self._plans_taken),
            "voltage": voltage,
            "guard": guard,
        }

    def health(self) -> BackendHealth:
        rejected = sum(c.rejected for c in self.clients)
        return BackendHealth(
            ok=self.failure is None,
            messages=[self.failure] if self.failure else [],
            rejected_plans=rejected,
            extra={"plans_sent": sum(c.sent for c in self.clients), "pilot_rejections": rejected},
            metrics={"stamps_dropped": self.observer.stamps_dropped},
        )

    def close(self) -> None:
        self.observer.close()
        for client in self.clients:
            client.close()
