"""The onboard controller (``[controller]``) and the simulation's rates and limits
(``[simulation]``), with the rules between them."""

from __future__ import annotations

from dataclasses import dataclass

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.horizon import HORIZON_S

MIN_PHYSICS_DT_S = 1e-5
"""Smallest physics step (s): 100 000 steps per simulated second, about 0.1-0.5 s of wall
time per simulated second here."""


@dataclass(frozen=True)
class ControllerParams:
    """Onboard controller of every quadrotor: flatness + INDI position, tilt-prioritized
    attitude, INDI body rates. Gains were tuned in closed loop on the paper's setup."""

    rate_hz: float = 500.0
    """Controller update rate (Hz); a whole number of physics steps per update."""
    kp: tuple[float, float, float] = (14.0, 14.0, 18.0)
    """Position error gain per world axis (1/s^2)."""
    kv: tuple[float, float, float] = (7.0, 7.0, 8.0)
    """Velocity error gain per world axis (1/s)."""
    attitude_time_constant: float = 0.06
    """Time constant of the roll/pitch (tilt) attitude loop (s)."""
    yaw_time_constant: float = 0.3
    """Time constant of the yaw attitude loop (s)."""
    rate_gain: tuple[float, float, float] = (30.0, 30.0, 10.0)
    """Body-rate error to angular-acceleration gain (1/s)."""
    filter_cutoff_hz: float = 25.0
    """Cut-off of the first-order filters on acceleration, angular acceleration and the matching
    thrust and torque estimates (Hz); equal on both sides as INDI needs."""
    max_tilt_deg: float = 60.0
    """Largest tilt of the thrust axis from vertical (deg): the commanded thrust direction is
    limited to it, and a barrier on the body rates keeps the flown tilt within it too."""
    max_position_error: float = 1.0
    """Position errors longer than this are clipped before the gain (m)."""
    hold_compliance: float = 1.0
    """Share of the fast part of the cable's pull the quadrotor yields to while holding (-).
    1: as its own mass would, which is what damps the load's swing through the velocity gain;
    with a per-quadrotor share of 0.2-1.4 kg of load the swings then have damping ratios of
    0.21-0.49 (measured on the linearized closed loop, n = 1..6). 0: the pull fully
    compensated, the quadrotors fixed points for the swing (damping ratio about 0, negative for
    n <= 2)."""
    tracking_compliance: float = 0.3
    """Share of the fast part of the cable's pull across the cable (its direction's change) the
    quadrotor yields to while tracking a plan (-), on systems whose slowest swing is slower than
    the horizontal position loop (``layout.tracking_compliance``: one or two quadrotors), where
    a stiff loop excites the swing (damping ratio -0.016 for two). 0.3 makes it decay (0.056
    for two, 0.08 for one) and flies two on eight-slow with the formation to 0.040 m (0.13:
    0.047 m; 0: 0.28 m). Elsewhere none, and the swing while tracking stays as lightly damped
    as the stiff loop leaves it (0.000-0.04 for three to five): planners move the load through
    the cable tensions and the teacher propagates them from its own plan, so it needs the
    quadrotors on their plans (measured on the paper's three: 0.13 raises its attitude error on
    eight-slow from 0.40 to 1.7 deg, 1 makes it diverge)."""
    pull_cutoff_hz: float = 0.05
    """Cut-off of the first-order filter giving the slow part of the cable's pull (Hz): a
    decade below the slowest swing (0.48 Hz), so that the swing is yielded to in phase with the
    pull; the steady pull is taken up within 1 / (2 pi 0.05) = 3.2 s."""


@dataclass(frozen=True)
class SimulationParams:
    """Embedded simulator settings."""

    physics_dt: float = 0.001
    """Physics step (s)."""
    planner_rate_hz: float = 10.0
    """Rate at which planners send new trajectories (Hz)."""
    log_rate_hz: float = 100.0
    """Rate of the recorded time series (Hz)."""
    collision_distance_m: float = 0.4
    """An episode stops when two quadrotors come closer than this (m)."""
    divergence_distance_m: float = 3.0
    """An episode stops when the load is farther than this from its reference (m)."""


def _controller(path: str, table: dict) -> ControllerParams:
    positive3 = checks.vector(3, checks.positive)
    fields = {
        "rate_hz": checks.positive,
        "kp": positive3,
        "kv": positive3,
        "attitude_time_constant": checks.positive,
        "yaw_time_constant": checks.positive,
        "rate_gain": positive3,
        "filter_cutoff_hz": checks.positive,
        "max_tilt_deg": checks.positive,
        "max_position_error": checks.positive,
        "hold_compliance": checks.non_negative,
        "tracking_compliance": checks.non_negative,
        "pull_cutoff_hz": checks.positive,
    }
    return checks.build(ControllerParams, path, table, fields)


def _simulation(path: str, table: dict) -> SimulationParams:
    fields = {
        name: checks.positive
        for name in (
            "physics_dt",
            "planner_rate_hz",
            "log_rate_hz",
            "collision_distance_m",
            "divergence_distance_m",
        )
    }
    sim = checks.build(SimulationParams, path, table, fields)
    if sim.physics_dt > 0.002:
        raise ConfigError(
            f"{path}.physics_dt: expected at most 0.002 s (stiff cables), got {sim.physics_dt!r}"
        )
    if sim.physics_dt < MIN_PHYSICS_DT_S:
        raise ConfigError(
            f"{path}.physics_dt: expected at least {MIN_PHYSICS_DT_S:g} s, got {sim.physics_dt!r}: "
            f"that step needs {1.0 / sim.physics_dt:.3g} physics steps per simulated second"
        )
    horizon = HORIZON_S
    if sim.planner_rate_hz < 1.0 / horizon:
        raise ConfigError(
            f"{path}.planner_rate_hz: expected at least {1.0 / horizon:.3g} Hz (a plan lasts "
            f"{horizon:.2f} s and must be renewed before it runs out), got {sim.planner_rate_hz!r}"
        )
    if sim.log_rate_hz < sim.planner_rate_hz:
        raise ConfigError(
            f"{path}.log_rate_hz: expected at least planner_rate_hz={sim.planner_rate_hz!r} Hz "
            f"(a sample every planner period), got {sim.log_rate_hz!r}"
        )
    return sim


def _whole_steps(path: str, rate_hz: float, physics_dt: float) -> None:
    """Refuse a rate whose period is not a whole number (>= 1) of physics steps."""
    steps = 1.0 / (rate_hz * physics_dt)
    if round(steps) < 1 or abs(steps - round(steps)) > 1e-6:
        raise ConfigError(
            f"{path}: {rate_hz!r} Hz is not a whole fraction of the physics rate "
            f"{1.0 / physics_dt:.6g} Hz (simulation.physics_dt = {physics_dt!r} s); expected "
            "rate * physics_dt = 1/k for a whole k"
        )


def _check_rates(source: str, controller: ControllerParams, sim: SimulationParams) -> None:
    """The controller and the planner run a whole number of physics steps apart, the planner
    no faster than the controller."""
    _whole_steps(f"{source}:controller.rate_hz", controller.rate_hz, sim.physics_dt)
    _whole_steps(f"{source}:simulation.planner_rate_hz", sim.planner_rate_hz, sim.physics_dt)
    if sim.planner_rate_hz > controller.rate_hz:
        raise ConfigError(
            f"{source}:simulation.planner_rate_hz: expected at most controller.rate_hz="
            f"{controller.rate_hz!r} Hz, got {sim.planner_rate_hz!r}"
        )
