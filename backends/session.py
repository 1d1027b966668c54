"""Episodes from names and options: the orchestration the command line wires, callable from
tests and notebooks alike.

``Flight`` says what to fly (configuration, load reference, duration, seed, disturbance and
backend); ``fly(flight, planner)`` builds the backend (and the planner, given by name), flies
one episode, logged to a run log when asked, and returns its metrics. Before the first of
several flights, ``planner_names`` and ``check_outputs`` refuse unknown or repeated planners,
run-log paths that cannot be written and logs the disk cannot hold, so no flight is lost to a
mistake found after it. ``bench_teacher`` times the teacher's plans in closed loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from backends import make_backend
from backends.base import Scenario
from backends.runner import EpisodeStatus, run_episode, starts_on_ground
from cableload_sim import checks
from cableload_sim.errors import ResourceError, UsageError
from cableload_sim.io.resources import free_disk, gigabytes
from cableload_sim.metrics import plan_derivative_mae
from cableload_sim.params import Config, load_config
from cableload_sim.physics.disturbances import WrenchDisturbance
from hw.safety import SafetyLimits, SafetyModule
from planners import check_planner_name, make_planner

if TYPE_CHECKING:
    from cableload_sim.trajectories import LoadReference

NODES = "nodes"
"""The planner seat of a ROS backend whose planners run as ``cableload node`` processes."""


@dataclass(frozen=True)
class Flight:
    """What to fly, whatever the planner."""

    config: Config
    reference: LoadReference
    """The load reference (``cableload_sim.trajectories.LoadReference``)."""
    duration: float
    """Simulated seconds."""
    seed: int = 0
    """Seeds every random process of the episode."""
    disturbance: WrenchDisturbance | None = None
    backend: str = "embedded"
    backend_options: dict = field(default_factory=dict)
    """Keyword arguments of the backend besides the config (e.g. ``pilot_queue``)."""
    progress: bool = False
    """A progress bar on the terminal."""
    safety: SafetyLimits | None = field(default_factory=SafetyLimits)
    """The safety module's limits (``hw.safety``); None flies without the module."""

    def __post_init__(self):
        checks.duration.raising(UsageError)("duration", self.duration)


def planner_names(text: str, backend: str = "embedded") -> list[str]:
    """The planners named in ``text`` (comma-separated), each known and none twice."""
    names = [name.strip() for name in str(text).split(",")]
    if not all(names):
        raise UsageError(
            f"--planner: expected planner names separated by commas, e.g. formation,teacher; got {text!r}"
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(f"--planner: {repeated[0]!r} named twice in {text!r}")
    for name in names:
        if name == NODES:
            if backend != "gazebo":
                raise UsageError(
                    "--planner nodes (planners running as `cableload node`) needs --backend gazebo"
                )
        else:
            check_planner_name(name)
    return names


def log_paths(log, names: list[str]) -> list[Path | None]:
    """One bag per planner: the path itself for one, ``stem-planner.bag`` for several."""
    if log is None:
        return [None] * len(names)
    path = Path(log)
    if len(names) == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{name}{path.suffix or '.bag'}") for name in names]


def check_outputs(flight: Flight, paths: list[Path | None], overwrite: bool = False) -> None:
    """Refuse, before any flight, a run-log path that cannot be written (``UsageError``,
    ``OutputExistsError``) or run logs larger than the disk's free space (``ResourceError``)."""
    from cableload_sim.io.runlog import check_output_path, estimated_size

    logs = [Path(p) for p in paths if p is not None]
    for path in logs:
        check_output_path(path, overwrite)
    if not logs:
        return
    sim = flight.config.simulation
    size = estimated_size(flight.config.system.n_uavs, flight.duration, sim.log_rate_hz, sim.planner_rate_hz)
    folders: dict[Path, float] = {}
    for path in logs:
        folder = path.parent.resolve()
        folders[folder] = folders.get(folder, 0.0) + size
    for folder, needed in folders.items():
        free = free_disk(folder)
        if free is not None and needed > free:
            raise ResourceError(
                f"--log: {len(logs)} run log(s) of {flight.duration:g} s need about "
                f"{gigabytes(needed)}; {str(folder)!r} has {gigabytes(free)} free"
            )


def build_planner(flight: Flight, name: str, options: dict | None = None, backend=None):
    """The planner ``name`` for ``flight`` (``options`` for its factory, e.g. the student's
    ``policy`` and ``runtime``); ``nodes`` needs the flight's (ROS) ``backend``."""
    if name == NODES:
        if backend is None or flight.backend != "gazebo":
            raise UsageError("--planner nodes (planners running as `cableload node`) needs --backend gazebo")
        from backends.planner_node import NodePlanners

        return NodePlanners(backend, **(options or {}))
    planner = make_planner(name, flight.config, **(options or {}))
    return with_lift(planner, flight)


LIFT_PLANNER = "formation-tilt"
"""Flies the take-off, lift, set-down and landing of a flight from the ground for the planners
that do not know them (``planners.handover``)."""


def with_lift(planner, flight: Flight):
    """``planner``, wrapped in a ``HandOver`` from the lift planner when ``flight`` starts on
    the ground and ``planner`` does not fly the lift itself (the teacher, the student)."""
    from planners.formation import FormationPlanner
    from planners.handover import HandOver, from_ground

    if not from_ground(flight.reference) or isinstance(planner, FormationPlanner):
        return planner
    return HandOver(planner, make_planner(LIFT_PLANNER, flight.config), flight.config.system)


class _DerivativeMae:
    """Mean over every plan sent of the paper's derivative-consistency metric (m/s), kept as
    a running sum so an episode of any length needs no plan kept."""

    def __init__(self):
        self.total = 0.0
        self.count = 0

    def __call__(self, state, trajectories) -> None:
        for trajectory in trajectories:
            self.total += plan_derivative_mae(trajectory.t, trajectory.p, trajectory.v)
            self.count += 1

    def value(self) -> float:
        return self.total / self.count if self.count else float("nan")


def warm_up(planner, config, reference, load_p, load_q) -> None:
    """Plan once from the hover state at the start pose and forget it: a world that runs in
    real time does not wait while a planner compiles its code on its first plan."""
    from cableload_sim.physics.simulator import Simulator

    sim = Simulator(config)
    sim.reset(load_p, load_q)
    planner.plan(sim.world_state(), reference)
    planner.reset()
    inner, path = getattr(planner, "planner", None), getattr(reference, "path", None)
    if inner is not None and path is not None and getattr(inner, "warm_up", True):
        # a hand-over: its planner first flies mid-flight
        p0, q0 = path.start_pose()
        sim.reset(p0, q0)
        inner.plan(sim.world_state(), path)
        inner.reset()


def fly(
    flight: Flight,
    planner,
    *,
    planner_options: dict | None = None,
    log_path=None,
    overwrite: bool = False,
    derivative_mae: bool = False,
) -> dict:
    """One episode of ``planner`` (a name, or a planner from ``build_planner``); returns the
    metrics with ``planner``, ``trajectory``, ``message`` (when there is one) and, with
    ``derivative_mae``, ``deriv_mae_mps``. ``log_path`` writes a run log of it."""
    config = flight.config
    label = planner if isinstance(planner, str) else planner.name
    backend = make_backend(flight.backend, config, **flight.backend_options)
    try:
        if isinstance(planner, str):
            planner = build_planner(flight, planner, planner_options, backend)
        p0, q0 = flight.reference.start_pose()
        scenario = Scenario(
            load_p=p0,
            load_q=q0,
            seed=flight.seed,
            disturbance=flight.disturbance,
            on_ground=starts_on_ground(flight.reference),
        )
        if getattr(backend, "deterministic", True) is False and getattr(planner, "warm_up", True):
            warm_up(planner, config, flight.reference, p0, q0)
        mae = _DerivativeMae() if derivative_mae else None

        def episode(logger=None):
            return run_episode(
                backend,
                planner,
                flight.reference,
                flight.duration,
                scenario,
                collision_distance=config.simulation.collision_distance_m,
                divergence_distance=config.simulation.divergence_distance_m,
                progress=flight.progress,
                on_period=mae,
                logger=logger,
                safety=SafetyModule(flight.safety) if flight.safety is not None else False,
            )

        ros_topics = None
        if flight.backend == "gazebo":  # the episode's own topics, for `rosbag record`
            from backends.ros_logger import RosTopicsLogger

            ros_topics = RosTopicsLogger(backend)
        if log_path is None:
            result = episode(ros_topics)
        else:
            from backends.ros_logger import FanOutLogger
            from cableload_sim.io.runlog import RunLogWriter

            with RunLogWriter(log_path, config, overwrite=overwrite) as log:
                result = episode(FanOutLogger(log, ros_topics) if ros_topics else log)
        landed = None
        land = getattr(backend, "land", None)
        if scenario.on_ground and land is not None and result.status is EpisodeStatus.COMPLETED:
            landed = land()  # the pilots' own landing, once the load is set down
    finally:
        backend.close()
    metrics = dict(result.metrics)
    if landed is not None:
        metrics["landed"] = landed
    if mae is not None:
        metrics["deriv_mae_mps"] = mae.value()
    metrics["planner"] = label
    metrics["trajectory"] = flight.reference.name
    if result.message:
        metrics["message"] = result.message
    return metrics


def bench_teacher(uavs: list[int], duration: float, trajectory: str, config_path=None, overrides=()) -> dict:
    """Per number of quadrotors: time of a full teacher plan (solve and post-processing), in
    closed loop on the embedded simulator, warm-started as in flight; ``overrides``
    (``table.key=value``) change the configuration as ``--set`` does."""
    from cableload_sim.trajectories import make_reference
    from planners.teacher import TeacherPlanner

    out = {}
    for n in uavs:
        config = load_config(config_path, uavs=n, overrides=overrides)
        t0 = time.perf_counter()
        planner = TeacherPlanner.from_config(config)
        build = time.perf_counter() - t0
        result = run_episode(make_backend("embedded", config), planner, make_reference(trajectory), duration)
        times = np.array(planner.solve_times[1:]) * 1e3  # the cold first plan apart
        out[str(n)] = {
            "solve_ms_median": float(np.median(times)) if times.size else float("nan"),
            "solve_ms_p99": float(np.percentile(times, 99)) if times.size else float("nan"),
            "first_plan_ms": planner.solve_times[0] * 1e3,
            "solver_failures": planner.failures,
            "plans": len(planner.solve_times),
            "build_s": build,
            "status": result.status.value,
            "rmse_position_m": result.metrics["rmse_position_m"],
        }
    return out
