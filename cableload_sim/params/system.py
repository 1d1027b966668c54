"""The system: the load, the quadrotors and their rotors, the cables, the hover formation."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import ConfigError

MAX_UAVS = 64
"""Most quadrotors a system may have: every pair's distance is checked at every sample."""


MIN_ATTACHMENT_SPACING_M = 1e-3
"""Closest two load attachment points may be (m)."""


@dataclass(frozen=True)
class RotorParams:
    """The four rotors of one quadrotor, in X configuration."""

    arm_length: float = 0.15
    """Distance from the centre of gravity to each rotor axis (m)."""
    thrust_coeff: float = 8.0e-7
    """Thrust per squared rotor speed, k_f (N s^2 / rad^2)."""
    torque_coeff: float = 1.28e-8
    """Drag torque per squared rotor speed, k_m (N m s^2 / rad^2)."""
    speed_min: float = 150.0
    """Lowest rotor speed while armed (rad/s)."""
    speed_max: float = 2500.0
    """Highest rotor speed (rad/s)."""
    time_constant: float = 0.025
    """First-order motor time constant (s)."""

    def max_thrust(self) -> float:
        """Collective thrust with every rotor at full speed (N)."""
        return 4.0 * self.thrust_coeff * self.speed_max**2

    def min_thrust(self) -> float:
        """Collective thrust with every rotor at idle (N)."""
        return 4.0 * self.thrust_coeff * self.speed_min**2

    def rotor_positions(self) -> np.ndarray:
        """Rotor centres in the body frame (4, 3), m: front-right, rear-left, front-left, rear-right."""
        d = self.arm_length / math.sqrt(2.0)
        return np.array([[d, -d, 0.0], [-d, d, 0.0], [d, d, 0.0], [-d, -d, 0.0]])

    def spin_directions(self) -> np.ndarray:
        """+1 for rotors whose drag torque acts along +z of the body, -1 otherwise (4,)."""
        return np.array([1.0, 1.0, -1.0, -1.0])

    def allocation_matrix(self) -> np.ndarray:
        """Map from the four rotor thrusts (N) to [collective thrust (N), body torque (N m)]."""
        pos = self.rotor_positions()
        ratio = self.torque_coeff / self.thrust_coeff
        return np.vstack([np.ones(4), pos[:, 1], -pos[:, 0], ratio * self.spin_directions()])


@dataclass(frozen=True)
class QuadrotorParams:
    """One quadrotor: a rigid body with four rotors and a cable attached below it."""

    mass: float = 0.6
    """Mass (kg)."""
    inertia: tuple[float, float, float] = (0.0025, 0.0025, 0.0045)
    """Principal moments of inertia about the body axes (kg m^2)."""
    attachment: tuple[float, float, float] = (0.0, 0.0, -0.03)
    """Cable attachment point in the body frame (m); 0.03 m below the centre of gravity."""
    rotor: RotorParams = field(default_factory=RotorParams)

    def inertia_matrix(self) -> np.ndarray:
        """Inertia tensor in the body frame (kg m^2)."""
        return np.diag(self.inertia)


@dataclass(frozen=True)
class LoadParams:
    """The rigid load, its frame at the centre of mass."""

    mass: float = 1.4
    """Mass (kg)."""
    size: tuple[float, float, float] = (0.54, 0.45, 0.15)
    """Box dimensions along the load's x, y, z axes (m); used for the default inertia and drawing."""
    attachments: tuple[tuple[float, float, float], ...] = (
        (0.26, 0.22, 0.06),
        (0.26, -0.22, 0.06),
        (-0.28, 0.0, 0.06),
    )
    """Cable attachment points rho_i in the load frame (m), one per quadrotor."""
    inertia: tuple[float, float, float] | None = None
    """Principal moments of inertia (kg m^2); None means a solid box of ``size`` and ``mass``."""
    box_centre: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Centre of the box (its drag faces, walls and corners) in the load frame (m): at the
    centre of mass unless ``[mismatch] load_com_offset`` displaces the mass (not a file key)."""

    def inertia_matrix(self) -> np.ndarray:
        """Inertia tensor in the load frame (kg m^2)."""
        if self.inertia is not None:
            return np.diag(self.inertia)
        a, b, c = self.size
        return np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * self.mass / 12.0


@dataclass(frozen=True)
class CableParams:
    """A massless cable: a unilateral spring-damper, pulling only when stretched."""

    length: float = 1.0
    """Rest length (m)."""
    stiffness: float = 5000.0
    """Axial stiffness (N/m); 5 mm of stretch at 25 N, i.e. stiff but not rigid."""
    damping: float = 15.0
    """Axial damping (N s/m)."""


@dataclass(frozen=True)
class FormationParams:
    """Hover geometry: where the quadrotors sit relative to the load at rest.

    The cables splay outward along lines that meet on the vertical through the load's centre
    of mass, below it, so the hanging load is in equilibrium level. The splay is the larger of
    ``min_cable_angle_deg`` and the angle that keeps neighbours ``min_spacing_m`` apart.
    """

    min_cable_angle_deg: float = 30.0
    """Smallest mean angle between a cable and the vertical at hover (deg)."""
    min_spacing_m: float = 1.2
    """Smallest distance between two quadrotors at hover (m)."""


@dataclass(frozen=True)
class SystemParams:
    """The whole multi-lift system: one load, n quadrotors, n cables (quadrotor i on cable i)."""

    load: LoadParams
    quadrotors: tuple[QuadrotorParams, ...]
    cables: tuple[CableParams, ...]
    gravity: float = 9.81
    """Gravitational acceleration, pointing down the world z axis (m/s^2)."""
    formation: FormationParams = field(default_factory=FormationParams)

    def __post_init__(self):
        n = len(self.load.attachments)
        if not 2 <= n <= MAX_UAVS:
            raise ConfigError(
                f"load.attachments: expected 2 to {MAX_UAVS} attachment points (one per quadrotor), got {n}"
            )
        if len(self.quadrotors) != n or len(self.cables) != n:
            raise ConfigError(
                f"load.attachments: {n} attachment points but {len(self.quadrotors)} quadrotors "
                f"and {len(self.cables)} cables; expected one of each per attachment point"
            )
        rho = np.asarray(self.load.attachments, dtype=float)
        gaps = np.linalg.norm(rho[:, None, :] - rho[None, :, :], axis=-1)
        gaps[np.diag_indices(n)] = np.inf
        i, j = np.unravel_index(np.argmin(gaps), gaps.shape)
        if gaps[i, j] < MIN_ATTACHMENT_SPACING_M:
            raise ConfigError(
                f"load.attachments: points {min(i, j)} and {max(i, j)} coincide at "
                f"{rho[i].tolist()} m; expected distinct points (at least "
                f"{MIN_ATTACHMENT_SPACING_M:g} m apart), one per cable"
            )

    @property
    def n_uavs(self) -> int:
        return len(self.quadrotors)

    def total_mass(self) -> float:
        """Load plus quadrotors (kg)."""
        return self.load.mass + sum(q.mass for q in self.quadrotors)

    def attachment_array(self) -> np.ndarray:
        """Load attachment points (n, 3), load frame (m)."""
        return np.array(self.load.attachments, dtype=float)

    def with_uavs(self, n: int) -> SystemParams:
        """Same parts, ``n`` quadrotors on a regular polygon of the current mean attachment radius."""
        n = checks.integer(2, MAX_UAVS)("uavs", n)
        if n == self.n_uavs:
            return self
        rho = self.attachment_array()
        radius = float(np.mean(np.linalg.norm(rho[:, :2], axis=1)))
        height = float(np.mean(rho[:, 2]))
        load = dataclasses.replace(self.load, attachments=polygon_attachments(n, radius, height))
        return dataclasses.replace(
            self,
            load=load,
            quadrotors=(self.quadrotors[0],) * n,
            cables=(self.cables[0],) * n,
        )


def polygon_attachments(n: int, radius: float, height: float) -> tuple[tuple[float, float, float], ...]:
    """``n`` attachment points on a regular polygon in the plane z = height, the first on +x."""
    angles = 2.0 * math.pi * np.arange(n) / n
    return tuple((radius * math.cos(a), radius * math.sin(a), height) for a in angles)


def _rotor(path: str, table: dict) -> RotorParams:
    fields = {
        name: checks.positive
        for name in ("arm_length", "thrust_coeff", "torque_coeff", "speed_max", "time_constant")
    }
    fields["speed_min"] = checks.non_negative
    rotor = checks.build(RotorParams, path, table, fields)
    if rotor.speed_min >= rotor.speed_max:
        raise ConfigError(
            f"{path}.speed_min: expected less than speed_max={rotor.speed_max!r}, got {rotor.speed_min!r}"
        )
    return rotor


def _quadrotor(path: str, table: dict) -> QuadrotorParams:
    fields = {
        "mass": checks.positive,
        "inertia": checks.vector(3, checks.positive),
        "attachment": checks.vector(3),
    }
    return checks.build(QuadrotorParams, path, table, fields, nested={"rotor": _rotor})


def _cable(path: str, table: dict) -> CableParams:
    fields = {"length": checks.positive, "stiffness": checks.positive, "damping": checks.non_negative}
    return checks.build(CableParams, path, table, fields)


def _formation(path: str, table: dict) -> FormationParams:
    angle = checks.number(0.0, 80.0, high_open=True, name="an angle from 0 to below 80 deg")
    return checks.build(
        FormationParams, path, table, {"min_cable_angle_deg": angle, "min_spacing_m": checks.non_negative}
    )


LOAD_FIELDS = {
    "mass": checks.positive,
    "size": checks.vector(3, checks.positive),
    "inertia": checks.vector(3, checks.positive),
    "attachments": checks.points,
}
LOAD_LAYOUT_KEYS = {
    "uavs": checks.integer(2, MAX_UAVS),
    "attachment_radius": checks.positive,
    "attachment_height": checks.finite,
}
"""The ``[load]`` keys that place the attachments on a regular polygon instead of listing
them: ``uavs`` points at ``attachment_radius`` (m, default 0.3) from the centre, at height
``attachment_height`` (m, default 0.06)."""


def _load(path: str, table: dict, n_uavs: int | None) -> LoadParams:
    checks.table(path, table, {*LOAD_FIELDS, *LOAD_LAYOUT_KEYS})
    checks.FIELD_CHECKS[LoadParams] = LOAD_FIELDS
    kwargs: dict[str, Any] = {
        name: check(f"{path}.{name}", table[name]) for name, check in LOAD_FIELDS.items() if name in table
    }
    layout = {
        name: check(f"{path}.{name}", table[name])
        for name, check in LOAD_LAYOUT_KEYS.items()
        if name in table
    }
    if "uavs" in layout:
        if n_uavs is not None and n_uavs != layout["uavs"]:
            raise ConfigError(f"{path}.uavs: {layout['uavs']} conflicts with the requested {n_uavs} uavs")
        n_uavs = layout["uavs"]
    if "attachments" in kwargs:
        if n_uavs is not None and len(kwargs["attachments"]) != n_uavs:
            raise ConfigError(
                f"{path}.attachments: expected {n_uavs} points (one per quadrotor), "
                f"got {len(kwargs['attachments'])}"
            )
    elif n_uavs is not None:
        kwargs["attachments"] = polygon_attachments(
            n_uavs, layout.get("attachment_radius", 0.3), layout.get("attachment_height", 0.06)
        )
    return LoadParams(**kwargs)
