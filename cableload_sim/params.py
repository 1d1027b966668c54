"""Parameters of the physical system, the onboard controller and the simulation, from TOML.

Each physical thing is one frozen dataclass whose fields carry their unit in the docstring.
Derived quantities (total mass, inertia of a box, allocation matrix, maximum thrust) are
methods, never stored defaults, so overriding a mass can never leave a stale value behind.

A configuration file has these tables, each optional except ``[load]``:

```toml
gravity = 9.81
[load]            # LoadParams; `attachments` (n x 3) or `uavs` + `attachment_radius`
[quadrotor]       # QuadrotorParams, the same for every quadrotor
[quadrotor.rotor] # RotorParams
[cable]           # CableParams, the same for every cable
[formation]       # FormationParams
[controller]      # ControllerParams
[simulation]      # SimulationParams
[mismatch]        # MismatchParams: what the simulator does differently from the config
[teacher]         # TeacherParams
[link]            # LinkParams: plans lost or late between planner and quadrotor
[sensing]         # SensingParams: motion capture and the filters the planners observe through
[imu]             # ImuParams: each quadrotor's IMU and the state estimate its controller flies on
[aero]            # AeroParams: drag on the load and the quadrotors, rotor drag
[wind]            # WindParams: steady wind and Dryden turbulence
[ball]            # BallParams: a ball sloshing free inside the load's box
[battery]         # BatteryParams: each quadrotor's battery, its sag limiting the rotors
[ground]          # GroundParams: contact with the plane z = 0, how cables snap taut
```

Unknown keys, wrong types and out-of-range values fail with a ``ConfigError`` naming the key,
the value and what was expected. ``load_config()`` without a path gives the paper's setup
(``cableload_sim/configs/paper.toml``). Overrides (``--set table.key=value``) change the parsed
document before that same validation.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from cableload_sim.errors import UsageError
from cableload_sim.horizon import HORIZON_S


class ConfigError(UsageError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


MAX_UAVS = 64
"""Most quadrotors a system may have: every pair's distance is checked at every sample."""

MIN_ATTACHMENT_SPACING_M = 1e-3
"""Closest two load attachment points may be (m)."""

MIN_PHYSICS_DT_S = 1e-5
"""Smallest physics step (s): 100 000 steps per simulated second, about 0.1-0.5 s of wall
time per simulated second here."""

MAX_CONFIG_BYTES = 1 << 20
"""Largest configuration file read (bytes); a TOML configuration is a few kB."""


# ---------------------------------------------------------------------------------------------
# Field checks. Each check returns the converted value or raises ConfigError.


def _number(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{path}: expected a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(f"{path}: expected a finite number, got {value!r}")
    return value


def _positive(path: str, value: Any) -> float:
    value = _number(path, value)
    if value <= 0.0:
        raise ConfigError(f"{path}: expected a positive number, got {value!r}")
    return value


def _non_negative(path: str, value: Any) -> float:
    value = _number(path, value)
    if value < 0.0:
        raise ConfigError(f"{path}: expected a non-negative number, got {value!r}")
    return value


def _integer(path: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{path}: expected an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ConfigError(f"{path}: expected an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{path}: expected an integer <= {maximum}, got {value!r}")
    return value


def _vector(path: str, value: Any, length: int, check=_number) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or len(value) != length:
        raise ConfigError(f"{path}: expected a list of {length} numbers, got {value!r}")
    return tuple(check(f"{path}[{k}]", v) for k, v in enumerate(value))


def _number_list(path: str, value: Any) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{path}: expected a non-empty list of numbers, got {value!r}")
    return tuple(_number(f"{path}[{k}]", v) for k, v in enumerate(value))


def _points(path: str, value: Any) -> tuple[tuple[float, float, float], ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{path}: expected a list of [x, y, z] points, got {value!r}")
    return tuple(_vector(f"{path}[{k}]", p, 3) for k, p in enumerate(value))


def _check_table(path: str, table: Any, allowed: set[str]) -> dict:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: expected a table, got {table!r}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {unknown[0]!r}; expected one of {sorted(allowed)}"
        )
    return table


def _fields_from(cls, path: str, table: dict, checks: dict, nested: dict | None = None):
    """Build dataclass ``cls`` from ``table``: every key checked, defaults for the rest."""
    nested = nested or {}
    _check_table(path, table, set(checks) | set(nested))
    kwargs = {}
    for name, check in checks.items():
        if name in table:
            kwargs[name] = check(f"{path}.{name}", table[name])
    for name, builder in nested.items():
        if name in table:
            kwargs[name] = builder(f"{path}.{name}", table[name])
    return cls(**kwargs)


# ---------------------------------------------------------------------------------------------
# Physical parameters


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
            raise ConfigError(f"load.attachments: expected 2 to {MAX_UAVS} attachment points "
                              f"(one per quadrotor), got {n}")
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
        n = _integer("uavs", n, 2, MAX_UAVS)
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


Scale = float | tuple[float, ...]
"""A ratio for every quadrotor (one number) or one per quadrotor (a list of n)."""

MAX_COM_PRODUCT_SHARE = 0.1
"""Largest product of inertia a load centre-of-mass offset may add (m c_j c_k), as a share of
the smallest principal moment: the kernels integrate the load in its principal axes, so
those products are left out (exact for an offset along one load axis)."""


def _per_uav(path: str, value: Scale, n: int) -> tuple[float, ...]:
    """``value`` (a ``Scale``) as one ratio per quadrotor."""
    if isinstance(value, tuple):
        if len(value) != n:
            raise ConfigError(f"{path}: expected one number for every quadrotor or a list of "
                              f"{n} (one per quadrotor), got {len(value)} values")
        return value
    return (value,) * n


@dataclass(frozen=True)
class MismatchParams:
    """What the simulated system does differently from what planners and controllers are told.

    Load side: its mass, attachment points, cable lengths and centre of mass. Quadrotor side
    (each a ``Scale``): mass, inertia, rotor thrust and torque coefficients, motor time
    constant. The onboard controllers and the planners keep the nominal values.
    """

    load_mass_scale: float = 1.0
    """Simulated load mass over nominal load mass (-); inertia scales with it."""
    attachment_offsets: tuple[tuple[float, float, float], ...] | None = None
    """Added to each load attachment point, load frame (m); None for none."""
    cable_length_deltas: tuple[float, ...] | None = None
    """Added to each cable's rest length (m); None for none."""
    load_com_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The load's centre of mass from the centre of its box, load frame (m). The simulated
    load's frame sits at the centre of mass: attachments and box move by minus this, its
    inertia about the centre of mass follows from the nominal one (about the box centre) by
    the parallel-axis theorem."""
    quadrotor_mass_scale: Scale = 1.0
    """Simulated quadrotor mass over nominal (-)."""
    quadrotor_inertia_scale: Scale = 1.0
    """Simulated quadrotor moments of inertia over nominal (-)."""
    thrust_coeff_scale: Scale = 1.0
    """Simulated rotor thrust coefficient k_f over nominal (-)."""
    torque_coeff_scale: Scale = 1.0
    """Simulated rotor drag-torque coefficient k_m over nominal (-)."""
    motor_time_constant_scale: Scale = 1.0
    """Simulated motor time constant over nominal (-)."""

    def without_com_offset(self) -> MismatchParams:
        """This mismatch with the load's centre of mass at its box centre."""
        return dataclasses.replace(self, load_com_offset=(0.0, 0.0, 0.0))

    def apply(self, system: SystemParams) -> SystemParams:
        """The simulated system: ``system`` with this mismatch."""
        n = system.n_uavs
        load = system.load
        attachments = load.attachments
        if self.attachment_offsets is not None:
            if len(self.attachment_offsets) != n:
                raise ConfigError(
                    f"mismatch.attachment_offsets: expected {n} offsets (one per quadrotor), "
                    f"got {len(self.attachment_offsets)}"
                )
            attachments = tuple(
                tuple(a + d for a, d in zip(p, off))
                for p, off in zip(attachments, self.attachment_offsets)
            )
        mass = load.mass * self.load_mass_scale
        inertia = load.inertia_matrix().diagonal() * self.load_mass_scale
        com = tuple(float(c) for c in self.load_com_offset)
        if any(com):
            inertia = _inertia_about_com(inertia, mass, np.array(com))
            attachments = tuple(tuple(a - c for a, c in zip(p, com)) for p in attachments)
        load = dataclasses.replace(
            load,
            mass=mass,
            inertia=tuple(float(x) for x in inertia),
            attachments=attachments,
            box_centre=tuple(b - c for b, c in zip(load.box_centre, com)),
        )
        cables = system.cables
        if self.cable_length_deltas is not None:
            if len(self.cable_length_deltas) != n:
                raise ConfigError(
                    f"mismatch.cable_length_deltas: expected {n} values (one per cable), "
                    f"got {len(self.cable_length_deltas)}"
                )
            cables = tuple(
                dataclasses.replace(c, length=c.length + d)
                for c, d in zip(cables, self.cable_length_deltas)
            )
            for k, c in enumerate(cables):
                if c.length <= 0.0:
                    raise ConfigError(
                        f"mismatch.cable_length_deltas[{k}]: makes cable {k} length "
                        f"{c.length!r} m; expected a positive length"
                    )
        return dataclasses.replace(system, load=load, cables=cables,
                                   quadrotors=self._quadrotors(system.quadrotors))

    def _quadrotors(self, quads: tuple[QuadrotorParams, ...]) -> tuple[QuadrotorParams, ...]:
        n = len(quads)
        mass = _per_uav("mismatch.quadrotor_mass_scale", self.quadrotor_mass_scale, n)
        inertia = _per_uav("mismatch.quadrotor_inertia_scale", self.quadrotor_inertia_scale, n)
        kf = _per_uav("mismatch.thrust_coeff_scale", self.thrust_coeff_scale, n)
        km = _per_uav("mismatch.torque_coeff_scale", self.torque_coeff_scale, n)
        tau = _per_uav("mismatch.motor_time_constant_scale", self.motor_time_constant_scale, n)
        if all(s == 1.0 for s in (*mass, *inertia, *kf, *km, *tau)):
            return quads
        return tuple(
            dataclasses.replace(
                q,
                mass=q.mass * mass[i],
                inertia=tuple(j * inertia[i] for j in q.inertia),
                rotor=dataclasses.replace(
                    q.rotor,
                    thrust_coeff=q.rotor.thrust_coeff * kf[i],
                    torque_coeff=q.rotor.torque_coeff * km[i],
                    time_constant=q.rotor.time_constant * tau[i],
                ),
            )
            for i, q in enumerate(quads)
        )


def _inertia_about_com(inertia_at_box: np.ndarray, mass: float, com: np.ndarray) -> np.ndarray:
    """Principal moments about the centre of mass ``com`` (load frame, m) of a load whose
    moments about its box centre are ``inertia_at_box``: I_c = I_o - m (|c|^2 1 - c c^T),
    whose products m c_j c_k are left out (``MAX_COM_PRODUCT_SHARE``)."""
    moments = inertia_at_box - mass * (com @ com - com * com)
    where = f"mismatch.load_com_offset={com.tolist()!r} m"
    a, b, c = moments
    if moments.min() <= 0.0 or a + b < c or b + c < a or a + c < b:
        raise ConfigError(
            f"{where}: leaves the load moments of inertia {np.round(moments, 6).tolist()} kg m^2 "
            f"about its centre of mass (from {np.round(inertia_at_box, 6).tolist()} about the box "
            "centre); expected positive moments that satisfy the triangle inequality, i.e. a "
            "smaller offset or a larger load inertia")
    products = mass * np.abs(np.array([com[0] * com[1], com[1] * com[2], com[0] * com[2]]))
    if products.max() > MAX_COM_PRODUCT_SHARE * moments.min():
        raise ConfigError(
            f"{where}: adds a product of inertia of {products.max():.3g} kg m^2, more than "
            f"{MAX_COM_PRODUCT_SHARE:.0%} of the smallest principal moment ({moments.min():.3g}); "
            "the simulated load keeps its principal axes, so expected an offset mostly along "
            "one load axis")
    return moments


@dataclass(frozen=True)
class AeroParams:
    """Drag of the air on the simulated bodies (every coefficient 0: none). Planners and
    onboard controllers are not told about it.

    Load: a box; the pair of faces normal to load axis k, of area A_k (from ``load.size``),
    takes the pressure drag ``-1/2 rho C_d A_k |v_k| v_k`` of the airspeed's component v_k
    along that axis. Quadrotor frame: the same per body axis, with ``1/2 rho C_d A_k`` given.
    Rotor drag (the induced drag of a rotor moving edgewise): on each rotor, in the rotor
    plane, ``-k_d w v_perp`` at its hub, w its speed and v_perp the hub's airspeed in the plane
    (Faessler et al., RA-L 2018; RotorPy's rotor model).
    """

    air_density: float = 1.225
    """Density of the air (kg/m^3); ISA sea level."""
    load_drag_coeff: float = 0.0
    """Drag coefficient C_d of each face of the load's box (-)."""
    quadrotor_drag: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Frame drag 1/2 rho C_d A of a quadrotor per body axis x, y, z (N s^2/m^2 = kg/m)."""
    rotor_drag_coeff: float = 0.0
    """Rotor drag k_d: in-plane force per rotor speed and per in-plane airspeed (N s^2/(rad m)
    = kg/rad)."""

    def load_drag(self, load: LoadParams) -> np.ndarray:
        """1/2 rho C_d A_k of the load's faces normal to each load axis (kg/m)."""
        a, b, c = load.size
        return 0.5 * self.air_density * self.load_drag_coeff * np.array([b * c, a * c, a * b])

    def any_drag(self) -> bool:
        return self.load_drag_coeff > 0.0 or any(self.quadrotor_drag) \
            or self.rotor_drag_coeff > 0.0


@dataclass(frozen=True)
class BallParams:
    """A ball free inside the load's box (the paper's sloshing load, section 6.6): a point
    mass with its own position and velocity, kept inside the box (closed, its walls the
    faces of ``load.size`` around ``load.box_centre``) by stiff, damped penalty contact along
    each wall's normal; the reaction acts on the load. The ball does not spin: friction
    slides it (a rolling ball's resistance is small, hence none by default). Planners and
    onboard controllers are not told about it."""

    enabled: bool = False
    mass: float = 0.6
    """Mass (kg); the paper's ball, 0.6 kg in the 1.4 kg basket."""
    radius: float = 0.05
    """Radius (m): the ball touches a wall when its centre is this close to it."""
    stiffness: float = 2.0e4
    """Wall contact force per metre of penetration (N/m)."""
    damping: float = 40.0
    """Wall contact force per m/s of approach (N s/m); pushes only, never pulls."""
    friction: float = 0.0
    """Coulomb friction coefficient of the ball sliding on a wall (-)."""
    slip_speed: float = 0.01
    """Sliding speed below which friction grows linearly from 0 (m/s): Coulomb friction,
    regularized so that the stepping stays smooth."""

    def contact_frequency(self) -> float:
        """Angular frequency of the ball bouncing on a wall, sqrt(k / m) (rad/s)."""
        return math.sqrt(self.stiffness / self.mass)


BATTERY_CELL_OCV = (3.27, 3.69, 3.73, 3.77, 3.79, 3.82, 3.87, 3.92, 3.97, 4.10, 4.20)
"""Open-circuit voltage of one LiPo cell at state of charge 0, 0.1, ..., 1 (V): a typical
discharge curve (steep below 10 %, a plateau around 3.8 V, 4.2 V full)."""


@dataclass(frozen=True)
class BatteryParams:
    """Each quadrotor's battery (Thevenin model without RC branch): terminal voltage
    ``V = OCV(soc) - R I``, the current drawn by the rotors' electrical power
    ``P = sum k_m w^3 / efficiency = V I``, the charge falling by ``I`` per second. A rotor's
    top speed is ``speed_max * min(1, V / V_nominal)`` (a motor's speed is proportional to its
    voltage; V_nominal: the full pack unloaded), so the thrust available falls as the battery
    sags and empties. Planners and onboard controllers are not told about it."""

    enabled: bool = False
    cells: int = 4
    """LiPo cells in series (-): 4S is the class of a 20 N, 0.6 kg quadrotor."""
    capacity_ah: float = 1.5
    """Charge of a full battery (A h)."""
    internal_resistance: float = 0.05
    """Internal resistance of the pack (ohm)."""
    efficiency: float = 0.75
    """Rotor shaft power over electrical power, motors and speed controllers together (-)."""
    initial_charge: float = 1.0
    """State of charge at the start (-)."""
    cell_ocv: tuple[float, ...] = BATTERY_CELL_OCV
    """Open-circuit voltage of a cell at state of charge 0, 0.1, ..., 1 (V), increasing."""

    def ocv_table(self) -> np.ndarray:
        """Open-circuit voltage of the pack at state of charge 0, 0.1, ..., 1 (V)."""
        return self.cells * np.asarray(self.cell_ocv, dtype=float)

    def nominal_voltage(self) -> float:
        """Voltage at which the rotors reach ``speed_max``: the full pack, unloaded (V)."""
        return float(self.ocv_table()[-1])

    def open_circuit_voltage(self, soc: float) -> float:
        """OCV of the pack at state of charge ``soc`` (V), linear between the table's points."""
        table = self.ocv_table()
        return float(np.interp(soc, np.linspace(0.0, 1.0, table.size), table))


@dataclass(frozen=True)
class WindParams:
    """The wind the simulated bodies fly in: a steady part plus Dryden turbulence, the same at
    every point (the system is small against the turbulence scales), generated per episode
    from a seeded generator (``cableload_sim.physics.wind``). Planners are not told about it.

    Turbulence components: u along the steady wind's horizontal direction (world x without
    one), v horizontal across it, w vertical; MIL-F-8785C's Dryden spectra, frozen turbulence
    carried past at the steady wind's speed (at least ``MIN_WIND_SPEED``).
    """

    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Steady wind velocity, world frame (m/s)."""
    turbulence_sigma: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Standard deviations of the turbulence components u, v, w (m/s); 0: none."""
    turbulence_length: tuple[float, float, float] = (23.0, 23.0, 3.0)
    """Scale lengths L_u, L_v, L_w (m); MIL-HDBK-1797's low-altitude model at 3 m height:
    L_w = h, L_u = L_v = h / (0.177 + 0.000823 h)^1.2 (h in feet)."""
    sample_dt: float = 0.01
    """Period of the generated turbulence samples (s); the kernel interpolates linearly."""
    seed: int = 0
    """Seed of the turbulence generator when the simulator is given none."""

    def turbulent(self) -> bool:
        return any(s > 0.0 for s in self.turbulence_sigma)


MIN_WIND_SPEED = 1.0
"""Speed at which frozen turbulence is carried past the system when the steady wind is slower
(m/s): the Dryden time scales L / V need a V."""


# ---------------------------------------------------------------------------------------------
# Controller and simulation


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


@dataclass(frozen=True)
class LinkParams:
    """The radio link from the planners to the quadrotors: each plan is lost, or arrives late.

    Every plan is dropped with probability ``drop_fraction``, independently of the others;
    the rest arrive after a delay drawn uniformly in [``delay_min_s``, ``delay_max_s``], in the
    order they were sent (ROS1's TCP transport keeps the order). Off unless ``enabled``.
    """

    enabled: bool = False
    """Whether plans go through this link; off, every plan arrives when it is sent."""
    drop_fraction: float = 0.2
    """Probability that a plan is lost (-), in [0, 1)."""
    delay_min_s: float = 0.0
    """Shortest delay of a plan that arrives (s)."""
    delay_max_s: float = 0.03
    """Longest delay of a plan that arrives (s); below the plan's horizon."""


@dataclass(frozen=True)
class SensingParams:
    """What the planners observe: motion capture of every body, filtered by an EKF per body.

    Each capture gives every body's pose with a constant bias (drawn per body and per episode)
    plus white noise, and reaches the filter ``latency_s`` after it was taken. The filter of
    each body is a constant-acceleration Kalman filter of its position (white jerk) and an
    error-state EKF of its attitude with constant body rates (white angular acceleration);
    planners get its estimate predicted to their time. Off
    unless ``enabled`` (planners then see the true state).
    """

    enabled: bool = False
    """Whether planners observe through the sensors; off, they see the true state."""
    mocap_rate_hz: float = 100.0
    """Motion-capture rate (Hz); a whole number of physics steps per capture."""
    latency_s: float = 0.005
    """From a capture to its use by the filter (s): processing and transport."""
    position_noise_m: float = 0.0005
    """Standard deviation of the white position noise, per axis (m)."""
    attitude_noise_rad: float = 0.003
    """Standard deviation of the white attitude noise, a small rotation per body axis (rad)."""
    position_bias_m: float = 0.001
    """Standard deviation of each body's constant position bias, per axis (m)."""
    attitude_bias_rad: float = 0.005
    """Standard deviation of each body's constant attitude bias, per body axis (rad)."""
    load_jerk_psd: float = 0.3
    """Spectral density of the load's white jerk in its filter's model (m^2/s^5)."""
    load_angular_accel_psd: float = 0.003
    """Spectral density of the load's white angular acceleration in its filter (rad^2/s^3)."""
    uav_jerk_psd: float = 1.0
    """Spectral density of a quadrotor's white jerk in its filter (m^2/s^5)."""
    uav_angular_accel_psd: float = 0.03
    """Spectral density of a quadrotor's white angular acceleration in its filter (rad^2/s^3)."""


@dataclass(frozen=True)
class ImuParams:
    """Each quadrotor's inertial sensors and the onboard state estimate its controller flies
    on (``cableload_sim.physics.kernels.onboard``).

    The gyroscope measures the body rates, the accelerometer the specific force (body frame),
    each with a constant bias (drawn per quadrotor and flight) plus white noise, read at every
    controller update. The estimate integrates them and is corrected by the quadrotor's own
    motion-capture pose (the rate, latency, noise and biases of ``[sensing]``): a third-order
    observer of position, velocity and accelerometer bias, and a complementary filter of
    attitude and gyroscope bias, each with all its poles at its bandwidth. Off unless
    ``enabled`` (the controllers then fly on the true state).
    """

    enabled: bool = False
    """Whether the onboard controllers fly on the estimate; off, on the true state."""
    gyro_noise_density: float = 0.0007
    """White gyroscope noise (rad/s/sqrt(Hz)); per reading, divided by sqrt(update period)."""
    gyro_bias: float = 0.005
    """Standard deviation of each gyroscope axis's constant bias (rad/s)."""
    accel_noise_density: float = 0.016
    """White accelerometer noise (m/s^2/sqrt(Hz))."""
    accel_bias: float = 0.05
    """Standard deviation of each accelerometer axis's constant bias (m/s^2)."""
    position_bandwidth: float = 4.0
    """Poles of the position, velocity and accelerometer-bias observer (rad/s)."""
    attitude_bandwidth: float = 2.0
    """Poles of the attitude and gyroscope-bias filter (rad/s)."""


TEACHER_PRIORS = ("tilt", "wrench")
"""The formations the teacher's cables can be regularized toward (``TeacherParams.prior``)."""


@dataclass(frozen=True)
class TeacherParams:
    """The centralized NMPC teacher: cost weights, bounds and solver settings.

    Weights multiply squared errors integrated over the horizon (each node's term times its
    interval), so they do not depend on the node spacing.
    """

    weight_position: float = 1500.0
    """Load position error (1/m^2 s)."""
    weight_attitude: float = 400.0
    """Load attitude error, squared geodesic angle (1/rad^2 s)."""
    weight_velocity: float = 40.0
    """Load velocity error (s/m^2)."""
    weight_rate: float = 5.0
    """Load angular velocity error (s/rad^2)."""
    weight_cable_jerk: float = 0.02
    """Input: third derivative of each cable's angular velocity (s^5/rad^2)."""
    weight_tension_accel: float = 0.0005
    """Input: second derivative of each tension (s^3/N^2)."""
    weight_direction: float = 5.0
    """Regularization of each cable direction toward the formation prior (1/s): it fixes the
    formation's shape, which the load's motion leaves free with more than three cables."""
    prior: str = "tilt"
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
    min_distance: float = 1.0
    """Smallest distance between two quadrotors (m)."""
    max_cable_jerk: float = 200.0
    """Bound on each component of the input d3r (rad/s^4)."""
    max_tension_accel: float = 2000.0
    """Bound on the input d2t (N/s^2)."""
    separation_margin: float = 0.02
    """Distance the optimizer keeps beyond ``min_distance``, for what the linearization misses
    between two iterations; plans are checked against ``min_distance`` itself (m)."""
    exact_penalty: float = 1.0e4
    """Weight of the exact (L1) penalty on a constraint's violation, per newton, per 0.1 m or
    per normalized input and per second; above every multiplier, the constraints are hard."""
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


@dataclass(frozen=True)
class Config:
    """Everything one configuration file holds."""

    system: SystemParams
    controller: ControllerParams = field(default_factory=ControllerParams)
    simulation: SimulationParams = field(default_factory=SimulationParams)
    mismatch: MismatchParams = field(default_factory=MismatchParams)
    teacher: TeacherParams = field(default_factory=TeacherParams)
    link: LinkParams = field(default_factory=LinkParams)
    sensing: SensingParams = field(default_factory=SensingParams)
    imu: ImuParams = field(default_factory=ImuParams)
    aero: AeroParams = field(default_factory=AeroParams)
    wind: WindParams = field(default_factory=WindParams)
    ball: BallParams = field(default_factory=BallParams)
    battery: BatteryParams = field(default_factory=BatteryParams)
    ground: GroundParams = field(default_factory=lambda: GroundParams())

    def with_uavs(self, n: int) -> Config:
        return dataclasses.replace(self, system=self.system.with_uavs(n))

    def to_dict(self) -> dict:
        """JSON-serializable form (the resolved configuration written beside results)."""
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------
# TOML loading


def _rotor(path: str, table: dict) -> RotorParams:
    checks = {name: _positive for name in (
        "arm_length", "thrust_coeff", "torque_coeff", "speed_max", "time_constant")}
    checks["speed_min"] = _non_negative
    rotor = _fields_from(RotorParams, path, table, checks)
    if rotor.speed_min >= rotor.speed_max:
        raise ConfigError(
            f"{path}.speed_min: expected less than speed_max={rotor.speed_max!r}, "
            f"got {rotor.speed_min!r}"
        )
    return rotor


def _quadrotor(path: str, table: dict) -> QuadrotorParams:
    checks = {
        "mass": _positive,
        "inertia": lambda p, v: _vector(p, v, 3, _positive),
        "attachment": lambda p, v: _vector(p, v, 3),
    }
    return _fields_from(QuadrotorParams, path, table, checks, nested={"rotor": _rotor})


def _cable(path: str, table: dict) -> CableParams:
    checks = {"length": _positive, "stiffness": _positive, "damping": _non_negative}
    return _fields_from(CableParams, path, table, checks)


def _formation(path: str, table: dict) -> FormationParams:
    def angle(p, v):
        v = _non_negative(p, v)
        if v >= 80.0:
            raise ConfigError(f"{p}: expected an angle below 80 deg, got {v!r}")
        return v

    return _fields_from(
        FormationParams, path, table, {"min_cable_angle_deg": angle, "min_spacing_m": _non_negative}
    )


def _controller(path: str, table: dict) -> ControllerParams:
    positive3 = lambda p, v: _vector(p, v, 3, _positive)  # noqa: E731
    checks = {
        "rate_hz": _positive,
        "kp": positive3,
        "kv": positive3,
        "attitude_time_constant": _positive,
        "yaw_time_constant": _positive,
        "rate_gain": positive3,
        "filter_cutoff_hz": _positive,
        "max_tilt_deg": _positive,
        "max_position_error": _positive,
        "hold_compliance": _non_negative,
        "tracking_compliance": _non_negative,
        "pull_cutoff_hz": _positive,
    }
    return _fields_from(ControllerParams, path, table, checks)


def _simulation(path: str, table: dict) -> SimulationParams:
    checks = {name: _positive for name in (
        "physics_dt", "planner_rate_hz", "log_rate_hz", "collision_distance_m",
        "divergence_distance_m")}
    sim = _fields_from(SimulationParams, path, table, checks)
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


def _teacher(path: str, table: dict) -> TeacherParams:
    checks = {f.name: _non_negative for f in dataclasses.fields(TeacherParams)}
    for name in ("tension_max", "thrust_min", "thrust_margin", "max_cable_jerk",
                 "max_tension_accel", "weight_position", "exact_penalty", "barrier",
                 "pace_factor", "pace_recovery"):
        checks[name] = _positive

    checks["max_iter"] = lambda p, v: _integer(p, v, 1)
    checks["rti_iterations"] = lambda p, v: _integer(p, v, 1)
    checks["recovery_iterations"] = lambda p, v: _integer(p, v, 0)
    checks["substeps"] = lambda p, v: _integer(p, v, 1)

    def prior(p, v):
        if v not in TEACHER_PRIORS:
            raise ConfigError(f"{p}: expected one of {list(TEACHER_PRIORS)}, got {v!r}")
        return v

    checks["prior"] = prior
    teacher = _fields_from(TeacherParams, path, table, checks)
    if teacher.tension_min >= teacher.tension_max:
        raise ConfigError(f"{path}.tension_min: expected less than tension_max="
                          f"{teacher.tension_max!r}, got {teacher.tension_min!r}")
    if teacher.thrust_margin > 1.0:
        raise ConfigError(f"{path}.thrust_margin: expected at most 1, got {teacher.thrust_margin!r}")
    if teacher.pace_factor >= 1.0:
        raise ConfigError(f"{path}.pace_factor: expected below 1 (a slowdown), got "
                          f"{teacher.pace_factor!r}")
    for name in ("pace_min", "pace_recovery", "pace_catch_up"):
        if getattr(teacher, name) > 1.0:
            raise ConfigError(f"{path}.{name}: expected at most 1, got {getattr(teacher, name)!r}")
    return teacher


def _boolean(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: expected true or false, got {value!r} ({type(value).__name__})")
    return value


def _link(path: str, table: dict) -> LinkParams:
    checks = {"enabled": _boolean, "drop_fraction": _non_negative, "delay_min_s": _non_negative,
              "delay_max_s": _non_negative}
    link = _fields_from(LinkParams, path, table, checks)
    if link.drop_fraction >= 1.0:
        raise ConfigError(f"{path}.drop_fraction: expected a fraction below 1 (1 loses every "
                          f"plan), got {link.drop_fraction!r}")
    if link.delay_min_s > link.delay_max_s:
        raise ConfigError(f"{path}.delay_min_s: expected at most delay_max_s="
                          f"{link.delay_max_s!r} s, got {link.delay_min_s!r}")
    horizon = HORIZON_S
    if link.delay_max_s >= horizon:
        raise ConfigError(f"{path}.delay_max_s: expected below the plan's horizon "
                          f"({horizon:.2f} s: a later plan has run out on arrival), got "
                          f"{link.delay_max_s!r}")
    return link


def _sensing(path: str, table: dict) -> SensingParams:
    checks = {f.name: _non_negative for f in dataclasses.fields(SensingParams)}
    checks["enabled"] = _boolean
    for name in ("mocap_rate_hz", "load_jerk_psd", "load_angular_accel_psd", "uav_jerk_psd",
                 "uav_angular_accel_psd"):
        checks[name] = _positive
    sensing = _fields_from(SensingParams, path, table, checks)
    if sensing.latency_s > 0.5:
        raise ConfigError(f"{path}.latency_s: expected at most 0.5 s (motion capture takes a "
                          f"few ms), got {sensing.latency_s!r}")
    for name in ("attitude_noise_rad", "attitude_bias_rad"):
        if getattr(sensing, name) > 0.5:
            raise ConfigError(f"{path}.{name}: expected at most 0.5 rad (the filter linearizes "
                              f"small rotations), got {getattr(sensing, name)!r}")
    return sensing


def _imu(path: str, table: dict) -> ImuParams:
    checks = {f.name: _non_negative for f in dataclasses.fields(ImuParams)}
    checks["enabled"] = _boolean
    for name in ("position_bandwidth", "attitude_bandwidth"):
        checks[name] = _positive
    return _fields_from(ImuParams, path, table, checks)


def _check_imu(source: str, imu: ImuParams, sensing: SensingParams, sim: SimulationParams,
               controller: ControllerParams) -> None:
    """The onboard estimate's captures fall on controller updates, its corrections stay
    stable, and no more captures wait at once than it holds (checked when on)."""
    if not imu.enabled:
        return
    update_s = 1.0 / controller.rate_hz
    every = 1.0 / (sensing.mocap_rate_hz * update_s)
    if round(every) < 1 or abs(every - round(every)) > 1e-6:
        raise ConfigError(
            f"{source}:sensing.mocap_rate_hz: with imu.enabled, expected a whole fraction of "
            f"controller.rate_hz={controller.rate_hz!r} Hz (a capture at a controller update), "
            f"got {sensing.mocap_rate_hz!r}")
    period = round(every) * update_s
    fastest = max(imu.position_bandwidth, imu.attitude_bandwidth)
    if 3.0 * fastest * period > 0.5:
        raise ConfigError(
            f"{source}:imu: expected bandwidths below {0.5 / (3.0 * period):.3g} rad/s at "
            f"{sensing.mocap_rate_hz!r} Hz captures (each correction at most half the error), "
            f"got position_bandwidth={imu.position_bandwidth!r}, "
            f"attitude_bandwidth={imu.attitude_bandwidth!r}")
    waiting = math.ceil(sensing.latency_s / period) + 1
    if waiting > IMU_PENDING_CAPTURES:
        raise ConfigError(
            f"{source}:sensing.latency_s: with imu.enabled, expected at most "
            f"{(IMU_PENDING_CAPTURES - 1) * period!r} s ({IMU_PENDING_CAPTURES} captures "
            f"in flight), got {sensing.latency_s!r}")


IMU_PENDING_CAPTURES = 4
"""Captures the onboard estimate holds while they are in flight (``layout.CS_EST_PENDING``)."""


def _check_sensing_rate(source: str, sensing: SensingParams, sim: SimulationParams) -> None:
    """Captures fall on physics steps, at least one per planner period (checked when on)."""
    if not sensing.enabled:
        return
    _whole_steps(f"{source}:sensing.mocap_rate_hz", sensing.mocap_rate_hz, sim.physics_dt)
    if sensing.mocap_rate_hz < sim.planner_rate_hz:
        raise ConfigError(
            f"{source}:sensing.mocap_rate_hz: expected at least simulation.planner_rate_hz="
            f"{sim.planner_rate_hz!r} Hz (a capture every planner period), got "
            f"{sensing.mocap_rate_hz!r}")


def _aero(path: str, table: dict) -> AeroParams:
    checks = {
        "air_density": _positive,
        "load_drag_coeff": _non_negative,
        "quadrotor_drag": lambda p, v: _vector(p, v, 3, _non_negative),
        "rotor_drag_coeff": _non_negative,
    }
    return _fields_from(AeroParams, path, table, checks)


def _wind(path: str, table: dict) -> WindParams:
    checks = {
        "mean": lambda p, v: _vector(p, v, 3),
        "turbulence_sigma": lambda p, v: _vector(p, v, 3, _non_negative),
        "turbulence_length": lambda p, v: _vector(p, v, 3, _positive),
        "sample_dt": _positive,
        "seed": lambda p, v: _integer(p, v, 0),
    }
    wind = _fields_from(WindParams, path, table, checks)
    if wind.sample_dt > 0.1:
        raise ConfigError(f"{path}.sample_dt: expected at most 0.1 s (turbulence changes "
                          f"faster), got {wind.sample_dt!r}")
    return wind


def _scale(path: str, value: Any) -> Scale:
    """A positive ratio, or a non-empty list of them (one per quadrotor)."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError(f"{path}: expected a positive number or a list of them (one per "
                              f"quadrotor), got {value!r}")
        return tuple(_positive(f"{path}[{k}]", v) for k, v in enumerate(value))
    return _positive(path, value)


def _mismatch(path: str, table: dict) -> MismatchParams:
    checks = {
        "load_mass_scale": _positive,
        "attachment_offsets": _points,
        "cable_length_deltas": _number_list,
        "load_com_offset": lambda p, v: _vector(p, v, 3),
    }
    for name in ("quadrotor_mass_scale", "quadrotor_inertia_scale", "thrust_coeff_scale",
                 "torque_coeff_scale", "motor_time_constant_scale"):
        checks[name] = _scale
    return _fields_from(MismatchParams, path, table, checks)


MAX_BALL_STEP_PHASE = 0.5
"""Largest angle (rad) the ball's wall contact turns through in one physics step,
sqrt(k / m) physics_dt: the bounce is then resolved by some 12 steps."""


def _ball(path: str, table: dict, load: LoadParams, sim: SimulationParams) -> BallParams:
    checks = {"enabled": _boolean, "mass": _positive, "radius": _positive,
              "stiffness": _positive, "damping": _non_negative, "friction": _non_negative,
              "slip_speed": _positive}
    ball = _fields_from(BallParams, path, table, checks)
    if ball.enabled and 2.0 * ball.radius >= min(load.size):
        raise ConfigError(f"{path}.radius: expected a ball that fits in the load's box "
                          f"{list(load.size)} m (radius below {min(load.size) / 2:g}), got "
                          f"{ball.radius!r}")
    phase = ball.contact_frequency() * sim.physics_dt
    if ball.enabled and phase > MAX_BALL_STEP_PHASE:
        raise ConfigError(
            f"{path}.stiffness: {ball.stiffness!r} N/m on {ball.mass!r} kg bounces at "
            f"{ball.contact_frequency():.4g} rad/s, {phase:.3g} rad per physics step of "
            f"{sim.physics_dt!r} s; expected at most {MAX_BALL_STEP_PHASE} (a softer contact, "
            "a heavier ball or a shorter step)")
    return ball


def _battery(path: str, table: dict) -> BatteryParams:
    checks = {"enabled": _boolean, "cells": lambda p, v: _integer(p, v, 1, 14),
              "capacity_ah": _positive, "internal_resistance": _non_negative,
              "efficiency": _positive, "initial_charge": _positive,
              "cell_ocv": lambda p, v: _vector(p, v, len(BATTERY_CELL_OCV), _positive)}
    battery = _fields_from(BatteryParams, path, table, checks)
    for name in ("efficiency", "initial_charge"):
        if getattr(battery, name) > 1.0:
            raise ConfigError(f"{path}.{name}: expected a fraction in (0, 1], got "
                              f"{getattr(battery, name)!r}")
    if any(b <= a for a, b in zip(battery.cell_ocv, battery.cell_ocv[1:])):
        raise ConfigError(f"{path}.cell_ocv: expected voltages rising with the charge, got "
                          f"{list(battery.cell_ocv)!r}")
    return battery


# --- ground contact (its own block: GroundParams and its loader) ----------------------------

SNAP_MODELS = ("spring", "inelastic")
"""How a slack cable snapping taut is simulated (``GroundParams.cable_snap``)."""


@dataclass(frozen=True)
class GroundParams:
    """The ground, the plane z = 0: the load's box (its 8 corners) and each quadrotor (its 4
    landing points, under the rotor hubs ``landing_height`` below the centre of gravity)
    rest on it. Each point below the plane is pushed up by ``max(0, k d - c d')`` (d its
    depth, d' its downward speed: unilateral, pushes only) and held by Coulomb friction
    ``-mu N s / max(|s|, slip_speed)`` of its slip velocity s (regularized below
    ``slip_speed``). ``cable_snap`` chooses how a slack cable that reaches its length is
    simulated: ``spring`` (the cable's spring-damper alone) or ``inelastic`` (RotorTM's model:
    an impulse along the cable first removes the separating velocity of its two ends,
    conserving momentum; the spring-damper carries the load after)."""

    enabled: bool = False
    stiffness: float = 5000.0
    """Normal force per metre of depth, per contact point (N/m)."""
    damping: float = 40.0
    """Normal force per m/s of downward speed, per contact point (N s/m)."""
    friction: float = 0.6
    """Coulomb friction coefficient (-)."""
    slip_speed: float = 0.02
    """Slip speed below which friction grows linearly from 0 (m/s)."""
    landing_height: float = 0.05
    """Height of a quadrotor's centre of gravity above its landing points (m)."""
    cable_snap: str = "spring"
    """``spring`` or ``inelastic`` (see the class docstring)."""

    def inelastic_snap(self) -> bool:
        return self.cable_snap == "inelastic"


MAX_GROUND_STEP_PHASE = 0.5
"""Largest angle (rad) the stiffest contact mode turns through in one physics step."""


def _ground(path: str, table: dict, system: SystemParams, sim: SimulationParams) -> GroundParams:
    def snap(p, v):
        if v not in SNAP_MODELS:
            raise ConfigError(f"{p}: expected one of {list(SNAP_MODELS)}, got {v!r}")
        return v

    checks = {"enabled": _boolean, "stiffness": _positive, "damping": _non_negative,
              "friction": _non_negative, "slip_speed": _positive,
              "landing_height": _positive, "cable_snap": snap}
    ground = _fields_from(GroundParams, path, table, checks)
    # the stiffest mode: one quadrotor on its four points (the load is heavier)
    mass = min(q.mass for q in system.quadrotors)
    phase = math.sqrt(4.0 * ground.stiffness / mass) * sim.physics_dt
    if phase > MAX_GROUND_STEP_PHASE:
        raise ConfigError(
            f"{path}.stiffness: {ground.stiffness!r} N/m per point under a {mass!r} kg "
            f"quadrotor bounces at {phase / sim.physics_dt:.4g} rad/s, {phase:.3g} rad per "
            f"physics step of {sim.physics_dt!r} s; expected at most {MAX_GROUND_STEP_PHASE}")
    return ground


def _load(path: str, table: dict, n_uavs: int | None) -> LoadParams:
    _check_table(
        path, table,
        {"mass", "size", "inertia", "attachments", "uavs", "attachment_radius", "attachment_height"},
    )
    kwargs: dict[str, Any] = {}
    if "mass" in table:
        kwargs["mass"] = _positive(f"{path}.mass", table["mass"])
    if "size" in table:
        kwargs["size"] = _vector(f"{path}.size", table["size"], 3, _positive)
    if "inertia" in table:
        kwargs["inertia"] = _vector(f"{path}.inertia", table["inertia"], 3, _positive)
    if "uavs" in table:
        table_n = _integer(f"{path}.uavs", table["uavs"], 2, MAX_UAVS)
        if n_uavs is not None and n_uavs != table_n:
            raise ConfigError(f"{path}.uavs: {table_n} conflicts with the requested {n_uavs} uavs")
        n_uavs = table_n
    if "attachments" in table:
        points = _points(f"{path}.attachments", table["attachments"])
        if n_uavs is not None and len(points) != n_uavs:
            raise ConfigError(
                f"{path}.attachments: expected {n_uavs} points (one per quadrotor), "
                f"got {len(points)}"
            )
        kwargs["attachments"] = points
    elif n_uavs is not None:
        radius = _positive(f"{path}.attachment_radius", table.get("attachment_radius", 0.3))
        height = _number(f"{path}.attachment_height", table.get("attachment_height", 0.06))
        kwargs["attachments"] = polygon_attachments(n_uavs, radius, height)
    return LoadParams(**kwargs)


def config_from_dict(data: dict, source: str = "config") -> Config:
    """Build a ``Config`` from a parsed TOML document; ``source`` names it in errors."""
    _check_table(
        source, data,
        {"gravity", "load", "quadrotor", "cable", "formation", "controller", "simulation",
         "mismatch", "teacher", "link", "sensing", "imu", "aero", "wind", "ball", "battery", "ground"},
    )
    load = _load(f"{source}:load", data.get("load", {}), None)
    n = len(load.attachments)
    quad = _quadrotor(f"{source}:quadrotor", data.get("quadrotor", {}))
    cable = _cable(f"{source}:cable", data.get("cable", {}))
    system = SystemParams(
        load=load,
        quadrotors=(quad,) * n,
        cables=(cable,) * n,
        gravity=_positive(f"{source}:gravity", data.get("gravity", 9.81)),
        formation=_formation(f"{source}:formation", data.get("formation", {})),
    )
    mismatch = _mismatch(f"{source}:mismatch", data.get("mismatch", {}))
    mismatch.apply(system)  # validates lengths against n now, not at first use
    controller = _controller(f"{source}:controller", data.get("controller", {}))
    simulation = _simulation(f"{source}:simulation", data.get("simulation", {}))
    _check_rates(source, controller, simulation)
    sensing = _sensing(f"{source}:sensing", data.get("sensing", {}))
    _check_sensing_rate(source, sensing, simulation)
    imu = _imu(f"{source}:imu", data.get("imu", {}))
    _check_imu(source, imu, sensing, simulation, controller)
    return Config(
        system=system,
        controller=controller,
        simulation=simulation,
        mismatch=mismatch,
        teacher=_teacher(f"{source}:teacher", data.get("teacher", {})),
        link=_link(f"{source}:link", data.get("link", {})),
        sensing=sensing,
        imu=imu,
        aero=_aero(f"{source}:aero", data.get("aero", {})),
        wind=_wind(f"{source}:wind", data.get("wind", {})),
        ball=_ball(f"{source}:ball", data.get("ball", {}), load, simulation),
        battery=_battery(f"{source}:battery", data.get("battery", {})),
        ground=_ground(f"{source}:ground", data.get("ground", {}), system, simulation),
    )


PAPER_CONFIG = "paper.toml"


def read_config_text(path: Path, what: str) -> str:
    """The text of a configuration file, or a ``ConfigError`` naming it: missing, a folder or a
    device, too large, unreadable or not UTF-8 text."""
    if not path.exists():
        raise ConfigError(f"{what} {str(path)!r} does not exist")
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} is not a regular file")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{what} {str(path)!r}: cannot be read ({err.strerror})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{what} {str(path)!r} is larger than {MAX_CONFIG_BYTES} bytes; "
                          "expected a TOML file of a few kB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} {str(path)!r} is not UTF-8 text (byte {err.start}); "
                          "expected a TOML file") from None


def read_toml(path: Path, what: str) -> dict:
    """A TOML file parsed, or a ``ConfigError`` naming it (see ``read_config_text``)."""
    text = read_config_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from err


def load_config(path: str | Path | None = None, uavs: int | None = None,
                overrides: Sequence[str] = ()) -> Config:
    """Read a TOML configuration (the paper's setup when ``path`` is None).

    ``overrides`` (``table.key=value``, as ``--set`` takes them) replace values of the parsed
    document before it is validated as the file is. ``uavs`` replaces the number of
    quadrotors, placing the attachment points on a regular polygon of the configured mean
    radius.
    """
    if path is None:
        text = resources.files("cableload_sim.configs").joinpath(PAPER_CONFIG).read_text()
        source = PAPER_CONFIG
        data = tomllib.loads(text)
    else:
        path = Path(path)
        source = str(path)
        data = read_toml(path, "config file")
    config = build_with_overrides(data, overrides, lambda d: config_from_dict(d, source))
    if uavs is not None:
        config = config.with_uavs(uavs)
    return config


# ---------------------------------------------------------------------------------------------
# Overrides: ``table.key=value`` on the command line


_KEY_PART = re.compile(r"[A-Za-z0-9_-]+")
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./:-]*")


@dataclass(frozen=True)
class Override:
    """One ``table.key=value``: the dotted key's parts and the value parsed as TOML."""

    text: str
    key: tuple[str, ...]
    value: Any

    @classmethod
    def parse(cls, text: str) -> Override:
        """``text`` as ``a.b.c=VALUE``, VALUE in TOML syntax (``0.5``, ``true``, ``[0.5, 0.4]``,
        ``"name"``); a bare word such as ``paper`` is taken as a string."""
        if not isinstance(text, str) or "=" not in text:
            raise ConfigError(f"--set {text!r}: expected TABLE.KEY=VALUE, e.g. "
                              "quadrotor.rotor.time_constant=0.03")
        name, raw = (part.strip() for part in text.split("=", 1))
        key = tuple(name.split("."))
        if not all(_KEY_PART.fullmatch(part) for part in key):
            raise ConfigError(f"--set {text!r}: {name!r} is not a dotted key; expected names of "
                              "letters, digits, _ and - joined by dots, e.g. load.mass")
        try:
            value = tomllib.loads(f"value = {raw}")["value"]
        except tomllib.TOMLDecodeError as err:
            if not _BARE_WORD.fullmatch(raw):
                raise ConfigError(
                    f"--set {text!r}: {raw!r} is not a TOML value ({err}); expected e.g. 0.5, "
                    'true, [0.5, 0.4, 0.1] or "text"') from None
            value = raw
        return cls(text, key, value)

    def apply(self, data: dict) -> None:
        """Set the value in the parsed document ``data``, making the tables it lacks."""
        table = data
        for depth, part in enumerate(self.key[:-1]):
            inner = table.setdefault(part, {})
            if not isinstance(inner, dict):
                raise ConfigError(
                    f"--set {self.text!r}: {'.'.join(self.key[:depth + 1])} is a value "
                    f"({inner!r}), not a table")
            table = inner
        table[self.key[-1]] = self.value

    def named_in(self, message: str) -> bool:
        """Whether a validation error ``message`` is about this key."""
        dotted = ".".join(self.key)
        parent = ".".join(self.key[:-1])
        return (re.search(rf"[:.]{re.escape(dotted)}\b", message) is not None
                or (f"{parent}: unknown key {self.key[-1]!r}" in message)
                or (not parent and f": unknown key {self.key[-1]!r}" in message))


def build_with_overrides(data: dict, overrides: Sequence[str], build: Callable[[dict], Any]):
    """``build(data)``, then, with ``overrides``, ``build`` of ``data`` with them applied.

    The document alone is built first so that its own errors name the file; an error after
    the overrides is theirs, and names the ones it is about (all of them when it cannot tell).
    """
    result = build(data)
    if not overrides:
        return result
    parsed = [Override.parse(text) for text in overrides]
    changed = copy.deepcopy(data)
    for override in parsed:
        override.apply(changed)
    try:
        return build(changed)
    except ConfigError as err:
        blamed = [o.text for o in parsed if o.named_in(str(err))] or [o.text for o in parsed]
        raise ConfigError(f"--set {', '.join(map(repr, blamed))}: {err}") from None
