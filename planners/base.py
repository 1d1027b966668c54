"""The Planner protocol and the guard every plan passes before it is sent.

A planner gets the privileged ``WorldState`` and the load reference and returns one
``UavTrajectory`` per quadrotor on the horizon's nodes. Decentralized planners take from the
state only what ``WorldState.local`` gives each quadrotor.

``PlanGuard`` enforces the rule that no quadrotor ever receives a non-finite or out-of-bounds
reference: such a plan is replaced by the previous plan shifted in time, or by a hover hold at
the quadrotor's position when there is none, and the replacement is counted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numba import njit

from cableload_sim.errors import UsageError
from cableload_sim.horizon import HORIZON_S, node_times
from cableload_sim.params import SystemParams
from cableload_sim.physics.statics import hover_geometry
from cableload_sim.physics.world import UavTrajectory, WorldState
from cableload_sim.rotations import quat_to_matrix

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from cableload_sim.trajectories import LoadReference

REFERENCE_CHECK_S = 600.0
"""How far (s) ``PlanBounds.check_reference`` looks: longer references repeat (loops) or hold."""


@runtime_checkable
class Planner(Protocol):
    name: str

    def reset(self) -> None:
        """Forget everything from a previous episode."""

    def plan(self, state: WorldState, reference: LoadReference) -> list[UavTrajectory]:
        """One trajectory per quadrotor, starting at ``state.t``."""

    def report(self) -> dict:
        """Planner-specific figures for the episode so far (solve times, failures, ...)."""


@njit(cache=True)
def violation_code(  # pragma: no cover
    t: np.ndarray,
    p: np.ndarray,
    v: np.ndarray,
    a: np.ndarray,
    j: np.ndarray,
    w: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    speed_sq: float,
    acceleration_sq: float,
    rate_sq: float,
) -> int:
    """Which of ``PlanBounds.violation``'s checks a plan fails first (0: none; 1: non-finite,
    2: node times, 3: position, 4: speed, 5: acceleration, 6: body rate), in one pass (numba:
    every plan of every planner is checked here)."""
    nodes = t.shape[0]
    for k in range(nodes):
        if not np.isfinite(t[k]):
            return 1
        for c in range(3):
            if not (
                np.isfinite(p[k, c])
                and np.isfinite(v[k, c])
                and np.isfinite(a[k, c])
                and np.isfinite(j[k, c])
                and np.isfinite(w[k, c])
            ):
                return 1
    for k in range(1, nodes):
        if t[k] - t[k - 1] <= 0.0:
            return 2
    for k in range(nodes):
        for c in range(3):
            if p[k, c] < lo[c] or p[k, c] > hi[c]:
                return 3
    speed, acceleration, rate = 0.0, 0.0, 0.0
    for k in range(nodes):
        speed = max(speed, v[k, 0] ** 2 + v[k, 1] ** 2 + v[k, 2] ** 2)
        acceleration = max(acceleration, a[k, 0] ** 2 + a[k, 1] ** 2 + a[k, 2] ** 2)
        rate = max(rate, w[k, 0] ** 2 + w[k, 1] ** 2 + w[k, 2] ** 2)
    if speed > speed_sq:
        return 4
    if acceleration > acceleration_sq:
        return 5
    if rate > rate_sq:
        return 6
    return 0


@dataclass(frozen=True)
class PlanBounds:
    """Limits no reference may exceed (world frame)."""

    position_min: tuple[float, float, float] = (-50.0, -50.0, -1.0)
    """Lower corner of the allowed box (m)."""
    position_max: tuple[float, float, float] = (50.0, 50.0, 30.0)
    """Upper corner of the allowed box (m)."""
    max_speed: float = 15.0
    """Largest reference speed (m/s)."""
    max_acceleration: float = 40.0
    """Largest reference acceleration (m/s^2)."""
    max_body_rate: float = 20.0
    """Largest reference body rate (rad/s)."""

    @functools.cached_property
    def limits(self) -> tuple[np.ndarray, np.ndarray, float, float, float]:
        """The box's corners as arrays and the squared speed, acceleration and body rate
        limits: what the checks compare with (every decision of every quadrotor passes here),
        made once."""
        return (
            np.asarray(self.position_min, dtype=float),
            np.asarray(self.position_max, dtype=float),
            float(self.max_speed) ** 2,
            float(self.max_acceleration) ** 2,
            float(self.max_body_rate) ** 2,
        )

    def violation(self, plan: UavTrajectory) -> str | None:
        """Why ``plan`` may not be flown, or None."""
        lo, hi, speed_sq, acceleration_sq, rate_sq = self.limits
        arrays = (plan.t, plan.p, plan.v, plan.a, plan.j, plan.body_rates)
        code = violation_code(*arrays, lo, hi, speed_sq, acceleration_sq, rate_sq)
        if code == 0:
            return None
        return (
            "non-finite value",
            "node times not increasing",
            f"position outside [{lo.tolist()}, {hi.tolist()}]",
            f"speed above {self.max_speed} m/s",
            f"acceleration above {self.max_acceleration} m/s^2",
            f"body rate above {self.max_body_rate} rad/s",
        )[code - 1]

    def check_reference(self, reference: LoadReference, system: SystemParams, duration: float) -> None:
        """Refuse (``UsageError``) a load reference that the quadrotors cannot follow inside
        these bounds during ``duration`` (s): the plans reaching there would be replaced.

        The quadrotors are placed in their hover formation around the reference's pose (every
        20 ms over the first ``REFERENCE_CHECK_S``); the reference's speed and acceleration are
        the load's. The check runs one horizon past ``duration``: a plan made before the end
        looks that far ahead (a path leaving the box 1 s after a flight's end had the teacher's
        last plans replaced and the load 1.3 m off its reference).
        """
        span = min(float(duration) + HORIZON_S, REFERENCE_CHECK_S)
        times = np.linspace(0.0, span, max(2, int(np.ceil(span / 0.02)) + 1))
        sample = reference.sample(times)
        geometry = hover_geometry(system)
        lengths = np.array([c.length for c in system.cables])
        offsets = system.attachment_array() + lengths[:, None] * geometry.directions
        uav_p = sample.p[:, None, :] + np.einsum("kij,nj->kni", quat_to_matrix(sample.q), offsets)
        lo, hi = np.asarray(self.position_min), np.asarray(self.position_max)
        name = getattr(reference, "name", "load reference")
        outside = np.any((uav_p < lo) | (uav_p > hi), axis=2)
        if outside.any():
            k, i = np.argwhere(outside)[0]
            raise UsageError(
                f"{name}: at t = {times[k]:.2f} s quadrotor {i} would be at "
                f"{np.round(uav_p[k, i], 2).tolist()} m, outside the allowed box "
                f"[{lo.tolist()}, {hi.tolist()}] m; the plans reaching it would be replaced"
            )
        for what, values, limit, unit in (
            ("speed", sample.v, self.max_speed, "m/s"),
            ("acceleration", sample.a, self.max_acceleration, "m/s^2"),
        ):
            norms = np.linalg.norm(values, axis=1)
            if norms.max() > limit:
                k = int(np.argmax(norms))
                raise UsageError(
                    f"{name}: the load's {what} reaches {norms[k]:.3g} {unit} at "
                    f"t = {times[k]:.2f} s, above the {limit:g} {unit} a plan may "
                    "have; the plans reaching it would be replaced"
                )


def hover_plan(t: float, position: ArrayLike) -> UavTrajectory:
    """Hold ``position`` at rest over the horizon from ``t``."""
    times = node_times(t)
    zeros = np.zeros((times.size, 3))
    p = np.repeat(np.asarray(position, dtype=float)[None, :], times.size, axis=0)
    return UavTrajectory(times, p, zeros, zeros, zeros, zeros)


class PositionsAt(Protocol):
    """What ``PlanGuard.check`` reads of a state: its time (s) and the quadrotors' positions
    (n, 3); a ``WorldState`` is one."""

    @property
    def t(self) -> float: ...

    @property
    def uav_p(self) -> np.ndarray: ...


@dataclass
class PlanGuard:
    """Checks every plan; replaces a bad one by the last good one shifted, or a hover hold."""

    bounds: PlanBounds = field(default_factory=PlanBounds)
    replaced: int = 0
    reasons: list[str] = field(default_factory=list)
    _last: dict = field(default_factory=dict)

    def reset(self) -> None:
        self.replaced = 0
        self.reasons = []
        self._last = {}

    def check(self, uav: int, plan: UavTrajectory, state: PositionsAt) -> UavTrajectory:
        reason = self.bounds.violation(plan)
        if reason is None:
            self._last[uav] = plan
            return plan
        self.replaced += 1
        if len(self.reasons) < 20:
            self.reasons.append(f"t={state.t:.2f} s uav {uav}: {reason}")
        last = self._last.get(uav)
        if last is not None:
            shifted = last.shifted_to(state.t)
            if self.bounds.violation(shifted) is None:
                return shifted
        return hover_plan(state.t, state.uav_p[uav])
