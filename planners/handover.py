"""From the ground with any planner: a lift planner takes off and lifts the load, the chosen
planner flies the path once the load hangs free, the lift planner sets it down and lands.

A reference from the ground (``cableload_sim.trajectories.lift.FromGround``) starts with the
load resting on the floor and slack cables, which neither the teacher's model (no ground, taut
cables) nor the student's training covers. ``HandOver`` wraps such a planner: before the path
phase, and until the load hangs free, the formation planner that knows the lift flies
(``formation-tilt``); from then until the path's end the chosen planner flies (it plans
alongside for ``shadow_s`` before, its plans not sent, so that its history and warm start are
its own at the hand-over); from the start of the descent the lift planner flies again, sets the
load down and lands. The load hangs free when it is ``free_height_m`` above where it rested
and its cables carry at least ``free_tension_share`` of its weight. A load that is not free by
the path phase keeps the lift planner until it is (counted in the report:
``handover_delay_s``).

The hand-over needs no shared state: the chosen planner starts from the state as observed, the
lift planner remembers where each quadrotor stood at its first plan (and lands them there).
"""

from __future__ import annotations

import numpy as np

from cableload_sim.params import SystemParams
from cableload_sim.physics.world import UavTrajectory, WorldState


def from_ground(reference) -> bool:
    """Whether ``reference`` is flown from the ground (it has the lift's phases)."""
    return getattr(reference, "climb", None) is not None and hasattr(reference, "t_path")


class HandOver:
    """``planner`` on the path of a reference from the ground, ``lift`` around it."""

    def __init__(
        self,
        planner,
        lift,
        system: SystemParams,
        free_height_m: float = 0.1,
        free_tension_share: float = 0.8,
        shadow_s: float = 1.0,
    ):
        self.planner = planner
        self.lift = lift
        self.system = system
        self.name = planner.name
        self.free_height_m = float(free_height_m)
        self.free_tension_share = float(free_tension_share)
        self.shadow_s = float(shadow_s)
        self.reset()

    def reset(self) -> None:
        self.planner.reset()
        self.lift.reset()
        self.phase = "lift"
        self.rest_z: float | None = None
        self.handed_over_at: float | None = None
        self.handed_back_at: float | None = None
        self.delay_s = 0.0

    def hangs_free(self, state: WorldState) -> bool:
        weight = self.system.load.mass * self.system.gravity
        lift = float(np.sum(state.cable_tension * state.cable_dir[:, 2]))
        assert self.rest_z is not None
        return state.load_p[2] > self.rest_z + self.free_height_m and lift >= self.free_tension_share * weight

    def plan(self, state: WorldState, reference) -> list[UavTrajectory]:
        if not from_ground(reference):
            return self.planner.plan(state, reference)
        if self.rest_z is None:
            self.rest_z = float(state.load_p[2])
        t = state.t
        if self.phase == "lift" and t >= reference.t_path:
            if self.hangs_free(state):
                self.phase = "path"
                self.handed_over_at = t
                self.delay_s = t - reference.t_path
            else:
                self.delay_s = t - reference.t_path
        if self.phase == "path" and t >= reference.t_descent:
            self.phase = "set_down"
            self.handed_back_at = t
        if self.phase == "path":
            return self.planner.plan(state, reference)
        plans = self.lift.plan(state, reference)
        if self.phase == "lift" and t >= reference.t_path - self.shadow_s:
            self._shadow(state, reference)
        return plans

    def _shadow(self, state: WorldState, reference) -> None:
        """Let the chosen planner plan before it flies (its plans are not sent): a student's
        observation history fills and a teacher's solver is warm at the hand-over; planner
        nodes get the reference and start planning."""
        prime = getattr(self.planner, "prime", None)
        if prime is not None:
            prime(state, reference)
        else:
            self.planner.plan(state, reference)

    def health(self):
        inner = getattr(self.planner, "health", None)
        return inner() if inner is not None else None

    def report(self) -> dict:
        out = dict(self.planner.report())
        out["handover_at_s"] = self.handed_over_at if self.handed_over_at is not None else float("nan")
        out["handback_at_s"] = self.handed_back_at if self.handed_back_at is not None else float("nan")
        out["handover_delay_s"] = self.delay_s
        return out

    def __getattr__(self, name):
        # what the episode asks of the chosen planner (warm-up, nodes' options) is its own
        if name in ("planner", "lift"):
            raise AttributeError(name)
        return getattr(self.planner, name)
