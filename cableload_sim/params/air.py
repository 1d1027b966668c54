"""The air: drag on the load and the quadrotors, rotor drag (``[aero]``), wind and turbulence
(``[wind]``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.params.system import LoadParams


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
        return self.load_drag_coeff > 0.0 or any(self.quadrotor_drag) or self.rotor_drag_coeff > 0.0


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


def _aero(path: str, table: dict) -> AeroParams:
    fields = {
        "air_density": checks.positive,
        "load_drag_coeff": checks.non_negative,
        "quadrotor_drag": checks.vector(3, checks.non_negative),
        "rotor_drag_coeff": checks.non_negative,
    }
    return checks.build(AeroParams, path, table, fields)


def _wind(path: str, table: dict) -> WindParams:
    fields = {
        "mean": checks.vector(3),
        "turbulence_sigma": checks.vector(3, checks.non_negative),
        "turbulence_length": checks.vector(3, checks.positive),
        "sample_dt": checks.positive,
        "seed": checks.integer(0),
    }
    wind = checks.build(WindParams, path, table, fields)
    if wind.sample_dt > 0.1:
        raise ConfigError(
            f"{path}.sample_dt: expected at most 0.1 s (turbulence changes faster), got {wind.sample_dt!r}"
        )
    return wind
