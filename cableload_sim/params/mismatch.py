"""What the simulated system does differently from the configured one (``[mismatch]``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.params.system import QuadrotorParams, SystemParams

Scale = float | tuple[float, ...]
"""A ratio for every quadrotor (one number) or one per quadrotor (a list of n)."""


MAX_COM_PRODUCT_SHARE = 0.1
"""Largest product of inertia a load centre-of-mass offset may add (m c_j c_k), as a share of
the smallest principal moment: the kernels integrate the load in its principal axes, so
those products are left out (exact for an offset along one load axis)."""


def _xyz(values: Iterable[float]) -> tuple[float, float, float]:
    """Three numbers as a 3-tuple of floats."""
    x, y, z = values
    return float(x), float(y), float(z)


def _per_uav(path: str, value: Scale, n: int) -> tuple[float, ...]:
    """``value`` (a ``Scale``) as one ratio per quadrotor."""
    if isinstance(value, tuple):
        if len(value) != n:
            raise ConfigError(
                f"{path}: expected one number for every quadrotor or a list of "
                f"{n} (one per quadrotor), got {len(value)} values"
            )
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
                _xyz(a + d for a, d in zip(p, off)) for p, off in zip(attachments, self.attachment_offsets)
            )
        mass = load.mass * self.load_mass_scale
        inertia = load.inertia_matrix().diagonal() * self.load_mass_scale
        com = tuple(float(c) for c in self.load_com_offset)
        if any(com):
            inertia = _inertia_about_com(inertia, mass, np.array(com))
            attachments = tuple(_xyz(a - c for a, c in zip(p, com)) for p in attachments)
        load = dataclasses.replace(
            load,
            mass=mass,
            inertia=_xyz(inertia),
            attachments=attachments,
            box_centre=_xyz(b - c for b, c in zip(load.box_centre, com)),
        )
        cables = system.cables
        if self.cable_length_deltas is not None:
            if len(self.cable_length_deltas) != n:
                raise ConfigError(
                    f"mismatch.cable_length_deltas: expected {n} values (one per cable), "
                    f"got {len(self.cable_length_deltas)}"
                )
            cables = tuple(
                dataclasses.replace(c, length=c.length + d) for c, d in zip(cables, self.cable_length_deltas)
            )
            for k, c in enumerate(cables):
                if c.length <= 0.0:
                    raise ConfigError(
                        f"mismatch.cable_length_deltas[{k}]: makes cable {k} length "
                        f"{c.length!r} m; expected a positive length"
                    )
        return dataclasses.replace(
            system, load=load, cables=cables, quadrotors=self._quadrotors(system.quadrotors)
        )

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
                inertia=_xyz(j * inertia[i] for j in q.inertia),
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
            "smaller offset or a larger load inertia"
        )
    products = mass * np.abs(np.array([com[0] * com[1], com[1] * com[2], com[0] * com[2]]))
    if products.max() > MAX_COM_PRODUCT_SHARE * moments.min():
        raise ConfigError(
            f"{where}: adds a product of inertia of {products.max():.3g} kg m^2, more than "
            f"{MAX_COM_PRODUCT_SHARE:.0%} of the smallest principal moment ({moments.min():.3g}); "
            "the simulated load keeps its principal axes, so expected an offset mostly along "
            "one load axis"
        )
    return moments


_SCALE = checks.one_or_each(checks.positive)
"""A positive ratio, or a non-empty list of them (one per quadrotor)."""


def _mismatch(path: str, table: dict) -> MismatchParams:
    fields = {
        "load_mass_scale": checks.positive,
        "attachment_offsets": checks.points,
        "cable_length_deltas": checks.sequence(),
        "load_com_offset": checks.vector(3),
    }
    for name in (
        "quadrotor_mass_scale",
        "quadrotor_inertia_scale",
        "thrust_coeff_scale",
        "torque_coeff_scale",
        "motor_time_constant_scale",
    ):
        fields[name] = _SCALE
    return checks.build(MismatchParams, path, table, fields)
