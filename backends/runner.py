"""The episode runner: drives any Backend with any Planner along a load reference.

It knows nothing about which backend it drives. Every planner period it observes the world,
asks the planner for one trajectory per quadrotor, passes each through the ``PlanGuard`` (no
non-finite or out-of-bounds reference ever leaves), sends them and advances. It stops early with
a named status when the run cannot go on, and returns the recorded time series, the reference at
the same times, the metrics and the planner's report.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from backends.base import Backend, Scenario
from cableload_sim.metrics import episode_metrics, uav_distances
from cableload_sim.world import UavTrajectory, WorldSamples, WorldState
from planners.base import PlanGuard


class EpisodeStatus(str, enum.Enum):
    """How an episode ended."""

    COMPLETED = "completed"
    DIVERGED = "diverged"  # load too far from its reference
    NON_FINITE = "non_finite"  # the state stopped being finite
    UAVS_TOO_CLOSE = "uavs_too_close"  # two quadrotors under the collision distance
    BACKEND_FAILED = "backend_failed"  # the backend reported itself unhealthy
    SAFETY_STOP = "safety_stop"  # a safety module stopped the flight


@dataclass
class PlanRecord:
    """The plans sent at one planner period."""

    t: float
    trajectories: list[UavTrajectory]


class EpisodeLogger(Protocol):
    """Receives an episode as it happens (e.g. a run-log writer); every call may write."""

    def start(self, system, reference, scenario: Scenario, planner_name: str) -> None: ...

    def plans(self, t: float, trajectories: list[UavTrajectory]) -> None: ...

    def samples(self, samples: WorldSamples, ref_p: np.ndarray, ref_q: np.ndarray) -> None: ...

    def finish(self, status: str, metrics: dict) -> None: ...


@dataclass
class EpisodeResult:
    status: EpisodeStatus
    samples: WorldSamples
    ref_p: np.ndarray  # (k, 3) reference at the sample times
    ref_q: np.ndarray  # (k, 4)
    metrics: dict
    planner_report: dict
    plans: list[PlanRecord] = field(default_factory=list)
    message: str = ""


def run_episode(
    backend: Backend,
    planner,
    reference,
    duration: float,
    scenario: Scenario | None = None,
    *,
    collision_distance: float = 0.4,
    divergence_distance: float = 3.0,
    record_plans: bool = False,
    progress: bool = False,
    on_period: Callable[[WorldState, list[UavTrajectory]], None] | None = None,
    logger: EpisodeLogger | None = None,
) -> EpisodeResult:
    """Fly ``planner`` on ``backend`` along ``reference`` for ``duration`` seconds.

    ``scenario`` defaults to the reference's start pose with seed 0. ``on_period`` is called
    with the observed state and the guarded plans every planner period (DAgger); ``logger``
    receives the plans, the samples with the reference at their times, and the final metrics
    as they happen, so a run killed midway leaves what it had written.
    """
    if not np.isfinite(duration) or duration <= 0.0:
        raise ValueError(f"duration: expected a positive number of seconds, got {duration!r}")
    if scenario is None:
        p0, q0 = reference.start_pose()
        scenario = Scenario(load_p=p0, load_q=q0)
    n_periods = int(np.ceil(duration / backend.planner_period_s - 1e-9))
    guard = PlanGuard()
    planner.reset()
    state = backend.reset(scenario)
    if logger is not None:
        logger.start(backend.system, reference, scenario, planner.name)
    parts: list[WorldSamples] = []
    ref_parts: list[tuple[np.ndarray, np.ndarray]] = []  # reference at the sample times
    plans: list[PlanRecord] = []
    status = EpisodeStatus.COMPLETED
    message = ""
    wall0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n_periods, desc=f"{planner.name}", unit="plan", leave=False)
    for _ in range(n_periods):
        trajectories = [
            guard.check(i, traj, state)
            for i, traj in enumerate(planner.plan(state, reference))
        ]
        for i, traj in enumerate(trajectories):
            backend.send(i, traj)
        if record_plans:
            plans.append(PlanRecord(state.t, trajectories))
        if on_period is not None:
            on_period(state, trajectories)
        if logger is not None:
            logger.plans(state.t, trajectories)
        samples = backend.advance()
        parts.append(samples)
        ref_now = reference.sample(samples.t) if len(samples) else None
        if ref_now is not None:
            ref_parts.append((ref_now.p, ref_now.q))
            if logger is not None:
                logger.samples(samples, ref_now.p, ref_now.q)
        state = backend.observe()
        if bar is not None:
            bar.update(1)
        status, message = _check(samples, ref_now, backend, collision_distance,
                                 divergence_distance)
        if status is not EpisodeStatus.COMPLETED:
            break
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - wall0
    samples = WorldSamples.concatenate(parts, backend.system.n_uavs)
    ref_p = np.concatenate([p for p, _ in ref_parts]) if ref_parts else np.zeros((0, 3))
    ref_q = np.concatenate([q for _, q in ref_parts]) if ref_parts else np.zeros((0, 4))
    metrics = episode_metrics(samples, ref_p, ref_q, backend.system)
    metrics["wall_time_s"] = wall
    metrics["real_time_factor"] = metrics["sim_time_s"] / wall if wall > 0 else float("inf")
    metrics["status"] = status.value
    metrics["replaced_plans"] = guard.replaced
    health = backend.health()
    metrics["rejected_plans"] = health.rejected_plans
    metrics.update({k: v for k, v in planner.report().items() if np.isscalar(v)})
    if logger is not None:
        logger.finish(status.value, metrics)
    return EpisodeResult(status, samples, ref_p, ref_q, metrics, planner.report(), plans,
                         message or "; ".join(guard.reasons[:3]))


def _check(samples: WorldSamples, ref_now, backend, collision, divergence):
    if not all(np.isfinite(getattr(samples, f)).all() for f in ("load_p", "uav_p")):
        return EpisodeStatus.NON_FINITE, "state not finite"
    if len(samples) == 0:
        # a period with nothing recorded: only the backend can say whether that is a failure
        health = backend.health()
        if not health.ok:
            return EpisodeStatus.BACKEND_FAILED, "; ".join(health.messages)
        return EpisodeStatus.COMPLETED, ""
    dist = uav_distances(samples.uav_p).min()
    if dist < collision:
        return EpisodeStatus.UAVS_TOO_CLOSE, f"quadrotors {dist:.2f} m apart (< {collision} m)"
    error = np.linalg.norm(samples.load_p - ref_now.p, axis=-1).max()
    if error > divergence:
        return EpisodeStatus.DIVERGED, f"load {error:.2f} m from its reference (> {divergence} m)"
    health = backend.health()
    if not health.ok:
        return EpisodeStatus.BACKEND_FAILED, "; ".join(health.messages)
    return EpisodeStatus.COMPLETED, ""
