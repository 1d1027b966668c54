"""Whether a configured system can hang in hover at all: checked before any flight.

A load too heavy for the rotors, a cable geometry with no equilibrium or a hover tilt beyond
what the controller commands cannot be flown; such a configuration is refused with the numbers
that make it so, instead of being flown into a diverged episode. Both the nominal system (what
planners are told) and the simulated one (with ``[mismatch]``) are checked.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass

import numpy as np

from cableload_sim.errors import UsageError
from cableload_sim.params import Config, SystemParams
from cableload_sim.physics.statics import hover_geometry, hover_state, load_wrench, skew, wrench_correction
from cableload_sim.rotations import quat_to_matrix

HOVER_THRUST_LIMIT = 0.95
"""Largest hover thrust as a fraction of a quadrotor's maximum. Above it the rotors saturate
as soon as the load moves: on the paper's setup with the formation planner, the hover error
grows 20-fold at 101 % (a 2.7 kg load) and the load falls, diverged, at 136 % (4 kg)."""


def check_hover(config: Config) -> None:
    """Refuse (``UsageError``) a configuration whose system cannot hover: no equilibrium of
    the cables, or a quadrotor whose hover thrust, rotor speeds or tilt leave its limits."""
    check_system_hover(config.system, config.controller.max_tilt_deg, "")
    if config.mismatch != type(config.mismatch)():
        # the load starts level (``Simulator.reset``) and tilts about an offset centre of mass
        check_system_hover(
            config.mismatch.without_com_offset().apply(config.system),
            config.controller.max_tilt_deg,
            " (as simulated, with [mismatch])",
        )


def check_system_hover(system: SystemParams, max_tilt_deg: float, which: str = "") -> None:
    """``check_hover`` for one system; ``which`` names it in the message."""
    load = f"load of {system.load.mass:g} kg on {system.n_uavs} cables{which}"
    try:
        with np.errstate(all="ignore"):
            hover = hover_state(system, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
    except (ValueError, ArithmeticError) as err:
        raise UsageError(f"the {load} has no hover equilibrium: {err}") from None
    if not all(np.isfinite(a).all() for a in (hover.uav_p, hover.rotor_speeds, hover.tensions)):
        raise UsageError(
            f"the {load} has no hover equilibrium (the statics give non-finite "
            "values); check load.attachments and the cable lengths"
        )
    needed = np.linalg.norm(hover.thrusts, axis=1)
    largest = np.array([quad.rotor.max_thrust() for quad in system.quadrotors])
    i = int(np.argmax(needed / largest))
    if needed[i] > HOVER_THRUST_LIMIT * largest[i]:
        raise UsageError(
            f"the {load} is too heavy: quadrotor {i} needs {needed[i]:.3g} N of thrust to hover, "
            f"{needed[i] / largest[i]:.0%} of its maximum {largest[i]:.3g} N (at most "
            f"{HOVER_THRUST_LIMIT:.0%}); expected a lighter load, more quadrotors or "
            "stronger rotors"
        )
    for i, (quad, thrust, speeds) in enumerate(
        zip(system.quadrotors, hover.thrusts, hover.rotor_speeds, strict=True)
    ):
        needed = float(np.linalg.norm(thrust))
        if needed < quad.rotor.min_thrust():
            raise UsageError(
                f"the {load}: quadrotor {i} needs only {needed:.3g} N of thrust to hover, less "
                f"than its rotors give at idle ({quad.rotor.min_thrust():.3g} N)"
            )
        if speeds.max() > quad.rotor.speed_max or speeds.min() < quad.rotor.speed_min:
            raise UsageError(
                f"the {load}: quadrotor {i} needs rotor speeds {np.round(speeds, 0).tolist()} "
                f"rad/s to hover, outside [{quad.rotor.speed_min:g}, {quad.rotor.speed_max:g}]"
            )
        tilt = math.degrees(math.atan2(math.hypot(thrust[0], thrust[1]), thrust[2]))
        if tilt > max_tilt_deg:
            raise UsageError(
                f"the {load}: quadrotor {i} must tilt {tilt:.1f} deg to hover, more than "
                f"controller.max_tilt_deg = {max_tilt_deg:g}"
            )


# --------------------------------------------------------------------------------------------
# Whether a load reference can be flown by the configured system
# --------------------------------------------------------------------------------------------

CHECK_STEP_S = 0.01
"""Sampling step of the reference check (s): a hairpin of 0.3 m radius at 1.5 m/s lasts 0.6 s."""

MAX_CHECK_SAMPLES = 200_000
"""A reference that never repeats is checked over a long flight at most this many times (the
step grows beyond ``CHECK_STEP_S`` past 2000 s)."""


@dataclass(frozen=True)
class Peak:
    """The largest value of one quantity along a reference, and where it occurs."""

    value: float
    t: float
    """Time of the peak (s)."""
    position: tuple[float, float, float]
    """The load reference's position at that time (m)."""
    uav: int | None = None
    """The quadrotor it concerns, for per-quadrotor quantities."""

    def where(self) -> str:
        x, y, z = self.position
        who = f"quadrotor {self.uav}, " if self.uav is not None else ""
        return f"{who}t = {self.t:.2f} s, load at ({x:.2f}, {y:.2f}, {z:.2f}) m"


@dataclass(frozen=True)
class Excess:
    """One limit the reference goes beyond."""

    quantity: str
    needed: float
    limit: float
    unit: str
    limit_name: str
    """The configuration key (or keys) the limit comes from."""
    peak: Peak

    def message(self) -> str:
        over = abs(self.needed - self.limit)
        ratio = self.needed / self.limit if self.limit else math.inf
        side = "above" if self.needed > self.limit else "below"
        return (
            f"{self.quantity} {self.needed:.3g} {self.unit} at {self.peak.where()}: "
            f"{over:.3g} {self.unit} {side} the limit {self.limit:.3g} {self.unit} "
            f"({ratio:.0%} of it; {self.limit_name})"
        )


@dataclass(frozen=True)
class ReferenceCheck:
    """What a load reference asks of the system over a flight, against its limits.

    Speeds, accelerations and jerks are the load's. Thrust, tilt and tension are a quasi-static
    estimate: the formation's hover cable forces turned with the load's attitude and with the
    direction of ``a + g``, scaled by ``|a + g| / g``, corrected (least squares) so that they give
    the load the reference's acceleration and angular acceleration, each quadrotor carried
    rigidly with the load. Exact in hover; the swing and the planners' corrections come on top,
    which is why the thrust limit keeps the teacher's margin.
    """

    reference: str
    duration_s: float
    speed: Peak
    acceleration: Peak
    jerk: Peak
    angular_rate: Peak
    thrust: Peak
    tilt: Peak
    tension_max: Peak
    tension_min: Peak
    limits: dict
    excesses: tuple[Excess, ...]

    @property
    def flyable(self) -> bool:
        return not self.excesses

    def as_dict(self) -> dict:
        def peak(p, unit):
            return {"value": p.value, "unit": unit, "t": p.t, "position": list(p.position), "uav": p.uav}

        return {
            "reference": self.reference,
            "duration_s": self.duration_s,
            "flyable": self.flyable,
            "peaks": {
                "speed": peak(self.speed, "m/s"),
                "acceleration": peak(self.acceleration, "m/s^2"),
                "jerk": peak(self.jerk, "m/s^3"),
                "angular_rate": peak(self.angular_rate, "rad/s"),
                "thrust": peak(self.thrust, "N"),
                "tilt": peak(self.tilt, "deg"),
                "tension_max": peak(self.tension_max, "N"),
                "tension_min": peak(self.tension_min, "N"),
            },
            "limits": dict(self.limits),
            "excesses": [e.message() for e in self.excesses],
        }

    def message(self) -> str:
        """One paragraph: what is beyond the limits, or that nothing is."""
        if self.flyable:
            return (
                f"{self.reference}: flyable over {self.duration_s:g} s (thrust at most "
                f"{self.thrust.value:.3g} N of {self.limits['thrust_N']:.3g} N, tilt "
                f"{self.tilt.value:.3g} of {self.limits['tilt_deg']:g} deg)"
            )
        lines = "; ".join(e.message() for e in self.excesses)
        return f"{self.reference} cannot be flown over {self.duration_s:g} s: {lines}"


def check_duration(reference) -> float:
    """What ``check_reference`` covers by default: the smooth start and one lap of a loop, a
    move and one second of hold, or one second of a hover."""
    period = reference.period_s
    if period is None:
        return 1.0
    ramp = getattr(reference, "ramp_s", None)
    return float(period + ramp) if ramp is not None else float(period + 1.0)


def check_reference(
    reference, config: Config, duration: float | None = None, step: float = CHECK_STEP_S
) -> ReferenceCheck:
    """Peak speed, acceleration, jerk, angular rate, and the thrust, tilt and cable tensions
    ``reference`` needs over ``duration`` seconds (default ``check_duration``), against the
    nominal system's limits: thrust ``teacher.thrust_margin`` of each quadrotor's maximum,
    tilt ``controller.max_tilt_deg``, tensions within ``teacher.tension_min``..``tension_max``.
    """
    duration = check_duration(reference) if duration is None else float(duration)
    if not (math.isfinite(duration) and duration > 0.0):
        raise UsageError(f"reference check: expected a positive duration (s), got {duration!r}")
    span = min(duration, _new_motion_within(reference))
    count = min(MAX_CHECK_SAMPLES, int(math.ceil(span / step)) + 1)
    t = np.linspace(0.0, span, max(2, count))
    s = reference.sample(t)
    system = config.system
    forces, thrusts = _quasi_static_forces(system, s)
    speed = np.linalg.norm(s.v, axis=1)
    acceleration = np.linalg.norm(s.a, axis=1)
    jerk = np.linalg.norm(s.j, axis=1)
    rate = np.linalg.norm(s.omega, axis=1)
    thrust = np.linalg.norm(thrusts, axis=2)  # (K, n)
    tilt = np.degrees(np.arctan2(np.linalg.norm(thrusts[:, :, :2], axis=2), thrusts[:, :, 2]))
    tension = np.linalg.norm(forces, axis=2)
    limits_thrust = np.array([config.teacher.thrust_margin * q.rotor.max_thrust() for q in system.quadrotors])
    teacher = config.teacher
    limits = {
        "thrust_N": float(limits_thrust.min()),
        "thrust_margin": teacher.thrust_margin,
        "tilt_deg": config.controller.max_tilt_deg,
        "tension_min_N": teacher.tension_min,
        "tension_max_N": teacher.tension_max,
    }

    def peak(values: np.ndarray, smallest: bool = False) -> Peak:
        flat = values.argmin() if smallest else values.argmax()
        k, *uav = np.unravel_index(flat, values.shape)
        return Peak(
            float(values[(k, *uav)]),
            float(t[k]),
            (float(s.p[k, 0]), float(s.p[k, 1]), float(s.p[k, 2])),
            int(uav[0]) if uav else None,
        )

    worst = peak(thrust / limits_thrust)  # the quadrotor closest to its own limit
    k = int(np.searchsorted(t, worst.t))
    thrust_peak = dataclasses.replace(worst, value=float(thrust[k, worst.uav]))
    check = ReferenceCheck(
        reference=_reference_label(reference),
        duration_s=duration,
        speed=peak(speed),
        acceleration=peak(acceleration),
        jerk=peak(jerk),
        angular_rate=peak(rate),
        thrust=thrust_peak,
        tilt=peak(tilt),
        tension_max=peak(tension),
        tension_min=peak(tension, smallest=True),
        limits=limits,
        excesses=(),
    )
    excesses = []
    if worst.value > 1.0:
        assert worst.uav is not None  # a thrust peak is always some quadrotor's
        rotor_max = system.quadrotors[worst.uav].rotor.max_thrust()
        excesses.append(
            Excess(
                "thrust",
                thrust_peak.value,
                float(limits_thrust[worst.uav]),
                "N",
                f"teacher.thrust_margin {teacher.thrust_margin:g} of the {rotor_max:.3g} N maximum",
                thrust_peak,
            )
        )
    if check.tilt.value > config.controller.max_tilt_deg:
        excesses.append(
            Excess(
                "tilt",
                check.tilt.value,
                config.controller.max_tilt_deg,
                "deg",
                "controller.max_tilt_deg",
                check.tilt,
            )
        )
    if check.tension_max.value > teacher.tension_max:
        excesses.append(
            Excess(
                "cable tension",
                check.tension_max.value,
                teacher.tension_max,
                "N",
                "teacher.tension_max",
                check.tension_max,
            )
        )
    if check.tension_min.value < teacher.tension_min:
        excesses.append(
            Excess(
                "cable tension",
                check.tension_min.value,
                teacher.tension_min,
                "N",
                "teacher.tension_min: a slack cable",
                check.tension_min,
            )
        )
    return dataclasses.replace(check, excesses=tuple(excesses))


def require_flyable(
    reference, config: Config, duration: float, force: bool = False, warn=None
) -> ReferenceCheck:
    """``check_reference`` over a flight: a reference beyond the limits is refused
    (``UsageError``), or with ``force`` reported through ``warn`` (default: a warning)."""
    check_hover(config)  # a system that cannot hover is the system's fault, not the reference's
    check = check_reference(reference, config, duration)
    if check.flyable:
        return check
    if not force:
        raise UsageError(
            f"{check.message()}. Expected a reference within the limits: slow it "
            "down or widen its turns (see `cableload trajectories --check`), or "
            "fly it anyway with --force"
        )
    (warn or (lambda text: warnings.warn(text, stacklevel=3)))(f"--force: {check.message()}")
    return check


def _new_motion_within(reference) -> float:
    """Time (s) after which ``reference`` asks nothing it has not asked before: a hover at
    once, a move once it has ended, a closed loop after its start and a lap (and a period of its
    height and yaw oscillations); infinite for an open path."""
    from cableload_sim.trajectories import Hover, LoopReference, OscillatingYaw, PoseToPose

    if isinstance(reference, Hover):
        return 1.0
    if isinstance(reference, PoseToPose):
        return reference.duration_s + 1.0
    if isinstance(reference, LoopReference) and getattr(reference.curve, "closed", True):
        span = reference.ramp_s + reference.period_s
        height = reference.height
        if height.amplitude > 0.0 and height.frequency_hz > 0.0:
            span += 1.0 / height.frequency_hz
        yaw = reference.orientation
        if isinstance(yaw, OscillatingYaw) and yaw.amplitude > 0.0 and yaw.frequency_hz > 0.0:
            span += 1.0 / yaw.frequency_hz
        return span
    return math.inf


def _reference_label(reference) -> str:
    described = reference.describe()
    orientation = described.get("orientation")
    return f"{reference.name} ({orientation})" if orientation else str(reference.name)


def _quasi_static_forces(system: SystemParams, s) -> tuple[np.ndarray, np.ndarray]:
    """Cable forces on the load and the quadrotors' thrusts (world, (K, n, 3) each) that
    carry the load along the reference samples ``s`` (see ``ReferenceCheck``)."""
    hover = hover_state(system, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
    geometry = hover_geometry(system)
    g = system.gravity
    hover_forces = geometry.tensions[:, None] * geometry.directions  # load frame, on the load
    offsets = hover.uav_p  # quadrotor positions in the load frame
    R = quat_to_matrix(s.q)  # (K, 3, 3)
    specific = s.a + np.array([0.0, 0.0, g])  # force per unit mass the cables and rotors give
    scale = np.linalg.norm(specific, axis=1) / g
    Q = _tilt_from_vertical(specific)
    turn = Q @ R
    forces = scale[:, None, None] * np.einsum("kab,nb->kna", turn, hover_forces)
    # Least-squares correction to the load's wrench: m a + m g e_z and R (J alpha + w x J w).
    arms = np.einsum("kab,nb->kna", R, system.attachment_array())
    forces = forces + wrench_correction(forces, arms, *load_wrench(system, R, s))
    # Each quadrotor rides rigidly with the load.
    body_offsets = np.einsum("kab,nb->kna", R, offsets)
    omega_w = np.einsum("kab,kb->ka", R, s.omega)
    alpha_w = np.einsum("kab,kb->ka", R, s.alpha)
    uav_acc = (
        s.a[:, None, :]
        + np.cross(alpha_w[:, None, :], body_offsets)
        + np.cross(omega_w[:, None, :], np.cross(omega_w[:, None, :], body_offsets))
    )
    masses = np.array([q.mass for q in system.quadrotors])
    thrusts = masses[None, :, None] * (uav_acc + np.array([0.0, 0.0, g])) + forces
    return forces, thrusts


def _tilt_from_vertical(directions: np.ndarray) -> np.ndarray:
    """(K, 3, 3) smallest rotations turning e_z onto each of ``directions`` (K, 3)."""
    unit = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    k = np.cross(np.array([0.0, 0.0, 1.0]), unit)
    c = unit[:, 2]
    K = skew(k)
    factor = np.where(c > -1.0 + 1e-12, 1.0 / (1.0 + c), 0.0)
    return np.eye(3) + K + factor[:, None, None] * (K @ K)
