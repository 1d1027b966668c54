"""Pose to pose: from one load pose to another along the smoothstep, at rest at both ends."""

from __future__ import annotations

import numpy as np

from cableload_sim.rotations import (
    quat_conjugate,
    quat_exp,
    quat_log,
    quat_multiply,
    quat_to_euler,
)
from cableload_sim.trajectories.jets import LoadReferenceSample, _as_times, smoothstep_jet
from cableload_sim.trajectories.options import _positive, _unit_quaternion, _vector
from cableload_sim.trajectories.references import LoadReference


class PoseToPose(LoadReference):
    """From a start pose to a goal pose in ``duration_s`` seconds, then hold the goal.

    Position ``p0 + s(t) (p1 - p0)`` and attitude ``q0 (x) exp(s(t) log(q0^-1 q1))`` share the
    smoothstep ``s(t) = SMOOTHSTEP(t / duration_s)`` (zero velocity, acceleration and jerk at both
    ends), so omega (body) = s'(t) r and alpha = s''(t) r with r the shortest rotation vector.
    """

    def __init__(self, start_p, start_q, goal_p, goal_q, duration_s: float, name: str = "pose-to-pose"):
        self.name = name
        self.start_p = _vector(start_p, 3, "start_p", "position (m)")
        self.goal_p = _vector(goal_p, 3, "goal_p", "position (m)")
        self.start_q = _unit_quaternion(start_q, "start_q")
        goal_q = _unit_quaternion(goal_q, "goal_q")
        self.duration_s = _positive("pose-to-pose", "duration", duration_s, "s")
        self.rotation = quat_log(quat_multiply(quat_conjugate(self.start_q), goal_q))
        self.goal_q = quat_multiply(self.start_q, quat_exp(self.rotation))  # goal_q or -goal_q

    @property
    def period_s(self) -> float:
        return self.duration_s

    def sample(self, t) -> LoadReferenceSample:
        t = _as_times(t)
        s = smoothstep_jet(np.clip(t / self.duration_s, 0.0, 1.0), self.duration_s)
        shift, r = self.goal_p - self.start_p, self.rotation
        q = quat_multiply(self.start_q, quat_exp(s.value[:, None] * r))
        return LoadReferenceSample(
            t,
            self.start_p + s.value[:, None] * shift,
            s.d1[:, None] * shift,
            s.d2[:, None] * shift,
            s.third[:, None] * shift,
            q,
            s.d1[:, None] * r,
            s.d2[:, None] * r,
        )

    def describe(self) -> dict:
        pose = lambda p, q: [*map(float, p), *map(float, np.degrees(quat_to_euler(q)))]  # noqa: E731
        return {
            "name": self.name,
            "orientation": "interpolated",
            "start": pose(self.start_p, self.start_q),
            "goal": pose(self.goal_p, self.goal_q),
            "duration": self.duration_s,
            "period_s": self.duration_s,
        }
