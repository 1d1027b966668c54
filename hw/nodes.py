"""Planner nodes in a flight: the students run as processes of their own, one per quadrotor
(``cableload node --planner student --uav I --relay``), and their plans still pass the safety
module.

``RelayedNodes`` stands where the planner would in the flight's episode. Each period it
publishes the load reference over the horizon (``/cableload/load/reference_horizon``, stamped
with the decision's time: the nodes plan at once for it), waits up to ``wait_s`` for every
node's plan of that decision on ``/<quad>/cableload/plan``, and returns the plans: the episode
runner then checks them (guard, safety module) and sends the pilots what passes. A node whose
plan for a decision is late has its newest plan returned again (the safety module refuses it
once it no longer starts now); one silent for ``NODE_SILENCE_S`` ends the flight
``node_lost``.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from backends import ros1
from backends.base import BackendHealth
from backends.planner_node import NODE_SILENCE_S, RELAY_TOPIC
from cableload_sim.physics.world import UavTrajectory, WorldState

WAIT_S = 0.05
"""How long (s) a decision waits for the nodes' plans; a student plans in about a millisecond."""
HORIZON_S = 2.5
LEAD_S = 0.2
STEP_S = 0.02


class RelayedNodes:
    """The students of a flight, as nodes; see the module's docstring."""

    name = "student"
    warm_up = False  # the nodes have their own policies, loaded and warmed in their processes

    def __init__(self, backend, first_plan_wait_s: float = 30.0, wait_s: float = WAIT_S):
        rospy = ros1.rospy()
        m = ros1.messages()
        self.backend = backend
        self.names = backend.flight.names
        self.first_plan_wait_s = first_plan_wait_s
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._plans: list[tuple[float, UavTrajectory] | None] = [None] * len(self.names)
        self._received_at: list[float | None] = [None] * len(self.names)
        self.late = 0
        self._failure: str | None = None
        self._asked_at: float | None = None
        self.pub_horizon = rospy.Publisher(ros1.LOAD_HORIZON_TOPIC, m.Reference, queue_size=2)
        self._subscribers = [
            rospy.Subscriber(RELAY_TOPIC.format(quad=name), m.Reference, self._on_plan(i), queue_size=5)
            for i, name in enumerate(self.names)
        ]

    def _on_plan(self, i: int):
        def callback(msg):
            try:
                arrays = ros1.trajectory_arrays(msg)
                plan = UavTrajectory(
                    arrays["t"], arrays["p"], arrays["v"], arrays["a"], arrays["j"], arrays["w"]
                )
            except (ValueError, KeyError):
                return  # malformed: as if it never came (the node's silence is watched)
            with self._cond:
                self._plans[i] = (time.time(), plan)
                self._received_at[i] = time.time()
                self._cond.notify_all()

        return callback

    def reset(self) -> None:
        with self._lock:
            self._plans = [None] * len(self.names)
            self._received_at = [None] * len(self.names)
        self._failure = None
        self.late = 0

    def publish_reference(self, reference, t: float) -> None:
        """The load reference around episode time ``t``, in ROS times, stamped ``t``."""
        t0 = self.backend.t0
        times = t + np.arange(-LEAD_S, HORIZON_S + 1e-9, STEP_S)
        self.pub_horizon.publish(ros1.load_setpoints_message(t, times, reference.sample(times), t0))

    def prime(self, state: WorldState, reference) -> None:
        """Publish this decision's reference without waiting: the nodes start planning (their
        histories fill, their first plans come) before they are handed the flight."""
        self._asked_at = time.time()
        self.publish_reference(reference, state.t)

    def plan(self, state: WorldState, reference) -> list[UavTrajectory]:
        asked = self._asked_at = time.time()
        first = any(p is None for p in self._plans)  # a node has not planned yet: wait for it
        self.publish_reference(reference, state.t)
        limit = self.first_plan_wait_s if first else self.wait_s
        deadline = asked + limit
        decided = state.t + self.backend.t0 - 1e-3  # a node plans from the decision's instant on
        with self._cond:
            while True:
                fresh = [p is not None and p[1].t[0] >= decided for p in self._plans]
                if all(fresh) or time.time() >= deadline:
                    break
                self._cond.wait(timeout=min(0.002, max(deadline - time.time(), 0.0)))
                if first and time.time() - asked > 0.25:  # a node that subscribed late
                    self.publish_reference(reference, state.t)
                    asked_again = time.time()
                    deadline = max(deadline, asked_again)
            plans = list(self._plans)
        missing = [name for name, p in zip(self.names, plans) if p is None]
        if missing:
            self._failure = (
                f"no plan from the planner node of {', '.join(missing)} within {limit:g} s: start "
                "`cableload node --planner student --uav I --relay` for every quadrotor"
            )
            from planners.base import hover_plan

            return [hover_plan(state.t, state.uav_p[i]) for i in range(len(self.names))]
        self.late += sum(not f for f in fresh)
        t0 = self.backend.t0
        received = [plan for _, plan in (entry for entry in plans if entry is not None)]
        return [UavTrajectory(p.t - t0, p.p, p.v, p.a, p.j, p.body_rates) for p in received]  # episode times

    def health(self) -> BackendHealth | None:
        now = time.time()
        asked = self._asked_at is not None and now - self._asked_at < 0.5  # the nodes are flying
        silent = [
            (name, now - at)
            for name, at in zip(self.names, self._received_at)
            if asked and at is not None and now - at > NODE_SILENCE_S
        ]
        if silent and self._failure is None:
            self._failure = "no plan from the planner node of " + ", ".join(
                f"{name} for {gap:.1f} s" for name, gap in silent
            )
        if self._failure is None:
            return None
        return BackendHealth(ok=False, messages=[self._failure], status="node_lost")

    def report(self) -> dict:
        return {"node_plans_late": self.late}

    def close(self) -> None:
        for sub in self._subscribers:
            sub.unregister()
        self.pub_horizon.unregister()
