"""The teacher NMPC's horizon, weights, limits and solver settings (``[teacher]``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cableload_sim import checks
from cableload_sim.errors import ConfigError

TEACHER_PRIORS = ("tilt", "wrench")
"""The formations the teacher's cables can be regularized toward (``TeacherParams.prior``)."""


@dataclass(frozen=True)
class TeacherParams:
    """The centralized NMPC teacher: cost weights, bounds and solver settings.

    Weights multiply squared errors integrated over the horizon (each node's term times its
    interval), so they do not depend on the node spacing.
    """

    weight_position: float = 100000.0
    """Load position error (1/m^2 s)."""
    weight_attitude: float = 20000.0
    """Load attitude error, squared geodesic angle (1/rad^2 s)."""
    weight_velocity: float = 40.0
    """Load velocity error (s/m^2)."""
    weight_rate: float = 5.0
    """Load angular velocity error (s/rad^2)."""
    weight_cable_jerk: float = 0.001
    """Input: third derivative of each cable's angular velocity (s^5/rad^2)."""
    weight_tension_accel: float = 0.0005
    """Input: second derivative of each tension (s^3/N^2)."""
    weight_direction: float = 3000.0
    """Regularization of each cable direction toward the formation prior (1/s): it fixes the
    formation's shape, which the load's motion leaves free with more than three cables."""
    prior: str = "wrench"
    """The formation prior the cables are regularized toward (``TEACHER_PRIORS``): ``tilt``,
    the hover cone leaning toward the force the load needs (formation-tilt's shape); or
    ``wrench``, the cable forces of formation-wrench (the least change of that cone supplying
    the reference's whole wrench, drag included)."""
    weight_cable_rate: float = 0.05
    """Regularization of the cable angular velocity r and its derivatives dr, ddr."""
    weight_tension: float = 0.05
    """Regularization of each tension toward its hover value (1/N^2 s): a weak pull that keeps
    the cable states, which no measurement corrects, from drifting over the horizon."""
    weight_tension_rate: float = 0.01
    """Regularization of each tension rate (s/N^2)."""
    cable_weights_for: int = 3
    """The number of cables the per-cable weights (direction, cable rate, tension, tension
    rate, and the inputs) are set for: with n cables each is scaled by this over n, so that
    the cables' regularization weighs as much against the load's tracking for any n (0: the
    weights count per cable, whatever n)."""
    terminal_scale: float = 5.0
    """Terminal node weight over the stage weights (-)."""
    tension_min: float = 0.5
    """Smallest tension; above zero keeps the cables taut (N)."""
    tension_max: float = 15.0
    """Largest tension (N)."""
    thrust_min: float = 1.0
    """Smallest collective thrust of a quadrotor (N)."""
    thrust_margin: float = 0.9
    """Largest collective thrust as a fraction of the quadrotor's maximum (-)."""
    min_distance: float = 0.8
    """Smallest distance between two quadrotors (m): twice the safety module's 0.4 m. It is
    not more because in fast turns the formation itself closes to 0.8-0.95 m (zero-sideslip
    circles at up to 4 m/s, yawing at 1.3-2.7 rad/s: ``benchmarks/stress_circles.py``).
    Held to 1 m there, the teacher's plans failed and its flights diverged. The paper's
    configuration keeps its 1 m."""
    max_tilt_deg: float = 60.0
    """Largest tilt of a quadrotor's thrust axis from vertical anywhere in a plan (deg): what
    the onboard controller flies (``controller.max_tilt_deg``)."""
    max_cable_jerk: float = 200.0
    """Bound on each component of the input d3r (rad/s^4)."""
    max_tension_accel: float = 2000.0
    """Bound on the input d2t (N/s^2)."""
    separation_margin: float = 0.02
    """Distance the optimizer keeps beyond ``min_distance``, for what the linearization misses
    between two iterations; plans are checked against ``min_distance`` itself (m)."""
    exact_penalty: float = 1.0e5
    """Weight of the exact (L1) penalty on a constraint's violation, per newton, per 0.1 m or
    per normalized input and per second; above every multiplier, the constraints are hard."""
    measurement_gain: float = 0.3
    """How far each plan's initial load pose, twist and cable directions move from the plan
    being flown toward their measured values (-; 1: the measurement as it is). Below 1 the
    teacher filters what it measures, as an observer would: motion capture's attitude noise
    (3 mrad) otherwise goes through the load's estimated angular velocity into every plan,
    and at these tracking weights makes the load oscillate by 10 deg."""
    barrier: float = 1.0e-3
    """Interior-point barrier parameter, per second: a constraint pushing with multiplier z
    stays barrier / z from its bound (normalized units)."""
    max_iter: int = 20
    """Gauss-Newton SQP iteration limit of the first plan (cold start)."""
    rti_iterations: int = 1
    """SQP iterations of every later plan, warm-started (1: real-time iteration)."""
    substeps: int = 1
    """RK4 steps per horizon interval."""
    recovery_iterations: int = 3
    """Extra SQP iterations of a plan that fails its check, before and after slowing down."""
    pace_factor: float = 0.5
    """Factor on the pace along the reference when no plan satisfies the constraints (-)."""
    pace_min: float = 0.1
    """Pace below which the reference is held (-)."""
    pace_recovery: float = 0.1
    """Pace regained after each plan that satisfies the constraints (-)."""
    pace_catch_up: float = 0.2
    """How far above 1 the pace may rise while the load lags behind the reference (-)."""


def _teacher(path: str, table: dict) -> TeacherParams:
    fields = {f.name: checks.non_negative for f in dataclasses.fields(TeacherParams)}
    for name in (
        "tension_max",
        "thrust_min",
        "thrust_margin",
        "max_cable_jerk",
        "max_tension_accel",
        "weight_position",
        "exact_penalty",
        "barrier",
        "pace_factor",
        "pace_recovery",
        "measurement_gain",
        "max_tilt_deg",
    ):
        fields[name] = checks.positive

    fields["max_iter"] = checks.integer(1)
    fields["rti_iterations"] = checks.integer(1)
    fields["recovery_iterations"] = checks.integer(0)
    fields["substeps"] = checks.integer(1)
    fields["cable_weights_for"] = checks.integer(0)

    fields["prior"] = checks.choice(TEACHER_PRIORS)
    teacher = checks.build(TeacherParams, path, table, fields)
    if teacher.tension_min >= teacher.tension_max:
        raise ConfigError(
            f"{path}.tension_min: expected less than tension_max="
            f"{teacher.tension_max!r}, got {teacher.tension_min!r}"
        )
    if teacher.max_tilt_deg >= 90.0:
        raise ConfigError(f"{path}.max_tilt_deg: expected below 90, got {teacher.max_tilt_deg!r}")
    if teacher.measurement_gain > 1.0:
        raise ConfigError(f"{path}.measurement_gain: expected at most 1, got {teacher.measurement_gain!r}")
    if teacher.thrust_margin > 1.0:
        raise ConfigError(f"{path}.thrust_margin: expected at most 1, got {teacher.thrust_margin!r}")
    if teacher.pace_factor >= 1.0:
        raise ConfigError(f"{path}.pace_factor: expected below 1 (a slowdown), got {teacher.pace_factor!r}")
    for name in ("pace_min", "pace_recovery", "pace_catch_up"):
        if getattr(teacher, name) > 1.0:
            raise ConfigError(f"{path}.{name}: expected at most 1, got {getattr(teacher, name)!r}")
    return teacher
