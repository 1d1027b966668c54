"""The episode runner: drives any Backend with any Planner along a load reference.

It knows nothing about which backend it drives. Every planner period it observes the world,
asks the planner for one trajectory per quadrotor, passes each through the ``PlanGuard`` (no
non-finite or out-of-bounds reference ever leaves), sends them and advances. It stops early with
a named status when the run cannot go on (the backend's health first: a world that was reset
makes the load diverge, and the reset is what the status names; then the planner's, e.g. a
planner node lost), and returns the metrics, the planner's report and,
when asked, the recorded time series with the reference at the same times.

Memory does not grow with the duration: the metrics are accumulated period by period
(``EpisodeMetrics``) and the samples are kept only with ``keep_samples``; a logger receives
them as they come.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from backends.base import Backend, EpisodeAborted, Scenario
from cableload_sim import checks
from cableload_sim.errors import ResourceError, UsageError
from cableload_sim.horizon import node_offsets
from cableload_sim.io.resources import available_memory, gigabytes
from cableload_sim.metrics import EpisodeMetrics, uav_distances
from cableload_sim.params import SimulationParams
from cableload_sim.physics.world import UavTrajectory, WorldSamples, WorldState
from hw.safety import Action, SafetyDecision, SafetyModule
from planners.base import PlanGuard, hover_plan


class EpisodeStatus(str, enum.Enum):
    """How an episode ended."""

    COMPLETED = "completed"
    DIVERGED = "diverged"  # load too far from its reference
    NON_FINITE = "non_finite"  # the state stopped being finite
    UAVS_TOO_CLOSE = "uavs_too_close"  # two quadrotors under the collision distance
    BACKEND_FAILED = "backend_failed"  # the backend reported itself unhealthy
    PLANNER_FAILED = "planner_failed"  # every plan replaced by the guard for a whole horizon
    NODE_LOST = "node_lost"  # a planner node stopped sending plans (or never started)
    WORLD_REPLACED = "world_replaced"  # another world took over the ROS graph
    WORLD_RESET = "world_reset"  # the world was reset or the system moved by hand
    CLOCK_STALLED = "clock_stalled"  # the world's clock stopped advancing (paused)
    SYSTEM_MISMATCH = "system_mismatch"  # the world simulates another system or config
    PLANS_REJECTED = "plans_rejected"  # a pilot refused the planner's references
    UAV_OFF = "uav_off"  # a quadrotor was switched off or disarmed outside the episode
    PILOT_OVERRIDE = "pilot_override"  # a pilot commanded or fed references by another node
    SAFETY_STOP = "safety_stop"  # a rule of the safety module stopped the flight
    OPERATOR_OFF = "operator_off"  # the operator let the dead-man go (or pressed off)
    OPERATOR_HOVER = "operator_hover"  # the operator stopped the transport in hover
    OPERATOR_LAND = "operator_land"  # the operator landed the quadrotors mid-transport


@dataclass
class PlanRecord:
    """The plans sent at one planner period."""

    t: float
    trajectories: list[UavTrajectory]


class EpisodeLogger(Protocol):
    """Receives an episode as it happens (e.g. a run-log writer); every call may write.

    A logger with ``onboard_estimate(t, p, q, v)`` receives, each period, the quadrotors'
    onboard estimates when the backend has them (``onboard_estimate()``, ``[imu]`` on).
    A logger may also have ``observed(state: WorldState)``: it then receives the state each
    plan was made from, as the planner observed it (the samples are the true state).
    """

    def start(self, system, reference, scenario: Scenario, planner_name: str) -> None: ...

    def plans(self, t: float, trajectories: list[UavTrajectory]) -> None: ...

    def samples(self, samples: WorldSamples, ref_p: np.ndarray, ref_q: np.ndarray) -> None: ...

    def finish(self, status: str, metrics: dict) -> None: ...


@dataclass
class EpisodeResult:
    status: EpisodeStatus
    samples: WorldSamples | None
    """The recorded time series, with ``keep_samples``; None otherwise."""
    ref_p: np.ndarray | None  # (k, 3) reference at the sample times, with ``keep_samples``
    ref_q: np.ndarray | None  # (k, 4)
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
    collision_distance: float = SimulationParams.collision_distance_m,
    divergence_distance: float = SimulationParams.divergence_distance_m,
    record_plans: bool = False,
    keep_samples: bool = False,
    progress: bool = False,
    on_period: Callable[[WorldState, list[UavTrajectory]], None] | None = None,
    logger: EpisodeLogger | None = None,
    safety: SafetyModule | None | bool = True,
) -> EpisodeResult:
    """Fly ``planner`` on ``backend`` along ``reference`` for ``duration`` seconds.

    ``scenario`` defaults to the reference's start pose with seed 0. ``on_period`` is called
    with the observed state and the guarded plans every planner period (DAgger); ``logger``
    receives the plans, the samples with the reference at their times, and the final metrics
    as they happen, so a run killed midway leaves what it had written. ``keep_samples`` keeps
    the whole time series in the result (memory grows with the duration: refused when it would
    not fit); ``record_plans`` keeps every plan sent.

    Every plan passes ``safety`` (``hw.safety.SafetyModule``; True: one with the default
    limits, False: none) after the planner's guard: when a rule fires no plan is sent, each
    quadrotor gets the rule's action (``backend.command``), the backend runs one more period
    (the reaction is recorded) and the episode ends ``safety_stop``.
    """
    period = backend.planner_period_s
    duration = checks.duration.raising(UsageError)("duration", duration)
    if duration < period - 1e-9:
        raise UsageError(f"duration: expected at least one planner period ({period:g} s), got {duration!r} s")
    if scenario is None:
        p0, q0 = reference.start_pose()
        scenario = Scenario(load_p=p0, load_q=q0, on_ground=starts_on_ground(reference))
    n_periods = int(np.ceil(duration / period - 1e-9))
    guard = PlanGuard()
    guard.bounds.check_reference(reference, backend.system, duration)
    if safety is True:
        safety = SafetyModule()
    safety = safety or None
    if safety is not None:
        safety.reset()
    planner.reset()
    try:
        state = backend.reset(scenario)
    except EpisodeAborted as err:  # nothing was flown
        metrics = EpisodeMetrics(backend.system).result()
        metrics.update(status=err.status, wall_time_s=0.0, real_time_factor=0.0)
        return EpisodeResult(EpisodeStatus(err.status), None, None, None, metrics, {}, message=str(err))
    if logger is not None:
        logger.start(backend.system, reference, scenario, planner.name)
    metrics_sum = EpisodeMetrics(backend.system)
    kept: list[tuple[WorldSamples, np.ndarray, np.ndarray]] = []
    plans: list[PlanRecord] = []
    failing = _PlannerWatch(backend.system.n_uavs, period)
    status = EpisodeStatus.COMPLETED
    message = ""
    wall0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n_periods, desc=f"{planner.name}", unit="plan", leave=False)
    log_observed = getattr(logger, "observed", None)
    log_onboard = getattr(logger, "onboard_estimate", None)
    log_safety = getattr(logger, "safety", None)
    onboard_of = getattr(backend, "onboard_estimate", None)
    safety_inputs = getattr(backend, "safety_inputs", None)
    logged_events = 0
    for k in range(n_periods):
        replaced_before = guard.replaced
        if log_observed is not None:
            log_observed(state)
        if log_onboard is not None and onboard_of is not None:
            estimate = onboard_of()
            if estimate is not None:
                log_onboard(state.t, *estimate)
        trajectories = [guard.check(i, traj, state) for i, traj in enumerate(planner.plan(state, reference))]
        decision = None
        sent = True
        if safety is not None:
            decision = safety.check(state, trajectories, safety_inputs() if safety_inputs else None)
            sent = not (decision.intervened or safety.stopped)
        if sent:
            for i, traj in enumerate(trajectories):
                backend.send(i, traj)
        elif decision is not None and decision.intervened:  # (not sent: a decision was made)
            act(backend, decision, state)  # a trip from outside has acted already
        if safety is not None and log_safety is not None:
            for event in safety.events[logged_events:]:
                log_safety(event.as_dict())
            logged_events = len(safety.events)
        if record_plans and sent:
            plans.append(PlanRecord(state.t, trajectories))
        if on_period is not None:
            on_period(state, trajectories)
        if logger is not None and sent:
            logger.plans(state.t, trajectories)
        samples = backend.advance()
        ref_now = reference.sample(samples.t) if len(samples) else None
        if ref_now is not None:
            metrics_sum.update(samples, ref_now.p, ref_now.q, scored(reference, samples.t))
            if keep_samples:
                if k == 0:
                    _check_memory(len(samples), n_periods, samples, duration)
                kept.append((samples, ref_now.p, ref_now.q))
            if logger is not None:
                logger.samples(samples, ref_now.p, ref_now.q)
        state = backend.observe()
        if bar is not None:
            bar.update(1)
        status, message = _check(samples, ref_now, backend, planner, collision_distance, divergence_distance)
        if safety is not None and safety.stopped:
            first = safety.events[0]
            status = EpisodeStatus(safety.stop_status)
            message = f"safety rule {first.rule}: {first.reason} -> {first.action.label}"
            break
        if status is EpisodeStatus.COMPLETED and failing.update(guard.replaced - replaced_before):
            status = EpisodeStatus.PLANNER_FAILED
            message = f"every plan replaced for {failing.seconds:.1f} s (first: {guard.reasons[0]})"
        if status is not EpisodeStatus.COMPLETED:
            break
    if bar is not None:
        bar.close()
    if safety is not None and log_safety is not None:  # a trip from outside during the last period
        for event in safety.events[logged_events:]:
            log_safety(event.as_dict())
    wall = time.perf_counter() - wall0
    metrics = metrics_sum.result()
    metrics["wall_time_s"] = wall
    metrics["real_time_factor"] = metrics["sim_time_s"] / wall if wall > 0 else float("inf")
    metrics["status"] = status.value
    metrics["replaced_plans"] = guard.replaced
    health = backend.health()
    metrics["rejected_plans"] = health.rejected_plans
    metrics.update({k: v for k, v in health.extra.items() if k.startswith("link_")})
    metrics.update(health.metrics)
    metrics.update({k: v for k, v in planner.report().items() if np.isscalar(v)})
    if safety is not None:
        metrics.update(safety.report())
    if logger is not None:
        logger.finish(status.value, metrics)
    samples_all = ref_p = ref_q = None
    if keep_samples:
        samples_all = WorldSamples.concatenate([s for s, _, _ in kept], backend.system.n_uavs)
        ref_p = np.concatenate([p for _, p, _ in kept]) if kept else np.zeros((0, 3))
        ref_q = np.concatenate([q for _, _, q in kept]) if kept else np.zeros((0, 4))
    return EpisodeResult(
        status,
        samples_all,
        ref_p,
        ref_q,
        metrics,
        planner.report(),
        plans,
        message or "; ".join(guard.reasons[:3]),
    )


def act(backend, decision: SafetyDecision, state: WorldState) -> None:
    """Carry out the safety module's actions: ``backend.command(uav, action)`` where the backend
    has pilot commands (``hover``, ``land``, ``off``); else a hover hold at each quadrotor's
    position is sent instead of its plan."""
    command = getattr(backend, "command", None)
    for i, action in enumerate(decision.actions):
        if action is Action.NONE:
            continue
        if command is not None:
            command(i, action.label)
        else:
            backend.send(i, hover_plan(state.t, state.uav_p[i]))


def starts_on_ground(reference) -> bool:
    """Whether ``reference`` is flown from the ground (``cableload_sim.trajectories.lift``)."""
    return getattr(reference, "climb", None) is not None


def scored(reference, t: np.ndarray) -> np.ndarray | None:
    """The samples whose tracking counts: those whose load reference is in the air, for a
    reference from the ground; all (None) otherwise."""
    airborne = getattr(reference, "airborne", None)
    return None if airborne is None else airborne(t)


class _PlannerWatch:
    """Whether the guard has replaced every quadrotor's plan for a whole horizon: the last
    flyable plan has then run out, and the planner is no longer flying anything."""

    def __init__(self, n_uavs: int, period: float):
        self.n_uavs = n_uavs
        self.period = period
        self.limit = int(np.ceil(node_offsets()[-1] / period - 1e-9))
        self.periods = 0

    @property
    def seconds(self) -> float:
        return self.periods * self.period

    def update(self, replaced: int) -> bool:
        self.periods = self.periods + 1 if replaced >= self.n_uavs else 0
        return self.periods > self.limit


def _check_memory(per_period: int, n_periods: int, samples: WorldSamples, duration: float):
    """Refuse to keep the samples of an episode that would not fit in memory."""
    per_sample = sum(getattr(samples, f)[:1].nbytes for f in WorldSamples.FIELDS) + 7 * 8
    needed = float(per_period) * n_periods * per_sample * 2  # and the final concatenation
    available = available_memory()
    if available is not None and needed > available:
        raise ResourceError(
            f"keeping the samples of a {duration:g} s episode needs about {gigabytes(needed)} "
            f"of memory, {gigabytes(available)} are available; fly it without keep_samples "
            "(metrics and run logs need none)"
        )


def _failure(health) -> tuple[EpisodeStatus, str] | None:
    """The status and message an unhealthy ``BackendHealth`` calls for (None when healthy)."""
    if health is None or health.ok:
        return None
    return EpisodeStatus(health.status), "; ".join(health.messages)


def _check(samples: WorldSamples, ref_now, backend, planner, collision, divergence):
    failed = _failure(backend.health()) or _failure(planner.health() if hasattr(planner, "health") else None)
    if failed is not None:
        return failed
    if not all(np.isfinite(getattr(samples, f)).all() for f in ("load_p", "uav_p")):
        return EpisodeStatus.NON_FINITE, "state not finite"
    if len(samples) == 0:  # a period with nothing recorded, from a healthy backend
        return EpisodeStatus.COMPLETED, ""
    dist = uav_distances(samples.uav_p).min()
    if dist < collision:
        return EpisodeStatus.UAVS_TOO_CLOSE, f"quadrotors {dist:.2f} m apart (< {collision} m)"
    error = np.linalg.norm(samples.load_p - ref_now.p, axis=-1).max()
    if error > divergence:
        return EpisodeStatus.DIVERGED, f"load {error:.2f} m from its reference (> {divergence} m)"
    return EpisodeStatus.COMPLETED, ""
