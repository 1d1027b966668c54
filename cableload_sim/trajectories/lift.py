"""A flight from the ground: a path reference wrapped into take-off, lift, the path, descent,
set-down and landing (``cableload simulate --from-ground``).

The load reference, phase by phase (t in s from the start):

1. ``climb``: the load rests on the ground below the path's start (its box centre at
   ``rest_z``) while the quadrotors climb from where they sit on the ground to their hover
   slots, ``climb_s``, then hold ``settle_s``; the cables reach their length at the slots,
   slack no longer, still without tension;
2. ``lift``: the load rises to the path's start along a smoothstep in ``lift_s``: the cables
   stretch until they carry its weight, and it leaves the ground;
3. ``path``: ``laps`` laps of the path, from rest to rest: the path's own ramp up, and the same
   ramp down at the end (the path time ``tau(t) = W(t) - W(t - T + r)``, W the path's warp of
   ramp r, T = laps * lap + r), so it stops where it started;
4. ``descent``: back down to ``rest_z`` in ``lift_s``: the load is set down, the cables lose
   their tension as the formation reaches its slots over the resting load; hold ``settle_s``;
5. ``land``: the quadrotors descend to where they took off from in ``climb_s`` and idle.

Every phase starts and ends at rest with zero acceleration and jerk (C^3 smoothsteps). The
quadrotors' part is ``climb(t)``, the share of the way from their resting places to their slots
(1 in phases 2 to 4), which formation planners follow. ``airborne(t)`` marks the times whose
load reference is off the ground (phases 2 to 4): the episode's tracking metrics are taken over
them only, the rest on the ground being no test of a planner.
"""

from __future__ import annotations

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import UsageError
from cableload_sim.trajectories.jets import (
    Jet,
    LoadReferenceSample,
    _as_times,
    smoothstep_jet,
    time_warp,
)
from cableload_sim.trajectories.references import LoadReference, LoopReference

REST_Z = 0.075
"""Default height of the resting load's box centre: half the paper's 0.15 m basket (m)."""


POSITIVE = checks.positive.raising(UsageError)
NON_NEGATIVE = checks.non_negative.raising(UsageError)


class FromGround(LoadReference):
    """``path`` flown from the ground and back (see the module docstring)."""

    def __init__(
        self,
        path: LoadReference,
        *,
        rest_z: float = REST_Z,
        climb_s: float = 3.0,
        settle_s: float = 1.0,
        lift_s: float = 4.0,
        laps: float = 1.0,
    ):
        if not isinstance(path, LoopReference):
            raise UsageError(
                f"from the ground: expected a looped path (eight, circle, square, "
                f"loop, track), got {getattr(path, 'name', path)!r}"
            )
        for name, value in (("rest_z", rest_z), ("climb_s", climb_s), ("lift_s", lift_s), ("laps", laps)):
            POSITIVE(f"from the ground: {name}", value)
        NON_NEGATIVE("from the ground: settle_s", settle_s)
        self.path = path
        self.name = path.name
        self.rest_z, self.climb_s, self.settle_s = float(rest_z), float(climb_s), float(settle_s)
        self.lift_s, self.laps = float(lift_s), float(laps)
        self.path_s = self.laps * path.period_s + path.ramp_s
        self.t_lift = self.climb_s + self.settle_s
        self.t_path = self.t_lift + self.lift_s
        self.t_descent = self.t_path + self.path_s
        self.t_land = self.t_descent + self.lift_s + self.settle_s
        self.t_end = self.t_land + self.climb_s
        start = path.sample(0.0)
        end = self._path_sample(np.array([self.path_s]))
        if start.p[0, 2] <= self.rest_z:
            raise UsageError(
                f"from the ground: the path's height {start.p[0, 2]!r} m must be "
                f"above the resting load's {self.rest_z!r} m"
            )
        self._start, self._end = start, end

    @property
    def period_s(self) -> float:
        """The whole flight, ground to ground (s)."""
        return self.t_end

    def _stop_warp(self, tau_t: np.ndarray) -> Jet:
        ramp = self.path.ramp_s
        up = time_warp(tau_t, ramp)
        down = time_warp(tau_t - (self.path_s - ramp), ramp)
        return Jet(up.value - down.value, up.d1 - down.d1, up.d2 - down.d2, up.third - down.third)

    def _path_sample(self, tau_t: np.ndarray) -> LoadReferenceSample:
        return self.path.sample_warped(tau_t, self._stop_warp(tau_t))

    def sample(self, t) -> LoadReferenceSample:
        t = _as_times(t)
        k = len(t)
        p, v, a, j = (np.zeros((k, 3)) for _ in range(4))
        q = np.zeros((k, 4))
        omega, alpha = np.zeros((k, 3)), np.zeros((k, 3))
        on_path = (t >= self.t_path) & (t < self.t_descent)
        if on_path.any():
            s = self._path_sample(t[on_path] - self.t_path)
            p[on_path], v[on_path], a[on_path], j[on_path] = s.p, s.v, s.a, s.j
            q[on_path], omega[on_path], alpha[on_path] = s.q, s.omega, s.alpha
        before = t < self.t_path
        for mask, pose, t0 in (
            (before, self._start, self.t_lift),
            (t >= self.t_descent, self._end, self.t_descent),
        ):
            if not mask.any():
                continue
            air = pose.p[0]
            rest = np.array([air[0], air[1], self.rest_z])
            x = np.clip((t[mask] - t0) / self.lift_s, 0.0, 1.0)
            step = smoothstep_jet(x, self.lift_s)
            # up from rest before the path, down to rest after it
            sign, base = (1.0, rest) if pose is self._start else (-1.0, air)
            shift = sign * (air - rest)
            p[mask] = base + step.value[:, None] * shift
            v[mask] = step.d1[:, None] * shift
            a[mask] = step.d2[:, None] * shift
            j[mask] = step.third[:, None] * shift
            q[mask] = pose.q[0]
        return LoadReferenceSample(t, p, v, a, j, q, omega, alpha)

    def climb(self, t) -> Jet:
        """The quadrotors' share of the way from their resting places to their slots (-):
        0 -> 1 in ``climb_s`` from t = 0, 1 -> 0 in ``climb_s`` from the landing's start."""
        t = _as_times(t)
        up = smoothstep_jet(np.clip(t / self.climb_s, 0.0, 1.0), self.climb_s)
        down = smoothstep_jet(np.clip((t - self.t_land) / self.climb_s, 0.0, 1.0), self.climb_s)
        return Jet(up.value - down.value, up.d1 - down.d1, up.d2 - down.d2, up.third - down.third)

    def airborne(self, t) -> np.ndarray:
        """Whether the load reference is off the ground at each of the times ``t`` (K,)."""
        t = _as_times(t)
        return (t > self.t_lift) & (t < self.t_descent + self.lift_s)

    def describe(self) -> dict:
        return {
            **self.path.describe(),
            "from_ground": True,
            "rest_z": self.rest_z,
            "climb_s": self.climb_s,
            "settle_s": self.settle_s,
            "lift_s": self.lift_s,
            "laps": self.laps,
            "path_s": self.path_s,
            "period_s": self.t_end,
            "lift_off_s": self.t_lift,
            "set_down_s": self.t_descent + self.lift_s,
        }


def from_ground(path: LoadReference, **options) -> FromGround:
    """``path`` flown from the ground (options: see ``FromGround``)."""
    return FromGround(path, **options)
