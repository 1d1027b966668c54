"""``cableload node``: one planner as its own ROS process, as the paper deployed them.

- ``--planner student --uav I``: quadrotor I's student. It subscribes to its own pilot's state
  (``/<quad>/agiros_pilot/state``), the load's pose (``/mocap/load/pose``) and the load
  reference (``/cableload/load/reference_horizon``) and nothing else, and publishes its
  ``Reference`` at the planner rate through its ``AgirosClient`` (stock or replacing queue).
- ``--planner teacher`` (or any centralized planner): every pilot's state, the load's odometry
  and the reference; publishes every quadrotor's reference.

Every plan passes the ``PlanGuard`` before it leaves (no non-finite or out-of-bounds reference).
A node plans on the world's clock (``/use_sim_time``): at once when an episode's first
reference horizon arrives (the world is paused for it), then each time the clock has run one
more planner period from there. It plans only while the reference it holds covers its horizon:
before an episode starts and after it ends (the episode then publishes an empty reference) it
sends nothing, so the pilots hover. Once connected it exempts what it has
loaded from garbage collection (``ros1.freeze_heap``): a full collection stopped a student
node for 0.1-0.4 s every few seconds, and a stock pilot's queue ran dry meanwhile.

``NodePlanners`` is the episode side: in ``cableload simulate --backend gazebo --planner nodes``
it stands where a planner would, publishes the reference each period (stamped with the decision
time) and plans nothing itself; at the first decision it waits, the world paused, for every
node's first plan.
"""

from __future__ import annotations

import math
import threading
import time
from typing import cast

import numpy as np

from backends import ros1
from backends.agiros import AgirosClient
from backends.base import BackendHealth
from backends.gazebo import (
    LOCKSTEP_STATE_WAIT_S,
    STATE_WAIT_S,
    WorldObserver,
    _Stream,
    init_node,
    wait_until_known,
)
from cableload_sim.errors import UsageError
from cableload_sim.horizon import HORIZON_S
from cableload_sim.io.runlog import default_quad_names
from cableload_sim.params import Config
from cableload_sim.physics.world import LocalObservation, WorldState
from cableload_sim.rotations import quat_multiply
from cableload_sim.trajectories import LoadReferenceSample
from planners.base import PlanGuard

LOOK_BACK_S = 0.05
"""How far before its decision time a planner reads the reference (finite differences)."""
NEW_EPISODE_GAP_S = 1.0
"""A reference horizon this long (s, ROS time) after the previous one starts a new episode (an
episode publishes one every planner period, and an empty one at its end)."""
HORIZON_REPEAT_S = 0.25
"""While it waits for the nodes' first plans, the episode publishes its first reference horizon
again this often (wall s): a node that subscribed after it was sent (roslaunch starts every
process at once) gets it too; a node that has it already takes the same stamp for the same
decision."""
FIRST_PLAN_WAIT_S = 30.0
"""How long (wall s) an episode with planner nodes waits, with the world paused, for every
node's first plan (a node may still be loading its policy)."""
STUDENT_MARGIN_S = 0.15
"""How far past one planner period a student node's piece of plan reaches for a stock pilot
(``AgirosClient.margin_s``; s). The client's 0.1 s suffices for one planner process, and the
teacher flies worse beyond about 0.12 s of latency (its attitude error 1.5x over 60 s with
0.15 s); but with a node per quadrotor and the world on 2 shared cores, plans reached the pilot
up to 0.15 s later than one period after the previous one, and with 0.1 s the queues ran dry
2-8 times in 12 s at a load average of 4-6. With 0.15 s none ran dry in a 12 s flight at
real-time factor 1, but with rosbag recording beside them (both cores saturated) plans left up
to 0.46 s apart and the queues ran dry 0-4 times each (none at real-time factor
0.5). Each node reports its gaps between sends at exit (``PlannerNode.summary``). The student
flies as well with the longer latency (0.019 m against 0.022 m on the embedded backend)."""


# Hermite bases on s in [0, 1]: rows are basis functions, columns the coefficients of s^0..s^5
_QUINTIC = np.array(
    [  # p0, h v0, h^2 a0, h^2 a1, h v1, p1
        [1, 0, 0, -10, 15, -6],
        [0, 1, 0, -6, 8, -3],
        [0, 0, 0.5, -1.5, 1.5, -0.5],
        [0, 0, 0, 0.5, -1, 0.5],
        [0, 0, 0, -4, 7, -3],
        [0, 0, 0, 10, -15, 6],
    ],
    dtype=float,
)
_CUBIC = np.array(
    [  # y0, h dy0, h dy1, y1
        [1, 0, -3, 2, 0, 0],
        [0, 1, -2, 1, 0, 0],
        [0, 0, -1, 1, 0, 0],
        [0, 0, 3, -2, 0, 0],
    ],
    dtype=float,
)


def _basis(coefficients: np.ndarray, s: np.ndarray, order: int) -> np.ndarray:
    """The bases' ``order``-th derivative in s at ``s``: (len(s), number of bases)."""
    powers = np.arange(6)
    factor = np.ones(6)
    for k in range(order):
        factor = factor * np.clip(powers - k, 0, None)
    exponents = np.clip(powers - order, 0, None)
    return (s[:, None] ** exponents[None, :] * factor[None, :]) @ coefficients.T


class SampledReference:
    """A load reference known only as samples over a horizon (from a reference message).

    Between samples the position is the quintic Hermite through p, v, a at both ends (so v and
    a are its derivatives and finite differences of it are smooth, as the formation prior's
    are), the attitude the cubic Hermite through q and q' = q (0, omega) / 2, normalized, and
    the body rate the cubic Hermite through omega and alpha; jerk and alpha are interpolated
    linearly. Times outside the samples are clamped to them."""

    name = "ros-horizon"
    period_s = None

    def __init__(self, arrays: dict[str, np.ndarray]):
        t = np.asarray(arrays["t"], dtype=float)
        if t.ndim != 1 or t.size < 2 or np.any(np.diff(t) <= 0.0):
            raise ValueError(f"reference horizon: expected at least 2 increasing times, got {t}")
        self.arrays = {k: np.asarray(v, dtype=float) for k, v in arrays.items()}
        q = self.arrays["q"]
        for k in range(1, len(q)):  # one hemisphere, so interpolation takes the short way
            if np.dot(q[k], q[k - 1]) < 0.0:
                q[k] = -q[k]
        omega = self.arrays["omega"]
        self.q_dot = 0.5 * quat_multiply_rows(q, np.concatenate([np.zeros((len(q), 1)), omega], axis=1))

    @property
    def t_start(self) -> float:
        return float(self.arrays["t"][0])

    @property
    def t_end(self) -> float:
        return float(self.arrays["t"][-1])

    def covers(self, t_from: float, t_to: float) -> bool:
        return self.t_start - 1e-6 <= t_from and t_to <= self.t_end + 1e-6

    def sample(self, t) -> LoadReferenceSample:
        times = np.clip(np.atleast_1d(np.asarray(t, dtype=float)), self.t_start, self.t_end)
        knots = self.arrays["t"]
        k = np.clip(np.searchsorted(knots, times, side="right") - 1, 0, len(knots) - 2)
        h = (knots[k + 1] - knots[k])[:, None]
        s = (times - knots[k]) / h[:, 0]
        A = self.arrays

        def quintic(order):
            basis = _basis(_QUINTIC, s, order) / h**order
            data = (
                A["p"][k],
                h * A["v"][k],
                h**2 * A["a"][k],
                h**2 * A["a"][k + 1],
                h * A["v"][k + 1],
                A["p"][k + 1],
            )
            return sum(basis[:, b : b + 1] * data[b] for b in range(6))

        def cubic(y, dy):
            basis = _basis(_CUBIC, s, 0)
            data = (y[k], h * dy[k], h * dy[k + 1], y[k + 1])
            return sum(basis[:, b : b + 1] * data[b] for b in range(4))

        def linear(y):
            return y[k] + s[:, None] * (y[k + 1] - y[k])

        q = cubic(A["q"], self.q_dot)
        q /= np.linalg.norm(q, axis=-1, keepdims=True)
        return LoadReferenceSample(
            times,
            quintic(0),
            quintic(1),
            quintic(2),
            linear(A["j"]),
            q,
            cubic(A["omega"], A["alpha"]),
            linear(A["alpha"]),
        )

    def start_pose(self):
        first = self.sample(self.t_start)
        return first.p[0], first.q[0]

    def describe(self) -> dict:
        return {"name": self.name, "t_start": self.t_start, "t_end": self.t_end}


def quat_multiply_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Hamilton products of (k, 4) quaternions (w, x, y, z)."""
    return np.stack([quat_multiply(x, y) for x, y in zip(a, b)])


class PlannerNode:
    """One planner process. ``uav`` set: a decentralized planner for that quadrotor alone."""

    def __init__(
        self,
        config: Config,
        planner,
        *,
        uav: int | None = None,
        quad_names: list[str] | None = None,
        pilot_queue: str = "stock",
        pilot_times: str = "message",
        relay: bool = False,
    ):
        self.config = config
        self.system = config.system
        self.planner = planner
        self.uav = uav
        self.relay = relay
        self.origin = math.floor(time.time()) if relay else 0
        """Times here are ROS times minus this (whole s): a flight's wall-clock times (about
        1.8e9 s) leave a float32 in the student's network no precision at all."""
        if relay and uav is None:
            raise UsageError("--relay: a flight's planner nodes are students (--planner student --uav I)")
        """Plans go to the flight station (``RELAY_TOPIC``), which passes them through the
        safety module, instead of to the pilots; decisions follow the station's reference
        horizons on the wall clock (no ``/clock`` in a flight)."""
        self.names = quad_names or default_quad_names(self.system.n_uavs)
        self.pilot_queue = pilot_queue
        self.pilot_times = pilot_times
        self.period_s = 1.0 / config.simulation.planner_rate_hz
        self.guard = PlanGuard()
        self.reference: SampledReference | None = None
        self.plans_sent = 0
        self.skipped = 0
        self.stale = 0  # plans made from states older than their decision time
        self.horizons_ignored = 0  # reference horizons from another publisher than the episode
        self._clock: float | None = None  # the world's newest /clock (ROS s)
        self._owner: str | None = None  # the node whose horizons this node follows
        self._owner_seen: float | None = None
        self._fresh = True  # the planner is reset before the next plan (a new episode)
        self._failed: int | None = None  # a decision whose attempt found nothing to plan from
        self.retries = 0
        self.nothing_why = ""
        self.plan_times: list[float] = []
        self.send_gaps: list[float] = []  # between plans leaving, on the world's clock (s)
        self._last_sent: float | None = None
        self.uavs = [uav] if uav is not None else list(range(self.system.n_uavs))
        if uav is not None and not 0 <= uav < self.system.n_uavs:
            raise ValueError(f"--uav: expected 0 to {self.system.n_uavs - 1}, got {uav}")

    def connect(self) -> None:
        rospy = ros1.rospy()
        m = ros1.messages()
        margin = {} if self.uav is None else {"margin_s": STUDENT_MARGIN_S}
        world = None if self.relay else ros1.world_info()
        self._state_wait_s = LOCKSTEP_STATE_WAIT_S if world and world.get("lockstep") else STATE_WAIT_S
        """How long a plan waits for the states of its decision time (a world in lockstep
        stands until the plan has come: waiting there costs nothing)."""
        self._subscribers = [
            rospy.Subscriber(ros1.LOAD_HORIZON_TOPIC, m.Reference, self._on_horizon, queue_size=2)
        ]
        if self.relay:  # no pilot topic is touched: the own state is read, nothing sent
            assert self.uav is not None  # a relay plans for one quadrotor (checked in __init__)
            self.clients = {}
            own_state = ros1.STATE_TOPIC.format(quad=self.names[self.uav])
            self._subscribers.append(
                rospy.Subscriber(own_state, m.QuadState, self._on_own_state, queue_size=10)
            )
        else:
            self.clients = {
                i: AgirosClient(
                    self.names[i],
                    self.pilot_queue,
                    self.period_s,
                    times=self.pilot_times,
                    clock=lambda: self._clock,
                    **margin,
                )
                for i in self.uavs
            }
        if self.uav is None:
            self.observer = WorldObserver(
                self.config, self.names, [self.clients[i] for i in self.uavs], clock=lambda: self._clock
            )
        else:
            self._own, self._load = _Stream(lambda: self._clock), _Stream(lambda: self._clock)
            if not self.relay:
                self.clients[self.uav].on_state = self._on_own_state
            self._subscribers.append(
                rospy.Subscriber(ros1.LOAD_POSE_TOPIC, m.PoseStamped, self._on_load_pose, queue_size=10)
            )
        # decisions on the world's clock: the episode's first one when its first reference
        # horizon arrives (the world is paused for it), then every time the clock crosses one
        # more period after it (a rospy.Timer on simulated time was measured to skip or double
        # ticks, and a skipped plan drains a stock pilot's queue)
        self._anchor: float | None = None  # ROS time of the episode's first decision
        self._last_horizon: float | None = None  # stamp of the newest reference horizon
        self._decision = -1
        self._decision_time: float | None = None
        self._due = threading.Event()
        self._stop = threading.Event()
        self._subscribers.append(rospy.Subscriber("/clock", m.Clock, self._on_clock, queue_size=10))
        self._relays = {
            i: rospy.Publisher(RELAY_TOPIC.format(quad=self.names[i]), m.Reference, queue_size=5)
            for i in self.uavs
        }
        self._worker = threading.Thread(target=self._plan_when_due, daemon=True, name="cableload-planner")
        self._worker.start()

    def _on_horizon(self, msg) -> None:
        """A reference horizon. The episode that publishes them owns this node: while its
        horizons keep coming, one from another publisher (an empty one would end the
        episode here) is ignored and counted (``horizons_ignored``)."""
        caller = ros1.caller_of(msg)
        clock = self._clock
        owned = (
            self._owner is not None
            and caller != self._owner
            and clock is not None
            and self._owner_seen is not None
            and clock - self._owner_seen < NEW_EPISODE_GAP_S
        )
        if owned:
            self.horizons_ignored += 1
            return
        if not msg.points:  # the episode is over: send nothing more (the pilots will hover)
            self.reference = None
            self._anchor = self._last_horizon = None
            self._last_sent = None
            self._owner = self._owner_seen = None
            for client in self.clients.values():
                client.reset_queue()
            return
        try:
            arrays = ros1.load_setpoints_arrays(msg, self.origin)
            reference = SampledReference(arrays)
        except ValueError:
            self.horizons_ignored += 1
            return
        self.reference = reference
        self._owner, self._owner_seen = caller, clock
        stamp, last = ros1.seconds_since(msg.header.stamp, self.origin), self._last_horizon
        self._last_horizon = stamp
        if self._anchor is not None and last is not None and stamp - last < NEW_EPISODE_GAP_S:
            periods = (stamp - self._anchor) / self.period_s
            if self.relay:  # the station's horizon is its decision: plan for it now
                if stamp > last:
                    if self._due.is_set():
                        self.skipped += 1
                    self._decision = max(self._decision + 1, round(periods))
                    self._decision_time = stamp
                    self._due.set()
                return
            if abs(periods - round(periods)) < 1e-3:
                self._retry_if_failed()  # a newer horizon may cover what the last did not
                return
        # an episode starts (or one whose end was missed was replaced): decide now, with the
        # planner's memory of any earlier episode forgotten (history, warm start)
        self._anchor = stamp
        self._decision = 0
        self._decision_time = stamp
        self._fresh = True
        self._due.set()

    def _on_load_pose(self, msg) -> None:
        q = ros1.wxyz(msg.pose.orientation)
        self._load.add(
            ros1.seconds_since(msg.header.stamp, self.origin),
            ros1.xyz(msg.pose.position),
            q / np.linalg.norm(q),
        )

    def _on_own_state(self, msg) -> None:
        _, p, q, v, w, _ = ros1.from_quad_state(msg)
        self._own.add(ros1.seconds_since(msg.header.stamp, self.origin), p, q, v, w)

    def _observation(self) -> LocalObservation | None:
        """The own state and the load's pose at one time: the later of the two streams'
        newest stamps that both have reached (interpolated where they are not sampled
        together), so the cable's two ends are seen at the same instant."""
        assert self.uav is not None  # (a node for one quadrotor)
        own, load = self._own.latest(), self._load.latest()
        if own is None or load is None:
            return None
        t = min(own[0], load[0])
        # both streams have rows (their latest is not None), so both give values
        (p, q, v, w), (load_p, load_q) = cast(
            "tuple[list[np.ndarray], list[np.ndarray]]",
            (self._own.at(np.array([t])), self._load.at(np.array([t]))),
        )
        return LocalObservation.of(
            t,
            load_p[0],
            load_q[0],
            p[0],
            v[0],
            q[0],
            w[0],
            self.system.load.attachments[self.uav],
            self.system.quadrotors[self.uav].attachment,
        )

    def _on_clock(self, msg) -> None:
        now = msg.clock.to_sec()
        self._clock = now
        anchor = self._anchor
        if anchor is None:
            return
        decision = ros1.decision_index(now - anchor, self.period_s)
        if decision == self._decision:
            self._retry_if_failed()  # the states of the decision may have come meanwhile
        if decision > self._decision:
            if self._due.is_set():
                self.skipped += 1  # the previous plan is still being made
            self._decision = decision
            self._due.set()

    def _plan_when_due(self) -> None:
        while not self._stop.is_set():
            if self._due.wait(timeout=0.1):
                self._due.clear()
                decision = self._decision
                self._failed = None if self.plan_once() else decision

    def _nothing(self, why: str) -> bool:
        """No plan for now, and why (the summary gives the last reason)."""
        self.nothing_why = why
        return False

    def _retry_if_failed(self) -> None:
        """Plan the current decision again if its attempt found nothing to plan from (the
        episode's reference horizon lagging behind the world's clock, states not in yet): a
        world in lockstep waits for this decision's plan and would wait for nothing."""
        if self._failed is not None and self._failed == self._decision and not self._due.is_set():
            self._failed = None
            self.retries += 1
            self._due.set()

    def _known_until(self) -> float | None:
        """The newest instant this node knows what it plans from at (None: not yet)."""
        if self.uav is None:
            return self.observer.latest_time()
        newest = [stream.latest() for stream in (self._own, self._load)]
        return None if None in newest else min(item[0] for item in newest)

    def plan_once(self) -> bool:
        """Plan and send once; False when there is nothing to plan from yet."""
        reference = self.reference
        if reference is None:
            return False
        anchor = self._anchor
        if anchor is None:
            return False
        decided = self._decision_time if self.relay else anchor + self._decision * self.period_s
        assert decided is not None  # _decision_time is set with the anchor, never unset
        wait_until_known(self._known_until, decided, self._state_wait_s)  # the world's states then
        if self._fresh:
            self._fresh = False
            self.planner.reset()
        start = time.perf_counter()
        if self.uav is not None:
            obs = self._observation()
            if obs is None:
                return self._nothing("no state yet")
            if not reference.covers(obs.t - LOOK_BACK_S, obs.t + HORIZON_S):
                return self._nothing(
                    f"reference [{reference.t_start:.2f}, {reference.t_end:.2f}] s short of {obs.t:.2f} s"
                )
            encoded = self.planner.observe_local(self.uav, obs, reference)
            plans = {self.uav: self.planner.act([encoded], obs.uav_p[None], [self.uav])[0]}
            state_t, positions = obs.t, {self.uav: obs.uav_p}
        else:
            if not self.observer.ready():
                return self._nothing("no state yet")
            state = self.observer.state()
            if not reference.covers(state.t - LOOK_BACK_S, state.t + HORIZON_S):
                return self._nothing("reference short")
            plans = dict(enumerate(self.planner.plan(state, reference)))
            state_t, positions = state.t, dict(enumerate(state.uav_p))
        if self.reference is None:  # the episode ended while this plan was made
            return False
        if state_t < decided - 1e-9:
            self.stale += 1
        now = ros1.rospy().get_time()
        stand_in = _PositionOnly(state_t, positions, self.system.n_uavs)
        for i, plan in plans.items():
            checked = self.guard.check(i, plan, stand_in)
            if self.relay:
                self._relays[i].publish(ros1.reference_message(checked, self.origin))
                continue
            if self.clients[i].sent == 0:  # the first plan reaches every subscriber
                self.clients[i].wait_for_subscribers()
            self.clients[i].send(checked, now=now)
        self.plan_times.append(time.perf_counter() - start)
        if self._last_sent is not None:
            self.send_gaps.append(now - self._last_sent)
        self._last_sent = now
        self.plans_sent += 1
        return True

    def summary(self) -> str:
        """Plans sent and skipped, the time to make one, and the gaps between sends on the
        world's clock: a gap over one period plus the client's margin empties a stock pilot's
        queue."""
        text = (
            f"{self.plans_sent} plans sent, {self.skipped} decisions skipped, {self.stale} "
            f"made from states older than their decision, {self.stamps_dropped} messages "
            f"dropped for their stamps, {self.horizons_ignored} reference horizons ignored, "
            f"{self.retries} decisions retried" + (f" (last: {self.nothing_why})" if self.retries else "")
        )
        if self.guard.replaced:
            text += f"; {self.guard.replaced} plans replaced by the guard (first: {self.guard.reasons[0]})"
        report = self.planner.report()
        refused = {k: report[k] for k in ("bad_outputs", "bad_observations") if report.get(k)}
        if refused:  # the student's own fallbacks: outputs or observations it could not use
            text += "; " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in refused.items())
        if self.plan_times:
            ms = 1e3 * np.asarray(self.plan_times)
            text += (
                f"; making one: median {np.median(ms):.1f} ms, 99th percentile "
                f"{np.percentile(ms, 99):.1f} ms, max {ms.max():.1f} ms"
            )
        if self.send_gaps:
            gaps = np.asarray(self.send_gaps)
            limit = self.period_s + (0.0 if self.relay else next(iter(self.clients.values())).margin_s)
            text += (
                f"; gap between sends: max {gaps.max():.3f} s, {int(np.sum(gaps > limit))} over {limit:.2f} s"
            )
        return text

    @property
    def stamps_dropped(self) -> int:
        """Messages dropped for stamps from the future, the far past or repeated (``_Stream``)."""
        if self.uav is None:
            return self.observer.stamps_dropped
        return self._own.dropped_total + self._load.dropped_total

    def close(self) -> None:
        self._stop.set()
        self._worker.join(timeout=2.0)
        for sub in self._subscribers:
            sub.unregister()
        for client in self.clients.values():
            client.close()


class _PositionOnly:
    """What ``PlanGuard.check`` reads of a state (time and positions), for a node that knows
    only its own quadrotor."""

    def __init__(self, t: float, positions: dict, n: int):
        self.t = t
        self.uav_p = np.full((n, 3), np.nan)
        for i, p in positions.items():
            self.uav_p[i] = p


def run_node(
    config: Config,
    planner,
    *,
    uav: int | None,
    pilot_queue: str,
    pilot_times: str = "message",
    quad_names: list[str] | None = None,
    wait_s: float = 120.0,
    relay: bool = False,
) -> PlannerNode:
    """Start a planner node in this process (after the world has set ``/use_sim_time``; with
    ``relay``, a flight's node on the wall clock, once a master answers)."""
    node = PlannerNode(
        config,
        planner,
        uav=uav,
        quad_names=quad_names,
        pilot_queue=pilot_queue,
        pilot_times=pilot_times,
        relay=relay,
    )
    if relay:
        from backends.gazebo import master_reachable, master_uri

        if not master_reachable(timeout=1.0):
            raise ros1.RosFailure(f"no ROS master at {master_uri()}")
        _warm_up(config, planner)  # in a flight nothing waits while a first plan is slow
    else:
        _wait_for_sim_time(wait_s)
    init_node("cableload_teacher" if uav is None else f"cableload_student_{node.names[uav]}")
    node.connect()
    ros1.freeze_heap()  # no full garbage collection stops the node for 0.1-0.4 s mid-flight
    return node


def _warm_up(config: Config, planner, plans: int = 5) -> None:
    """Plan a few times from hover and forget it: the first calls of a network (torch's
    optimizing executor) or a solver take far longer than the rest."""
    from cableload_sim.physics.simulator import Simulator
    from cableload_sim.trajectories import make_reference

    reference = make_reference("eight-medium")
    sim = Simulator(config)
    sim.reset(*reference.start_pose())
    for _ in range(plans):
        planner.plan(sim.world_state(), reference)
    planner.reset()


def _wait_for_sim_time(wait_s: float) -> None:
    """Block until the world has set ``/use_sim_time`` (so this node runs on its clock)."""
    import rosgraph

    from backends.gazebo import master_reachable, master_uri

    if not master_reachable(timeout=1.0):
        raise ros1.RosFailure(f"no ROS master at {master_uri()}")
    master = rosgraph.Master("/cableload_node_setup")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if master.hasParam("/use_sim_time") and master.getParam("/use_sim_time"):
                return
        except Exception:  # noqa: BLE001 - the master may be starting
            pass
        time.sleep(0.1)
    raise ros1.RosFailure(
        f"/use_sim_time not set within {wait_s:g} s: start the world (`cableload world` or Gazebo) first"
    )


RELAY_TOPIC = "/{quad}/cableload/plan"
"""A flight's planner node publishes its plans here (``agiros_msgs/Reference``, ROS times): the
flight station checks them with the safety module and sends the pilots what passes."""
NODE_SILENCE_S = 1.0
"""A planner node from which no plan has come for this much world time (s) is lost: killed,
stuck or disconnected (``node_lost``). A stock pilot's queue has run dry long before."""


class NodePlanners:
    """The planner seat of an episode whose planners run as nodes: each period it publishes the
    load reference over the horizon for them, plans nothing, and watches that every node keeps
    planning (``health``: ``node_lost`` when none answered the first decision within
    ``first_plan_wait_s``, or one has sent nothing for ``NODE_SILENCE_S``). The plans are seen
    on the pilots' trajectory topics by the backend's ``PilotWatch``es."""

    name = "nodes"
    warm_up = False  # nothing to compile here, and the nodes plan first with the world paused

    def __init__(self, backend, first_plan_wait_s: float = FIRST_PLAN_WAIT_S):
        if not (math.isfinite(first_plan_wait_s) and first_plan_wait_s > 0.0):
            raise UsageError(f"--node-wait: expected a positive number of seconds, got {first_plan_wait_s!r}")
        self.backend = backend
        backend.planner_nodes = True
        self.first_plan_wait_s = first_plan_wait_s
        self._base = [0] * len(backend.names)
        self._failure: str | None = None
        self._started = False

    @property
    def received(self) -> list[int]:
        """Plans seen per quadrotor since the episode started."""
        return [w.seen - base for w, base in zip(self.backend.watches, self._base)]

    def reset(self) -> None:
        self._base = [w.seen for w in self.backend.watches]
        self._failure = None
        self._started = False

    def plan(self, state: WorldState, reference) -> list:
        # stamped with the decision's time: nodes decide every period from the first one
        self.backend.publish_reference(reference, self.backend.decision_time)
        if self.backend.paused_for_first_plans:  # wait for every node's first plan
            start = sent = time.monotonic()
            while not all(self.received) and time.monotonic() - start < self.first_plan_wait_s:
                time.sleep(0.002)
                if time.monotonic() - sent > HORIZON_REPEAT_S:  # for a node subscribing late
                    self.backend.publish_reference(reference, self.backend.decision_time)
                    sent = time.monotonic()
            missing = [name for name, count in zip(self.backend.names, self.received) if not count]
            self.backend.trust([set(w.senders) for w in self.backend.watches])
            if missing:
                self._failure = (
                    f"no plan from a planner node for {', '.join(missing)} within "
                    f"{self.first_plan_wait_s:g} s of the first decision: start one "
                    "`cableload node --planner student --uav I` per quadrotor (or one "
                    "`cableload node --planner teacher`) on this master before the episode"
                )
            self._started = True
        return []

    def health(self) -> BackendHealth | None:
        if self._failure is None and self._started and self.backend.clock is not None:
            now = self.backend.clock
            silent = [
                (name, now - w.last_seen)
                for name, w in zip(self.backend.names, self.backend.watches)
                if w.last_seen is None or now - w.last_seen > NODE_SILENCE_S
            ]
            if silent:
                self._failure = (
                    "no plan from the planner node of "
                    + ", ".join(f"{name} for {gap:.1f} s" for name, gap in silent)
                    + (" of world time (the node was killed, is stuck or lost its connection)")
                )
        if self._failure is None:
            return None
        return BackendHealth(ok=False, messages=[self._failure], status="node_lost")

    def report(self) -> dict:
        return {"node_plans_min": min(self.received), "node_plans_total": sum(self.received)}
